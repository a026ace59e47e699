#include "memory/copy_kernel.hpp"

#include <algorithm>
#include <array>
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

// The table as the kernel declares it; the launch passes it whole (its size is fixed by
// the kernel's signature).
struct CopyRegion {
  unsigned long long destination, source, bytes;
};
struct CopyRegions {
  unsigned int count;
  unsigned int unused;
  CopyRegion regions[copy_kernel_regions];
};
static_assert(sizeof(CopyRegions) <= 32764, "a launch carries at most 32764 bytes of parameters");

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

struct CopyKernel {
  std::once_flag once;
  CUfunction function = nullptr;  // null when unavailable
};
std::array<CopyKernel, max_devices> kernels;

// The cubin for `device`'s architecture, or empty when NVRTC cannot make one.
std::vector<char> compile_for(int device) {
  const nvrtc::Api& api = nvrtc::api();  // throws CompilerUnavailable without NVRTC
  nvrtcProgram program = nullptr;
  if (api.CreateProgram(&program, copy_kernel_source, "cudakit_copy_regions.cu", 0, nullptr, nullptr) != NVRTC_SUCCESS)
    return {};
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> owner(&program, [](nvrtcProgram* p) { nvrtc::api().DestroyProgram(p); });
  ComputeCapability cc = Device::get(device).compute_capability();
  const std::string arch = "--gpu-architecture=sm_" + std::to_string(cc.major * 10 + cc.minor);
  const char* options[] = {arch.c_str(), "--std=c++17"};
  if (api.CompileProgram(program, 2, options) != NVRTC_SUCCESS) return {};
  std::size_t size = 0;
  if (api.GetCUBINSize(program, &size) != NVRTC_SUCCESS || size == 0) return {};
  std::vector<char> cubin(size);
  if (api.GetCUBIN(program, cubin.data()) != NVRTC_SUCCESS) return {};
  return cubin;
}

void load(CopyKernel& k, int device) {
  try {
    std::vector<char> cubin = compile_for(device);
    if (cubin.empty()) return;
    CaptureTolerantScope tolerant(device);  // loading is not stream-ordered: safe beside a capture
    ContextRef(library_context(device), device).make_current();
    CUmodule module = nullptr;
    if (cu.ModuleLoadDataEx(&module, cubin.data(), 0, nullptr, nullptr) != CUDA_SUCCESS) return;
    CUfunction f = nullptr;
    if (cu.ModuleGetFunction(&f, module, "cudakit_copy_regions") != CUDA_SUCCESS) return;
    k.function = f;  // the module stays loaded for the process's life
  } catch (...) {
    // No NVRTC, no driver entry: the kernel is unavailable, and callers copy without it.
  }
}

}  // namespace

bool copy_kernel_available(int device) noexcept {
  if (device < 0 || device >= max_devices) return false;
  CopyKernel& k = kernels[static_cast<std::size_t>(device)];
  try {
    std::call_once(k.once, [&] { load(k, device); });
  } catch (...) {
    return false;
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
