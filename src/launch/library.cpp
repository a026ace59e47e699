#include "cudakit/library.hpp"

#include <map>
#include <mutex>
#include <utility>

#include "device/capture_tolerant_scope.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/program.hpp"
#include "device/device_state.hpp"
#include "driver/checked_call.hpp"
#include "launch/module_loading.hpp"

namespace cudakit {

using driver::cu;

namespace detail {

struct LibraryState {
  CUlibrary library = nullptr;
  ImageContents contents;
  std::string source;
  ModuleOptions options;
  NameExpressions names;
  ParameterLayouts layouts;  // from the image, where it states them

  std::mutex mutex;  // guards the maps (lookups, not launches)
  std::map<std::string, CUkernel, std::less<>> kernels;                                  // by driver name
  std::map<std::pair<int, std::string>, std::unique_ptr<FunctionState>> functions;       // by device, name

  LibraryState() = default;
  LibraryState(const LibraryState&) = delete;
  LibraryState& operator=(const LibraryState&) = delete;

  ~LibraryState() {
    if (library == nullptr) return;
    try {
      detail::CaptureTolerantScope tolerant;  // an unload beside a capture leaves it valid (DESIGN 6)
      CUresult r = cu.LibraryUnload(library);
      if (r != CUDA_SUCCESS)
        park_driver_error(r, cu.LibraryUnload.name(), Resource::of(ResourceKind::library, library, -1), "~Library");
    } catch (const std::exception& e) {
      park_error({CUDA_SUCCESS, "~Library", e.what()});
    }
  }
};

}  // namespace detail

Library Library::load(std::span<const std::byte> image, const ModuleOptions& options) {
  return load_image(image, "memory", {}, options);
}

Library Library::load(std::span<const unsigned char> image, const ModuleOptions& options) {
  return load_image(std::as_bytes(image), "memory", {}, options);
}

Library Library::load(const std::filesystem::path& file, const ModuleOptions& options) {
  std::vector<std::byte> bytes = detail::read_image_file(file);
  return load_image(bytes, "file '" + file.string() + "'", {}, options);
}

Library Library::load(const CompiledProgram& program, const ModuleOptions& options) {
  return load_image(std::as_bytes(program.image()), "program '" + program.name() + "'", program.lowered_names(),
                    options);
}

Library Library::load_image(std::span<const std::byte> image, std::string source, detail::NameExpressions names,
                            const ModuleOptions& options) {
  detail::PreparedImage prepared = detail::prepare_image(image);
  driver::ensure_loaded();
  // No log buffers: the driver may JIT lazily, after this call, when they are gone.
  detail::JitOptionArrays jit(options.jit, false);
  CUlibrary library = nullptr;
  detail::CaptureTolerantScope tolerant;  // lazy set-up beside a capture leaves it valid (DESIGN 6)
  CUresult r = cu.LibraryLoadData(&library, prepared.data, jit.keys(), jit.values(), jit.count(), nullptr, nullptr, 0);
  std::string what = "library image from " + source;
  if (r != CUDA_SUCCESS)
    detail::throw_load_error(r, cu.LibraryLoadData.name(), Resource::none(), what + " (" + prepared.contents.describe() + ")",
                             {});
  auto state = std::make_shared<detail::LibraryState>();
  state->library = library;
  state->contents = std::move(prepared.contents);
  state->source = std::move(source);
  state->options = options;
  state->names = std::move(names);
  state->layouts = std::move(prepared.layouts);
  return Library(std::move(state));
}

detail::LibraryState& Library::checked_state() const {
  if (state_ == nullptr) [[unlikely]]
    throw EmptyHandle("use of an empty Library (moved-from or default-constructed)");
  return *state_;
}

CodeChoice Library::code_for(detail::OnDevice device) const {
  detail::LibraryState& s = checked_state();
  // Name and architecture read first, failures thrown (as in Module::load_image): the
  // words for the message swallow failures, and are cached reads after these.
  Device d = Device::get(device.ordinal);
  ComputeCapability capability = d.compute_capability();
  (void)d.name();
  return choose_code(s.contents, capability, s.options.jit_policy,
                     "library image from " + s.source + " for " + detail::device_words_for_messages(device.ordinal));
}

Function Library::function(detail::OnDevice device, std::string_view name) const {
  detail::LibraryState& s = checked_state();
  const int ordinal = device.ordinal;
  std::string driver_name = detail::resolve_name(s.names, name);
  {
    std::lock_guard lock(s.mutex);
    auto it = s.functions.find({ordinal, driver_name});
    if (it != s.functions.end()) return Function(std::shared_ptr<detail::FunctionState>(state_, it->second.get()));
  }
  code_for(device);  // the JIT policy, for this device

  std::lock_guard lock(s.mutex);
  if (auto it = s.functions.find({ordinal, driver_name}); it != s.functions.end())
    return Function(std::shared_ptr<detail::FunctionState>(state_, it->second.get()));
  Resource res = Resource::of(ResourceKind::library, s.library, ordinal);
  CUkernel kernel = nullptr;
  if (auto it = s.kernels.find(driver_name); it != s.kernels.end()) {
    kernel = it->second;
  } else {
    detail::CaptureTolerantScope tolerant;  // lazy set-up beside a capture leaves it valid (DESIGN 6)
    CUresult r = cu.LibraryGetKernel(&kernel, s.library, driver_name.c_str());
    if (r == CUDA_ERROR_NOT_FOUND) {
      auto names = detail::listed_kernels<CUkernel>(s.library, Resource::of(ResourceKind::library, s.library, -1),
                                                    cu.LibraryGetKernelCount, cu.LibraryEnumerateKernels,
                                                    cu.KernelGetName);
      throw InvalidArgument(detail::missing_kernel_message("library from " + s.source, name, names, s.names));
    }
    check(r, cu.LibraryGetKernel.name(), res);
    s.kernels.emplace(driver_name, kernel);
  }
  check_not_poisoned(cu.KernelGetFunction.name(), res);
  CUcontext context = detail::library_context(ordinal);  // DESIGN 4: the kernel's context stays
  ContextRef(context, ordinal).make_current();
  CUfunction f = nullptr;
  detail::CaptureTolerantScope tolerant;  // lazy set-up beside a capture leaves it valid (DESIGN 6)
  checked_call(cu.KernelGetFunction, res, &f, kernel);
  auto state = std::make_unique<detail::FunctionState>();
  detail::init_function_state(*state, f, ordinal, context, driver_name, std::string(name));
  if (auto it = s.layouts.find(driver_name); it != s.layouts.end()) detail::set_parameters(*state, it->second);
  detail::FunctionState* raw = state.get();
  s.functions.emplace(std::make_pair(ordinal, driver_name), std::move(state));
  return Function(std::shared_ptr<detail::FunctionState>(state_, raw));
}

std::vector<std::string> Library::kernel_names() const {
  detail::LibraryState& s = checked_state();
  driver::require(driver::EntryId::LibraryEnumerateKernels, "listing a library's kernels");
  driver::require(driver::EntryId::KernelGetName, "listing a library's kernels");
  Resource res = Resource::of(ResourceKind::library, s.library, -1);
  return *detail::listed_kernels<CUkernel>(s.library, res, cu.LibraryGetKernelCount, cu.LibraryEnumerateKernels,
                                           cu.KernelGetName);
}

const ImageContents& Library::contents() const { return checked_state().contents; }

CUlibrary Library::handle() const noexcept { return state_ ? state_->library : nullptr; }

}  // namespace cudakit
