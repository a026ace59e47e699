#include "launch/module_loading.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>

#include "cudakit/driver.hpp"

namespace cudakit::detail {

PreparedImage prepare_image(std::span<const std::byte> image) {
  PreparedImage p;
  p.contents = inspect_image(image);
  if (p.contents.format != ImageFormat::ptx) p.layouts = read_parameter_layouts(image);
  p.data = image.data();
  // The driver reads PTX up to its NUL: give it one when the bytes end without.
  if (p.contents.format == ImageFormat::ptx && (image.empty() || image.back() != std::byte{0})) {
    p.owned.assign(image.begin(), image.end());
    p.owned.push_back(std::byte{0});
    p.data = p.owned.data();
  }
  return p;
}

std::vector<std::byte> read_image_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    int err = errno;
    throw InvalidArgument("cannot read module file '" + file.string() + "': " + std::strerror(err));
  }
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size < 0) throw InvalidArgument("cannot read module file '" + file.string() + "': not a regular file");
  std::vector<std::byte> bytes(static_cast<std::size_t>(size));
  if (size > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), size))
    throw InvalidArgument("cannot read module file '" + file.string() + "': read failed");
  return bytes;
}

std::string resolve_name(const NameExpressions& names, std::string_view name) {
  for (const auto& [expression, lowered] : names)
    if (expression == name) return lowered;
  return std::string(name);
}

JitOptionArrays::JitOptionArrays(const JitOptions& o, bool with_logs) {
  auto value = [](std::uintptr_t v) { return reinterpret_cast<void*>(v); };
  if (with_logs && o.log_bytes > 0) {
    info_.assign(o.log_bytes, '\0');
    error_.assign(o.log_bytes, '\0');
    add(CU_JIT_INFO_LOG_BUFFER, info_.data());
    info_size_slot_ = static_cast<int>(count_);
    add(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, value(o.log_bytes));
    add(CU_JIT_ERROR_LOG_BUFFER, error_.data());
    error_size_slot_ = static_cast<int>(count_);
    add(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, value(o.log_bytes));
    add(CU_JIT_LOG_VERBOSE, value(1));
  }
  if (o.optimization_level) add(CU_JIT_OPTIMIZATION_LEVEL, value(static_cast<unsigned>(*o.optimization_level)));
  if (o.max_registers) add(CU_JIT_MAX_REGISTERS, value(static_cast<unsigned>(*o.max_registers)));
  if (o.line_info) add(CU_JIT_GENERATE_LINE_INFO, value(1));
  if (o.debug_info) add(CU_JIT_GENERATE_DEBUG_INFO, value(1));
}

void JitOptionArrays::add(CUjit_option key, void* value) {
  keys_[count_] = key;
  values_[count_] = value;
  ++count_;
}

namespace {
// The driver writes back how many bytes it put in a log (NUL included) in the size slot.
std::string log_from(const std::vector<char>& buffer, int slot, void* const* values) {
  if (slot < 0 || buffer.empty()) return {};
  auto written = std::min<std::size_t>(reinterpret_cast<std::uintptr_t>(values[slot]), buffer.size());
  std::string s(buffer.data(), strnlen(buffer.data(), written));
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}
}  // namespace

std::string JitOptionArrays::info_log() const { return log_from(info_, info_size_slot_, values_); }
std::string JitOptionArrays::error_log() const { return log_from(error_, error_size_slot_, values_); }

void throw_load_error(CUresult code, const char* call, const Resource& resource, const std::string& what,
                      const std::string& error_log) {
  if (is_sticky(code)) throw_driver_error(code, call, resource);
  std::string res = describe(resource);
  std::string message = std::string(call) + (res.empty() ? "" : " on " + res) + ": " + error_name(code) + ": " +
                        error_description(code) + ", loading " + what;
  if (!error_log.empty()) message += "; the JIT's error log:\n" + error_log;
  throw ModuleLoadError(code, call, res, std::move(message), error_log);
}

std::string missing_kernel_message(const std::string& what, std::string_view name,
                                   const std::optional<std::vector<std::string>>& kernels,
                                   const NameExpressions& names) {
  std::string m = what + " has no kernel named '" + std::string(name) + "'";
  if (!kernels) {
    return m + "; this driver (CUDA " + driver::version_string(driver::version()) +
           ") cannot list a module's kernels (that needs CUDA 12.4), so the list is unavailable";
  }
  std::vector<std::string> sorted = *kernels;
  std::sort(sorted.begin(), sorted.end());
  if (sorted.empty()) return m + "; it has no kernels at all";
  m += "; its kernels are: ";
  bool cxx_hint = false;
  std::string plain(name);
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    m += (i ? ", " : "") + sorted[i];
    for (const auto& [expression, lowered] : names)
      if (lowered == sorted[i]) m += " (" + expression + ")";
    // A C++ kernel's mangled name holds its plain name with its length: _Z10fill_value...
    if (sorted[i].rfind("_Z", 0) == 0 && sorted[i].find(std::to_string(plain.size()) + plain) != std::string::npos)
      cxx_hint = true;
  }
  if (cxx_hint)
    m += " ('" + plain +
         "' is a C++ kernel: look it up by its mangled name above, declare it extern \"C\", or compile it with "
         "an NVRTC name expression)";
  return m;
}

std::string device_words_for_messages(int ordinal) {
  std::string s = "device " + std::to_string(ordinal);
  try {
    Device d = Device::get(ordinal);
    s += " (" + d.name() + ", " + d.compute_capability().arch() + ")";
  } catch (const std::exception&) {
    // the words without the name
  }
  return s;
}

}  // namespace cudakit::detail
