// Libraries: code loaded once for every device, context-independently.
//
//   Library lib = Library::load(cudakit_kernels::test_fatbin());
//   auto on0 = lib.kernel<void(float, const float*, float*, int)>(Device::get(0), "saxpy");
//   auto on1 = lib.kernel<void(float, const float*, float*, int)>(Device::get(1), "saxpy");
//
// A Library wraps cuLibraryLoadData (CUDA 12.0): the driver keeps one copy of the code and
// loads it into a device's context when a kernel is first asked for there. Use it for code
// that several GPUs run; use a Module (module.hpp) for one device, where the JIT's logs are
// wanted, or where loading must happen (and fail) at a known point.
//
// The JIT policy applies per device, when a kernel is asked for there: the same fatbin may
// run native code on one GPU and need the JIT on another (code_for() says which). JIT logs
// are not collected: the driver compiles lazily, after the load call has returned.
//
// Lifetime (DESIGN 4): the library stays loaded while the Library or any Kernel or
// Function from it lives; each device's kernels keep that device's primary context (the
// library's retain). Unload errors are parked.
//
// Thread safety: as Module: lookups are cached under the library's lock; handles are shared.
#pragma once

#include <cuda.h>

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cudakit/export.hpp"
#include "cudakit/kernel.hpp"
#include "cudakit/module.hpp"
#include "cudakit/module_image.hpp"

namespace cudakit {

namespace detail {
struct LibraryState;
}

/// Code loaded once for every device (see above): a shared owner, move-only; its kernels
/// keep it loaded. Calls that need it throw EmptyHandle on an empty one.
class CUDAKIT_API Library {
 public:
  /// Loads an image from memory (signed or unsigned bytes; not needed after the call) or
  /// from a file. Every load throws InvalidArgument for an image of no known format or a
  /// file that cannot be read, ModuleLoadError when the driver refuses it (no JIT log:
  /// the driver compiles lazily), DriverUnavailable without a driver. The JIT policy is
  /// checked per device, when a kernel is asked for there.
  static Library load(std::span<const std::byte> image, const ModuleOptions& options = {});
  static Library load(std::span<const unsigned char> image, const ModuleOptions& options = {});
  static Library load(const std::filesystem::path& file, const ModuleOptions& options = {});
  /// NVRTC's output; the program's name expressions become kernel names.
  static Library load(const CompiledProgram& program, const ModuleOptions& options = {});

  /// An empty library (what a moved-from one becomes).
  Library() = default;
  Library(Library&&) noexcept = default;
  Library& operator=(Library&&) noexcept = default;
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  ~Library() = default;

  /// The kernel `name` on `device`, typed (see Module::kernel). Throws InvalidArgument when
  /// the library has no such kernel (listing those it has), or when the device would have
  /// to JIT-compile PTX and the policy refuses.
  template <class Sig>
  Kernel<Sig> kernel(detail::OnDevice device, std::string_view name) const {
    return Kernel<Sig>::checked(function(device, name));
  }
  /// The same, untyped (runtime-checked launches).
  Function function(detail::OnDevice device, std::string_view name) const;

  /// The driver's names of every kernel (CUDA 12.4+; FeatureUnavailable before).
  std::vector<std::string> kernel_names() const;

  /// What `device` runs from this library: native machine code or JIT-compiled PTX.
  /// Throws InvalidArgument as choose_code() does when the device cannot run it.
  CodeChoice code_for(detail::OnDevice device) const;
  /// What the image holds (architectures of its machine code and PTX).
  const ImageContents& contents() const;

  /// The driver's handle (null when empty), and whether a library is held.
  CUlibrary handle() const noexcept;
  explicit operator bool() const noexcept { return state_ != nullptr; }

 private:
  explicit Library(std::shared_ptr<detail::LibraryState> state) noexcept : state_(std::move(state)) {}
  detail::LibraryState& checked_state() const;
  static Library load_image(std::span<const std::byte> image, std::string source, detail::NameExpressions names,
                            const ModuleOptions& options);
  std::shared_ptr<detail::LibraryState> state_;
};

}  // namespace cudakit
