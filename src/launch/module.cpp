#include "cudakit/module.hpp"

#include <map>
#include <mutex>

#include "device/capture_tolerant_scope.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/program.hpp"
#include "device/device_state.hpp"
#include "driver/checked_call.hpp"
#include "launch/module_loading.hpp"

namespace cudakit {

using driver::cu;

namespace detail {

struct ModuleState {
  CUmodule module = nullptr;
  int device = -1;
  CUcontext context = nullptr;
  LoadReport report;
  std::string what;  // "module 'file k.cubin' on device 0 (...)", for messages
  NameExpressions names;
  ParameterLayouts layouts;  // from the image, where it states them

  std::mutex mutex;  // guards `functions` (lookups, not launches)
  std::map<std::string, std::unique_ptr<FunctionState>, std::less<>> functions;  // by driver name

  ModuleState() = default;
  ModuleState(const ModuleState&) = delete;
  ModuleState& operator=(const ModuleState&) = delete;

  ~ModuleState() {
    if (module == nullptr) return;
    Resource res = Resource::of(ResourceKind::module, module, device);
    try {
      ContextRef(context, device).make_current();
      detail::CaptureTolerantScope tolerant;  // an unload beside a capture leaves it valid (DESIGN 6)
      CUresult r = cu.ModuleUnload(module);
      if (r != CUDA_SUCCESS) park_driver_error(r, cu.ModuleUnload.name(), res, "~Module");
    } catch (const std::exception& e) {
      park_error({CUDA_SUCCESS, "~Module", e.what()});
    }
  }
};

OnDevice::OnDevice(ContextRef context) : ordinal(context.device_ordinal()) {
  if (!context) throw_empty_handle("Context");
}

}  // namespace detail

std::string LoadReport::describe() const {
  return contents.describe() + " from " + source + ": runs " + to_string(code) + " for " +
         (code == CodeKind::native ? "sm_" : "compute_") + std::to_string(arch);
}

Module Module::load(detail::OnDevice device, std::span<const std::byte> image, const ModuleOptions& options) {
  return load_image(device.ordinal, image, "memory", {}, options);
}

Module Module::load(detail::OnDevice device, std::span<const unsigned char> image, const ModuleOptions& options) {
  return load_image(device.ordinal, std::as_bytes(image), "memory", {}, options);
}

Module Module::load(detail::OnDevice device, const std::filesystem::path& file, const ModuleOptions& options) {
  std::vector<std::byte> bytes = detail::read_image_file(file);
  return load_image(device.ordinal, bytes, "file '" + file.string() + "'", {}, options);
}

Module Module::load(detail::OnDevice device, const CompiledProgram& program, const ModuleOptions& options) {
  return load_image(device.ordinal, std::as_bytes(program.image()), "program '" + program.name() + "'",
                    program.lowered_names(), options);
}

Module Module::load_image(int ordinal, std::span<const std::byte> image, std::string source,
                          detail::NameExpressions names, const ModuleOptions& options) {
  Device device = Device::get(ordinal);
  // Read the device's name and architecture first, so that a failing query reaches the
  // caller: device_words_for_messages() swallows failures (it also serves error paths),
  // so a failed cuDeviceGetAttribute or cuDeviceGetName would vanish there. Both are
  // cached: the words below then make no driver call.
  ComputeCapability capability = device.compute_capability();
  (void)device.name();
  std::string where = detail::device_words_for_messages(ordinal);
  detail::PreparedImage prepared = detail::prepare_image(image);
  std::string what = "module image from " + source;
  CodeChoice choice = choose_code(prepared.contents, capability, options.jit_policy,
                                  what + " for " + where);

  Resource res = Resource::of_device(ordinal);
  check_not_poisoned(cu.ModuleLoadDataEx.name(), res);
  CUcontext context = detail::library_context(ordinal);  // DESIGN 4: the context outlives the module
  ContextRef(context, ordinal).make_current();
  detail::JitOptionArrays jit(options.jit, true);
  CUmodule module = nullptr;
  detail::CaptureTolerantScope tolerant;  // lazy set-up beside a capture leaves it valid (DESIGN 6)
  CUresult r = cu.ModuleLoadDataEx(&module, prepared.data, jit.count(), jit.keys(), jit.values());
  if (r != CUDA_SUCCESS)
    detail::throw_load_error(r, cu.ModuleLoadDataEx.name(), res, what + " (" + prepared.contents.describe() + ")",
                             jit.error_log());

  auto state = std::make_shared<detail::ModuleState>();
  state->module = module;
  state->device = ordinal;
  state->context = context;
  state->names = std::move(names);
  state->layouts = std::move(prepared.layouts);
  state->report.source = std::move(source);
  state->report.contents = std::move(prepared.contents);
  state->report.code = choice.kind;
  state->report.arch = choice.arch;
  if (choice.kind == CodeKind::jit) state->report.jit_log = jit.info_log();
  state->what = "module from " + state->report.source + " on " + where;
  return Module(std::move(state));
}

detail::ModuleState& Module::checked_state() const {
  if (state_ == nullptr) [[unlikely]]
    throw EmptyHandle("use of an empty Module (moved-from or default-constructed)");
  return *state_;
}

Function Module::function(std::string_view name) const {
  detail::ModuleState& s = checked_state();
  std::string driver_name = detail::resolve_name(s.names, name);
  std::lock_guard lock(s.mutex);
  if (auto it = s.functions.find(driver_name); it != s.functions.end())
    return Function(std::shared_ptr<detail::FunctionState>(state_, it->second.get()));

  Resource res = Resource::of(ResourceKind::module, s.module, s.device);
  check_not_poisoned(cu.ModuleGetFunction.name(), res);
  ContextRef(s.context, s.device).make_current();
  CUfunction f = nullptr;
  detail::CaptureTolerantScope tolerant;  // lazy set-up beside a capture leaves it valid (DESIGN 6)
  CUresult r = cu.ModuleGetFunction(&f, s.module, driver_name.c_str());
  if (r == CUDA_ERROR_NOT_FOUND) {
    auto names = detail::listed_kernels<CUfunction>(s.module, res, cu.ModuleGetFunctionCount,
                                                    cu.ModuleEnumerateFunctions, cu.FuncGetName);
    throw InvalidArgument(detail::missing_kernel_message(s.what, name, names, s.names));
  }
  check(r, cu.ModuleGetFunction.name(), res);
  auto state = std::make_unique<detail::FunctionState>();
  detail::init_function_state(*state, f, s.device, s.context, driver_name, std::string(name));
  if (auto it = s.layouts.find(driver_name); it != s.layouts.end()) detail::set_parameters(*state, it->second);
  detail::FunctionState* raw = state.get();
  s.functions.emplace(driver_name, std::move(state));
  return Function(std::shared_ptr<detail::FunctionState>(state_, raw));
}

std::vector<std::string> Module::kernel_names() const {
  detail::ModuleState& s = checked_state();
  driver::require(driver::EntryId::ModuleEnumerateFunctions, "listing a module's kernels");
  driver::require(driver::EntryId::FuncGetName, "listing a module's kernels");
  Resource res = Resource::of(ResourceKind::module, s.module, s.device);
  check_not_poisoned(cu.ModuleGetFunctionCount.name(), res);  // before the driver (DESIGN 7)
  ContextRef(s.context, s.device).make_current();
  return *detail::listed_kernels<CUfunction>(s.module, res, cu.ModuleGetFunctionCount, cu.ModuleEnumerateFunctions,
                                             cu.FuncGetName);
}

const LoadReport& Module::report() const { return checked_state().report; }

CUmodule Module::handle() const noexcept { return state_ ? state_->module : nullptr; }

int Module::device_ordinal() const noexcept { return state_ ? state_->device : -1; }

}  // namespace cudakit
