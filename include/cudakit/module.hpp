// Modules: code loaded into one device's primary context.
//
//   Module m = Module::load(device, cudakit_kernels::test_fatbin());        // from memory
//   Module m = Module::load(device, "kernels.ptx", {.jit_policy = JitPolicy::refuse});
//   Module m = Module::load(device, program.compile(device));               // NVRTC output
//   auto saxpy = m.kernel<void(float, const float*, float*, int)>("saxpy");
//
// The format (cubin, PTX or fatbin) is detected from the bytes (module_image.hpp). Before
// the driver sees the image, cudakit reads which architectures it has and predicts what the
// driver will run on this GPU: report() says whether that is native machine code or PTX
// the driver JIT-compiles, and JitPolicy::refuse turns the silent JIT fallback into an error
// naming the architectures the image has. PTX text needs no NUL terminator (cudakit adds
// one); from a std::string, pass std::as_bytes(std::span(text)).
//
// A failed load throws ModuleLoadError, which carries the driver's code and, for PTX, the
// JIT's error log. The JIT's info log of a successful load is in report().jit_log.
//
// Module or Library? A Module lives in one device's primary context (cuModuleLoadDataEx):
// it loads eagerly, JIT logs are available, and its kernels are that device's. A Library
// (library.hpp, cuLibraryLoadData) is loaded once for every device, context-independently,
// and hands out a kernel per device: use it for code shared by several GPUs.
//
// Lifetime (DESIGN 4): a module keeps its device's primary context alive (the library's
// retain, detail::library_context) and stays loaded while the Module or any Kernel or
// Function from it lives; the last one unloads it (errors there are parked, never thrown).
//
// Thread safety: a Module may be used from any number of threads at once: kernel lookups
// are cached once per name under the module's lock; Kernel handles are shared freely. The
// owner is moved or destroyed by one thread at a time, like any object.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cudakit/export.hpp"
#include "cudakit/context.hpp"
#include "cudakit/device.hpp"
#include "cudakit/error.hpp"
#include "cudakit/kernel.hpp"
#include "cudakit/module_image.hpp"

namespace cudakit {

class CompiledProgram;

/// Options for the driver's PTX JIT (ignored for machine code).
struct CUDAKIT_API JitOptions {
  /// 0 to 4 (the driver's default is 4).
  std::optional<int> optimization_level = std::nullopt;
  /// A cap on registers per thread.
  std::optional<int> max_registers = std::nullopt;
  /// Line information (CU_JIT_GENERATE_LINE_INFO), for profilers and sanitizers.
  bool line_info = false;
  /// Full debug information (CU_JIT_GENERATE_DEBUG_INFO); slows the code.
  bool debug_info = false;
  /// The size of each of the JIT's info and error log buffers.
  std::size_t log_bytes = 64 * 1024;
};

/// How a Module or Library loads: whether PTX may be JIT-compiled, and the JIT's options.
struct CUDAKIT_API ModuleOptions {
  JitPolicy jit_policy = JitPolicy::allow;
  JitOptions jit = {};
};

/// What was loaded and what the driver runs from it.
struct CUDAKIT_API LoadReport {
  /// Where the image came from: "file 'k.fatbin'", "memory", "program 'saxpy.cu'".
  std::string source;
  ImageContents contents;
  /// Native machine code, or PTX the driver JIT-compiled.
  CodeKind code = CodeKind::native;
  /// The machine code's architecture (native) or the PTX's target (jit), e.g. 90.
  int arch = 0;
  /// The JIT's info log (PTX loads; empty otherwise).
  std::string jit_log;

  /// Whether the driver JIT-compiled PTX (code is CodeKind::jit).
  bool jit_compiled() const noexcept { return code == CodeKind::jit; }
  /// "fatbin with machine code for sm_90 and PTX for compute_90 from memory: runs native
  /// machine code for sm_90".
  std::string describe() const;
};

/// Loading a module failed. code() is the driver's; log() is the JIT's error log (PTX).
class CUDAKIT_API ModuleLoadError : public DriverError {
 public:
  /// `message` is the whole what(); `log` the JIT's error log (empty when none).
  ModuleLoadError(CUresult code, std::string call, std::string resource, std::string message, std::string log)
      : DriverError(code, std::move(call), std::move(resource), std::move(message)), log_(std::move(log)) {}
  /// The JIT's error log (PTX loads; empty otherwise).
  const std::string& log() const noexcept { return log_; }
  ErrorKind kind() const noexcept override { return ErrorKind::module_load; }

 private:
  std::string log_;
};

namespace detail {
struct ModuleState;

/// The device a module is loaded on: a Device, or its primary context.
struct CUDAKIT_API OnDevice {
  OnDevice(const Device& device) noexcept : ordinal(device.ordinal()) {}
  OnDevice(ContextRef context);
  OnDevice(const Context& context) : OnDevice(context.ref()) {}
  int ordinal;
};

/// Where kernel names resolve: the name expressions of an NVRTC program ("fill_value<float>")
/// map to the names the driver knows.
using NameExpressions = std::vector<std::pair<std::string, std::string>>;
}  // namespace detail

/// Code loaded into one device's primary context (see above): a shared owner, move-only;
/// its kernels keep it loaded. Every load throws InvalidArgument for an image of no known
/// format or one the device cannot run (or could only JIT while the policy refuses),
/// ModuleLoadError when the driver refuses it, DriverUnavailable without a driver.
class CUDAKIT_API Module {
 public:
  /// Loads an image from memory. The bytes are not needed after the call.
  static Module load(detail::OnDevice device, std::span<const std::byte> image, const ModuleOptions& options = {});
  /// The same from unsigned bytes (what xxd -i and embedded fatbins give).
  static Module load(detail::OnDevice device, std::span<const unsigned char> image,
                     const ModuleOptions& options = {});
  /// Loads an image from a file (InvalidArgument when it cannot be read).
  static Module load(detail::OnDevice device, const std::filesystem::path& file, const ModuleOptions& options = {});
  /// Loads NVRTC's output; the program's name expressions become kernel names.
  static Module load(detail::OnDevice device, const CompiledProgram& program, const ModuleOptions& options = {});

  /// An empty module (what a moved-from one becomes): calls that need it throw EmptyHandle.
  Module() = default;
  Module(Module&&) noexcept = default;
  Module& operator=(Module&&) noexcept = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  ~Module() = default;

  /// A typed kernel (kernel.hpp), checked against the kernel's parameter info where the
  /// driver has it. `name` is the driver's name (extern "C" names are plain; C++ names are
  /// mangled) or a name expression of the program the module came from. A missing name
  /// throws InvalidArgument listing the kernels the module has.
  template <class Sig>
  Kernel<Sig> kernel(std::string_view name) const {
    return Kernel<Sig>::checked(function(name));
  }
  /// An untyped kernel (runtime-checked launches).
  Function function(std::string_view name) const;

  /// The driver's names of every kernel in the module. Throws FeatureUnavailable on
  /// drivers before CUDA 12.4.
  std::vector<std::string> kernel_names() const;

  /// What was loaded and what the driver runs from it (with the JIT's info log).
  const LoadReport& report() const;
  /// Whether the driver JIT-compiled PTX for this module.
  bool jit_compiled() const { return report().jit_compiled(); }

  /// The driver's handle (null when empty), the device's ordinal (-1 when empty), and
  /// whether a module is held.
  CUmodule handle() const noexcept;
  int device_ordinal() const noexcept;
  explicit operator bool() const noexcept { return state_ != nullptr; }

 private:
  explicit Module(std::shared_ptr<detail::ModuleState> state) noexcept : state_(std::move(state)) {}
  detail::ModuleState& checked_state() const;
  static Module load_image(int device, std::span<const std::byte> image, std::string source,
                           detail::NameExpressions names, const ModuleOptions& options);
  std::shared_ptr<detail::ModuleState> state_;
};

}  // namespace cudakit
