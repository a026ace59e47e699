// Internal: what Module and Library share: reading images, JIT option arrays, name
// resolution, the listing of their kernels and the messages of a failed load or lookup.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cudakit/error.hpp"
#include "cudakit/module.hpp"
#include "cudakit/module_image.hpp"
#include "driver/checked_call.hpp"
#include "launch/parameter_layout.hpp"

namespace cudakit::detail {

/// An image ready for the driver: inspected, its kernels' parameter layouts read, and
/// NUL-terminated when it is PTX.
struct PreparedImage {
  ImageContents contents;
  ParameterLayouts layouts;
  const void* data = nullptr;  // what the driver gets
  std::vector<std::byte> owned;  // a copy, when one was needed
};

PreparedImage prepare_image(std::span<const std::byte> image);

/// The whole file; InvalidArgument naming the path and the reason when it cannot be read.
std::vector<std::byte> read_image_file(const std::filesystem::path& file);

/// The name the driver knows for `name`: its lowered name when it is a name expression.
std::string resolve_name(const NameExpressions& names, std::string_view name);

/// JIT options and their log buffers, laid out as cuModuleLoadDataEx and
/// cuLibraryLoadData take them.
class JitOptionArrays {
 public:
  JitOptionArrays(const JitOptions& options, bool with_logs);
  JitOptionArrays(const JitOptionArrays&) = delete;
  JitOptionArrays& operator=(const JitOptionArrays&) = delete;

  unsigned count() const noexcept { return count_; }
  CUjit_option* keys() noexcept { return keys_; }
  void** values() noexcept { return values_; }
  /// The logs as the driver filled them (call after the load).
  std::string info_log() const;
  std::string error_log() const;

 private:
  void add(CUjit_option key, void* value);
  static constexpr unsigned capacity = 12;
  CUjit_option keys_[capacity] = {};
  void* values_[capacity] = {};
  unsigned count_ = 0;
  std::vector<char> info_, error_;
  int info_size_slot_ = -1, error_size_slot_ = -1;
};

/// Throws for a failed load: ModuleLoadError with the JIT's error log, or the sticky
/// driver error (which poisons the device) for a sticky code.
[[noreturn]] void throw_load_error(CUresult code, const char* call, const Resource& resource, const std::string& what,
                                   const std::string& error_log);

/// The names of the kernels the driver lists for a module (cuModuleGetFunctionCount,
/// cuModuleEnumerateFunctions, cuFuncGetName on CUfunctions) or a library
/// (cuLibraryGetKernelCount, cuLibraryEnumerateKernels, cuKernelGetName on CUkernels), in
/// the driver's order; nullopt when this driver cannot list them (CUDA 12.4 can). A failed
/// call throws, naming `resource`.
template <class Item, class Owner, class Count, class Enumerate, class Name>
std::optional<std::vector<std::string>> listed_kernels(Owner owner, const Resource& resource, Count count,
                                                       Enumerate enumerate, Name name) {
  if (!driver::has(enumerate.id) || !driver::has(name.id)) return std::nullopt;
  unsigned n = 0;
  checked_call(count, resource, &n, owner);
  std::vector<Item> items(n);
  if (n > 0) checked_call(enumerate, resource, items.data(), n, owner);
  std::vector<std::string> names;
  for (Item item : items) {
    const char* s = nullptr;
    checked_call(name, resource, &s, item);
    names.emplace_back(s != nullptr ? s : "");
  }
  return names;
}

/// "module 'file k.cubin' on device 0 has no kernel named 'x'; its kernels are: a, b".
/// `kernels` is null when the driver cannot list them.
std::string missing_kernel_message(const std::string& what, std::string_view name,
                                   const std::optional<std::vector<std::string>>& kernels,
                                   const NameExpressions& names);

/// "device 0 (NVIDIA H200, sm_90)".
std::string device_words_for_messages(int ordinal);

}  // namespace cudakit::detail
