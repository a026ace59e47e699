#include "memory/copy_kernel.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cudakit/context.hpp"
#include "cudakit/device.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "device/capture_tolerant_scope.hpp"
#include "device/device_state.hpp"
#include "driver/nvrtc.hpp"
#include "memory/stream_fault.hpp"

namespace cudakit::detail {

using driver::cu;

namespace {

const char* const copy_kernel_source = R"(
struct CudakitCopyRegion { unsigned long long destination, source, bytes; };
struct CudakitCopyRegions { unsigned int count; unsigned int unused; CudakitCopyRegion regions[1300]; };
extern "C" __global__ void cudakit_copy_regions(const __grid_constant__ CudakitCopyRegions table) {
  for (unsigned int i = blockIdx.x; i < table.count; i += gridDim.x) {
    const CudakitCopyRegion r = table.regions[i];
    if (((r.destination | r.source | r.bytes) & 15ull) == 0) {
      uint4* d = reinterpret_cast<uint4*>(r.destination);
      const uint4* s = reinterpret_cast<const uint4*>(r.source);
      for (unsigned long long k = threadIdx.x; k < r.bytes / 16; k += blockDim.x) d[k] = s[k];
    } else {
      char* d = reinterpret_cast<char*>(r.destination);
      const char* s = reinterpret_cast<const char*>(r.source);
      for (unsigned long long k = threadIdx.x; k < r.bytes; k += blockDim.x) d[k] = s[k];
    }
  }
}
)";
static_assert(copy_kernel_regions == 1300, "the kernel's source names the same count");

// Per device: the loaded kernel, or a remembered failure. `tried` is read without the
// mutex on every submit (acquire pairs with the release after the load).
struct CopyKernel {
  std::mutex mutex;
  std::atomic<bool> tried{false};
  CUmodule module = nullptr;
  CUfunction function = nullptr;  // null when unavailable
};
std::array<CopyKernel, max_devices> kernels;

// Compiled cubins by architecture: compiling is independent of the driver, so a unit
// test's fresh fake driver loads the same bytes again.
std::mutex images_mutex;
std::map<int, std::vector<char>> images;
std::vector<char> image_for_testing;

// The cubin for architecture `sm` (e.g. 90), or empty when NVRTC cannot make one.
std::vector<char> compile_for(int sm) {
  const nvrtc::Api& api = nvrtc::api();  // throws CompilerUnavailable without NVRTC
  nvrtcProgram program = nullptr;
  if (api.CreateProgram(&program, copy_kernel_source, "cudakit_copy_regions.cu", 0, nullptr, nullptr) != NVRTC_SUCCESS)
    return {};
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> owner(&program, [](nvrtcProgram* p) { nvrtc::api().DestroyProgram(p); });
  const std::string arch = "--gpu-architecture=sm_" + std::to_string(sm);
  const char* options[] = {arch.c_str(), "--std=c++17"};
  if (api.CompileProgram(program, 2, options) != NVRTC_SUCCESS) return {};
  std::size_t size = 0;
  if (api.GetCUBINSize(program, &size) != NVRTC_SUCCESS || size == 0) return {};
  std::vector<char> cubin(size);
  if (api.GetCUBIN(program, cubin.data()) != NVRTC_SUCCESS) return {};
  return cubin;
}

// The cubin for `device`, compiled once per architecture; empty when NVRTC is missing or
// cannot make one (remembered).
std::vector<char> image_for(int device) {
  ComputeCapability cc = Device::get(device).compute_capability();  // a driver error propagates
  const int sm = cc.major * 10 + cc.minor;
  std::lock_guard lock(images_mutex);
  if (!image_for_testing.empty()) return image_for_testing;
  auto it = images.find(sm);
  if (it == images.end()) {
    std::vector<char> cubin;
    try {
      cubin = compile_for(sm);
    } catch (const CompilerUnavailable&) {
      // No NVRTC: the kernel is unavailable, and callers copy without it.
    }
    it = images.emplace(sm, std::move(cubin)).first;
  }
  return it->second;
}

// Whether the driver's answer to loading the kernel means "this kernel cannot run here"
// (callers then copy without it), rather than a failure to report.
bool means_unavailable(CUresult r) {
  switch (r) {
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
    case CUDA_ERROR_NOT_FOUND:
      return true;
    default:
      return false;
  }
}

// Loads the kernel into `k`, leaves it null where it cannot run here, and throws
// DriverError for any other failure (nothing loaded: the next use tries again).
void load(CopyKernel& k, int device) {
  std::vector<char> cubin = image_for(device);
  if (cubin.empty()) return;
  CaptureTolerantScope tolerant(device);  // loading is not stream-ordered: safe beside a capture
  ContextRef(library_context(device), device).make_current();
  const Resource res = Resource::of(ResourceKind::module, nullptr, device);
  check_not_poisoned(cu.ModuleLoadDataEx.name(), res);
  CUmodule module = nullptr;
  CUresult r = cu.ModuleLoadDataEx(&module, cubin.data(), 0, nullptr, nullptr);
  if (means_unavailable(r)) return;
  check(r, cu.ModuleLoadDataEx.name(), res);
  CUfunction f = nullptr;
  r = cu.ModuleGetFunction(&f, module, copy_kernel_name);
  if (r != CUDA_SUCCESS) {
    CUresult unload = cu.ModuleUnload(module);  // an image without the kernel: nothing to keep
    if (means_unavailable(r)) {
      check(unload, cu.ModuleUnload.name(), res);
      return;
    }
    check(r, cu.ModuleGetFunction.name(), res);
  }
  k.module = module;  // stays loaded for the process's life
  k.function = f;
}

}  // namespace

bool copy_kernel_available(int device) {
  if (device < 0 || device >= max_devices) return false;
  CopyKernel& k = kernels[static_cast<std::size_t>(device)];
  if (!k.tried.load(std::memory_order_acquire)) {
    std::lock_guard lock(k.mutex);
    if (!k.tried.load(std::memory_order_relaxed)) {
      load(k, device);  // a throw leaves `tried` false: the next use tries again
      k.tried.store(true, std::memory_order_release);
    }
  }
  return k.function != nullptr;
}

void launch_copy_kernel(StreamRef stream, const CUdeviceptr* destinations, const CUdeviceptr* sources,
                        const std::size_t* sizes, std::size_t count) {
  const int device = stream.device_ordinal();
  CUfunction f = kernels[static_cast<std::size_t>(device)].function;
  // One table per thread, reused: the hot path allocates nothing (DESIGN 8).
  thread_local std::unique_ptr<CopyRegions> table;
  if (!table) table = std::make_unique<CopyRegions>();
  for (std::size_t first = 0; first < count; first += copy_kernel_regions) {
    const std::size_t n = std::min(copy_kernel_regions, count - first);
    table->count = static_cast<unsigned int>(n);
    for (std::size_t i = 0; i < n; ++i)
      table->regions[i] = {destinations[first + i], sources[first + i], sizes[first + i]};
    void* params[] = {table.get()};
    CUresult r = cu.LaunchKernel(f, static_cast<unsigned int>(n), 1, 1, 256, 1, 1, 0, stream.handle(), params, nullptr);
    if (r != CUDA_SUCCESS) [[unlikely]]
      check_on_stream(r, cu.LaunchKernel.name(), Resource::of(ResourceKind::stream, stream.handle(), device), stream);
  }
}

}  // namespace cudakit::detail

namespace cudakit::detail {

void set_copy_kernel_image_for_testing(std::vector<char> image) {
  std::lock_guard lock(images_mutex);
  image_for_testing = std::move(image);
}

void reset_copy_kernel_for_testing() {
  for (int device = 0; device < max_devices; ++device) {
    CopyKernel& k = kernels[static_cast<std::size_t>(device)];
    std::lock_guard lock(k.mutex);
    if (k.module != nullptr) {
      ContextRef(library_context(device), device).make_current();
      (void)cu.ModuleUnload(k.module);
    }
    k.module = nullptr;
    k.function = nullptr;
    k.tried.store(false, std::memory_order_release);
  }
}

}  // namespace cudakit::detail
