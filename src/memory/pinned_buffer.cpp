#include "device/capture_tolerant_scope.hpp"
#include "cudakit/pinned_buffer.hpp"

#include <unistd.h>

#include <cstring>

#include "cudakit/context.hpp"
#include "cudakit/driver.hpp"
#include "device/device_state.hpp"
#include "driver/checked_call.hpp"
#include "memory/host_ranges.hpp"
#include "memory/out_of_memory.hpp"

namespace cudakit::detail {

using driver::cu;

void throw_host_out_of_memory(const char* call, const Resource& resource, std::size_t bytes) {
  long page = sysconf(_SC_PAGESIZE);
  long free_pages = sysconf(_SC_AVPHYS_PAGES);
  long total_pages = sysconf(_SC_PHYS_PAGES);
  std::size_t free_bytes = page > 0 && free_pages > 0 ? std::size_t(free_pages) * std::size_t(page) : 0;
  std::size_t total_bytes = page > 0 && total_pages > 0 ? std::size_t(total_pages) * std::size_t(page) : 0;
  throw OutOfMemory(call, describe(resource) + " (page-locked host memory; free and total are the host's)", bytes,
                    free_bytes, total_bytes);
}

Ref<Allocation> allocate_pinned_memory(std::size_t bytes, bool zero, PinnedOptions options, CUdeviceptr* mapped) {
  *mapped = 0;
  if (bytes == 0) return nullptr;
  // Portable memory works with every device's context; device 0's context allocates it
  // (cuMemHostAlloc needs a current context), and the library holds that context for
  // the life of the process (DESIGN 4).
  constexpr int device = 0;
  Resource res = Resource::of(ResourceKind::pinned_buffer, nullptr, device);
  check_not_poisoned(cu.MemHostAlloc.name(), res);
  ContextRef(library_context(device), device).make_current();
  unsigned flags = CU_MEMHOSTALLOC_PORTABLE;
  if (options.mapped) flags |= CU_MEMHOSTALLOC_DEVICEMAP;
  if (options.write_combined) flags |= CU_MEMHOSTALLOC_WRITECOMBINED;
  void* p = nullptr;
  detail::CaptureTolerantScope tolerant;  // beside a capture: relaxed mode leaves it valid (DESIGN 6)
  CUresult r = cu.MemHostAlloc(&p, bytes, flags);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) throw_host_out_of_memory(cu.MemHostAlloc.name(), res, bytes);
  check(r, cu.MemHostAlloc.name(), res);
  Ref<Allocation> a;
  try {
    a = Allocation::create(reinterpret_cast<CUdeviceptr>(p), bytes, device, AllocationKind::pinned_host, StreamRef{});
  } catch (...) {
    (void)cu.MemFreeHost(p);
    throw;
  }
  try {
    res.handle = p;
    if (options.mapped) checked_call(cu.MemHostGetDevicePointer, res, mapped, p, 0);
    register_host_range(p, bytes, a.get());
  } catch (...) {
    *mapped = 0;
    throw;  // `a` frees it (nothing used it yet)
  }
  if (zero) std::memset(p, 0, bytes);
  return a;
}

}  // namespace cudakit::detail
