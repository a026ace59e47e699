#include "cudakit/kernel.hpp"

#include <algorithm>
#include <mutex>
#include <string>
#include <unordered_set>

#include "cudakit/context.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "driver/checked_call.hpp"

namespace cudakit {

using driver::cu;

namespace {
Resource kernel_resource(const detail::FunctionState& s) {
  return Resource::of(ResourceKind::kernel, s.function, s.device, s.label.c_str());
}

std::string size_list(const std::vector<std::size_t>& sizes) {
  std::string s;
  for (std::size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s;
}
}  // namespace

void Function::throw_empty() {
  throw EmptyHandle("use of an empty kernel handle (default-constructed, or from a failed lookup)");
}

int Function::attribute(CUfunction_attribute attribute) const {
  detail::FunctionState& s = state();
  int v = 0;
  // On a poisoned device, fail before the driver, carrying the original (DESIGN 7).
  check_not_poisoned(cu.FuncGetAttribute.name(), kernel_resource(s));
  checked_call(cu.FuncGetAttribute, kernel_resource(s), &v, attribute, s.function);
  return v;
}

namespace detail {

namespace {
// Kernel labels for stream states (function_state.hpp): one copy of each, never freed (a
// set's elements keep their addresses), so a name read after its module is gone is valid.
const char* interned(std::string text) {
  static std::mutex mutex;
  static auto* strings = new std::unordered_set<std::string>;
  std::lock_guard lock(mutex);
  return strings->insert(std::move(text)).first->c_str();
}
}  // namespace

void init_function_state(FunctionState& s, CUfunction function, int device, CUcontext context, std::string name,
                         std::string label) {
  s.function = function;
  s.context = context;
  s.device = device;
  s.name = std::move(name);
  s.label = label.empty() || label == s.name ? s.name : label + "' ('" + s.name;
  s.launch_label = interned("kernel '" + s.label + "'");
  Resource res = kernel_resource(s);
  auto attr = [&](CUfunction_attribute a) {
    int v = 0;
    checked_call(cu.FuncGetAttribute, res, &v, a, function);
    return v;
  };
  // Attributes that only some GPUs or drivers report (clusters): 0 when they cannot say
  // (INVALID_VALUE, NOT_SUPPORTED). Any other failure is an error like any other: taken
  // for "cannot say", it would swallow out-of-memory and sticky errors.
  auto optional_attr = [&](CUfunction_attribute a) {
    int v = 0;
    CUresult r = cu.FuncGetAttribute(&v, a, function);
    if (r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_NOT_SUPPORTED) return 0;
    check(r, cu.FuncGetAttribute.name(), res);
    return v;
  };
  Device dev = Device::get(device);
  s.compute_capability = dev.compute_capability();
  s.kernel_max_threads = static_cast<std::uint32_t>(attr(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK));
  s.device_max_threads = static_cast<std::uint32_t>(dev.max_threads_per_block());
  s.max_threads = std::min(s.kernel_max_threads, s.device_max_threads);
  auto block = dev.max_block_dims();
  auto grid = dev.max_grid_dims();
  for (int i = 0; i < 3; ++i) {
    s.max_block[i] = static_cast<std::uint32_t>(block[i]);
    s.max_grid[i] = static_cast<std::uint32_t>(grid[i]);
  }
  s.shared_per_block = static_cast<std::uint32_t>(dev.max_shared_memory_per_block());
  s.shared_optin = static_cast<std::uint32_t>(dev.max_shared_memory_per_block_optin());
  s.static_shared = static_cast<std::uint32_t>(attr(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES));
  s.dynamic_shared_limit.store(static_cast<std::uint32_t>(attr(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)),
                               std::memory_order_relaxed);
  s.cooperative_supported = dev.supports_cooperative_launch();
  s.clusters_supported = dev.supports_clusters();
  s.multiprocessors = dev.multiprocessor_count();
  auto [least, greatest] = ContextRef(context, device).stream_priority_range();
  s.priority_least = least;
  s.priority_greatest = greatest;
  if (s.clusters_supported) {
    s.required_cluster[0] = static_cast<std::uint32_t>(optional_attr(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH));
    s.required_cluster[1] = static_cast<std::uint32_t>(optional_attr(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT));
    s.required_cluster[2] = static_cast<std::uint32_t>(optional_attr(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH));
    s.non_portable_cluster_allowed = optional_attr(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED) != 0;
    s.cluster_size_must_be_set = optional_attr(CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET) != 0;
  }
}

void set_parameters(FunctionState& s, std::vector<ParameterInfo> parameters) {
  s.parameters = std::move(parameters);
  s.parameters_state = ParameterInfoState::known;
  s.parameters_ready.store(true, std::memory_order_release);
}

namespace {
// Every parameter, through the driver. cuFuncGetParamInfo cannot say how many there are:
// the list ends where it answers CUDA_ERROR_INVALID_VALUE, one index past the last, which
// compute-sanitizer reports as a failed API call. Only for what needs the whole list
// (untyped launches, Function::parameters) of a kernel whose image did not state it.
void load_parameters(FunctionState& s) {
  if (!driver::has(driver::EntryId::FuncGetParamInfo)) {
    s.parameters_state = ParameterInfoState::unavailable;
    return;
  }
  // On a poisoned device, fail before the driver, carrying the original (DESIGN 7): the
  // parameters are not cached after a failure, so a later lookup comes back here.
  check_not_poisoned(cu.FuncGetParamInfo.name(), kernel_resource(s));
  std::vector<ParameterInfo> params;
  for (std::size_t i = 0;; ++i) {
    std::size_t offset = 0, size = 0;
    CUresult r = cu.FuncGetParamInfo(s.function, i, &offset, &size);
    if (r == CUDA_ERROR_INVALID_VALUE) break;  // past the last parameter
    check(r, cu.FuncGetParamInfo.name(), kernel_resource(s));
    params.push_back({offset, size});
  }
  s.parameters = std::move(params);
  s.parameters_state = ParameterInfoState::known;
}
}  // namespace

const std::vector<ParameterInfo>* parameters_if_known(FunctionState& s) {
  if (!s.parameters_ready.load(std::memory_order_acquire)) [[unlikely]] {
    std::lock_guard lock(s.parameters_mutex);
    if (!s.parameters_ready.load(std::memory_order_relaxed)) {
      load_parameters(s);  // may throw: nothing is published, a later call tries again
      s.parameters_ready.store(true, std::memory_order_release);
    }
  }
  return s.parameters_state == ParameterInfoState::known ? &s.parameters : nullptr;
}

const std::vector<ParameterInfo>& parameters_of(FunctionState& s) {
  if (const auto* p = parameters_if_known(s)) return *p;
  driver::require(driver::EntryId::FuncGetParamInfo, "reading a kernel's parameter info");
  throw FeatureUnavailable(cu.FuncGetParamInfo.name(), 12040, driver::version(),
                           "this driver cannot describe kernel parameters (needs CUDA 12.4)");
}

namespace {
// The parameters known without a driver call: from the image, or read in full earlier.
const std::vector<ParameterInfo>* parameters_already_known(FunctionState& s) {
  if (!s.parameters_ready.load(std::memory_order_acquire)) return nullptr;
  return s.parameters_state == ParameterInfoState::known ? &s.parameters : nullptr;
}

// The first `count` parameters through the driver, never asking past them: a correct
// signature costs no failed call. Fewer come back when the kernel has fewer (the driver
// answered INVALID_VALUE at that index, so the list is then the whole list).
std::vector<ParameterInfo> probe_parameters(FunctionState& s, std::size_t count) {
  check_not_poisoned(cu.FuncGetParamInfo.name(), kernel_resource(s));  // DESIGN 7
  std::vector<ParameterInfo> params;
  for (std::size_t i = 0; i < count; ++i) {
    std::size_t offset = 0, size = 0;
    CUresult r = cu.FuncGetParamInfo(s.function, i, &offset, &size);
    if (r == CUDA_ERROR_INVALID_VALUE) break;  // the kernel has i parameters
    check(r, cu.FuncGetParamInfo.name(), kernel_resource(s));
    params.push_back({offset, size});
  }
  return params;
}
}  // namespace

void check_signature(FunctionState& s, std::string_view signature, std::span<const std::size_t> sizes,
                     std::span<const std::size_t> alignments) {
  // The parameters to compare with: from the image (every one, so a signature that
  // declares too few is caught), else the declared ones through the driver (a kernel
  // with more parameters than declared then passes unnoticed: learning that would take
  // the failed call past the end that compute-sanitizer reports).
  const std::vector<ParameterInfo>* params = parameters_already_known(s);
  std::vector<ParameterInfo> probed;
  if (params == nullptr) {
    if (!driver::has(driver::EntryId::FuncGetParamInfo)) return;  // drivers before 12.4 cannot say; trusted
    probed = probe_parameters(s, sizes.size());
    params = &probed;
  }
  // The offsets the C++ signature implies: each parameter at its alignment.
  std::vector<std::size_t> expected_offsets;
  std::size_t at = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    at = (at + alignments[i] - 1) / alignments[i] * alignments[i];
    expected_offsets.push_back(at);
    at += sizes[i];
  }
  const bool same_count = params->size() == sizes.size();
  bool same = same_count;
  for (std::size_t i = 0; same && i < sizes.size(); ++i)
    same = (*params)[i].size == sizes[i] && (*params)[i].offset == expected_offsets[i];
  if (same) return;
  std::vector<std::size_t> actual;
  for (const auto& p : *params) actual.push_back(p.size);
  std::vector<std::size_t> declared(sizes.begin(), sizes.end());
  std::string why;
  if (!same_count) {
    why = "the kernel takes " + std::to_string(params->size()) + " parameter" + (params->size() == 1 ? "" : "s") +
          " (" + size_list(actual) + " bytes), the signature declares " + std::to_string(sizes.size()) + " (" +
          size_list(declared) + " bytes)";
  } else {
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      if ((*params)[i].size != sizes[i]) {
        why = "parameter #" + std::to_string(i + 1) + " is " + std::to_string((*params)[i].size) +
              " bytes in the kernel, " + std::to_string(sizes[i]) + " in the signature";
        break;
      }
      if ((*params)[i].offset != expected_offsets[i]) {
        why = "parameter #" + std::to_string(i + 1) + " sits at byte " + std::to_string((*params)[i].offset) +
              " in the kernel, at " + std::to_string(expected_offsets[i]) + " in the signature (alignment differs)";
        break;
      }
    }
  }
  throw InvalidArgument("kernel '" + s.label + "' does not match Kernel<" + std::string(signature) + ">: " + why);
}

}  // namespace detail
}  // namespace cudakit
