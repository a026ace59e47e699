// Fake driver: managed memory (cuMemAllocManaged, cuMemPrefetchAsync, cuMemAdvise) and the
// copies that take any address of the unified address space (cuMemcpyAsync,
// cuMemcpyBatchAsync). Managed memory is host memory here, like device memory; it is not
// counted against the device's memory, since the driver pages it in and out.
#include <cstring>
#include <string>

#include "fake_driver.hpp"

namespace cudakit::fake {

namespace {

Driver& D() { return Driver::current(); }

bool valid_device(int d) { return d >= 0 && d < static_cast<int>(D().devices.size()); }

CUresult check_stream(CUstream s) {
  if (s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) {
    D().problems.push_back("a copy was given the legacy/default stream (DESIGN 1)");
    return CUDA_ERROR_INVALID_HANDLE;
  }
  return D().stream(s) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

int current_device() {
  CUcontext c = current_context();
  return c ? device_of(c) : -1;
}

// The managed allocation holding all of [p, p + bytes), or null.
const Allocation* managed_range(CUdeviceptr p, std::size_t bytes) {
  std::uintptr_t base = 0;
  const Allocation* a = D().allocation_of(static_cast<std::uintptr_t>(p), &base);
  if (a == nullptr || !a->managed || static_cast<std::uintptr_t>(p) + bytes > base + a->bytes) return nullptr;
  return a;
}

// Whether [p, p + bytes) is page-locked host memory: one cuMemHostAlloc allocation or
// one registration.
bool page_locked(std::uintptr_t p, std::size_t bytes) {
  std::uintptr_t base = 0;
  if (const Allocation* a = D().allocation_of(p, &base); a != nullptr && a->pinned_host) return p + bytes <= base + a->bytes;
  auto& regs = D().host_registrations;
  auto it = regs.upper_bound(p);
  if (it == regs.begin()) return false;
  --it;
  return p + bytes <= it->first + it->second.bytes;
}

// One side of a unified-address copy: device (or managed) memory or page-locked host
// memory is recorded in the ordering model; anything else is refused, as cudakit never
// gives pageable memory to an asynchronous copy.
bool side(CUstream s, CUdeviceptr p, std::size_t bytes, bool write, const std::string& what) {
  auto b = static_cast<std::uintptr_t>(p);
  if (D().device_range_valid(b, bytes) || page_locked(b, bytes)) {
    D().access(s, b, bytes, write, what);
    return true;
  }
  D().pageable_async_copies.push_back(what + " with memory that is neither device nor page-locked");
  return false;
}

CUresult copy_on(CUstream s, CUdeviceptr dst, CUdeviceptr src, std::size_t n, const char* call) {
  if (n == 0) return CUDA_SUCCESS;
  if (!side(s, src, n, false, std::string(call) + " (source)")) return CUDA_ERROR_INVALID_VALUE;
  if (!side(s, dst, n, true, std::string(call) + " (destination)")) return CUDA_ERROR_INVALID_VALUE;
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<void*>(src), n);
  return CUDA_SUCCESS;
}

CUresult MemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  std::lock_guard l(D().mutex);
  if (CUresult r = check_stream(s)) return r;
  if (CUresult r; capture_operation(s, CU_GRAPH_NODE_TYPE_MEMCPY, "cuMemcpyAsync",
                                    [=](CUstream on) { return MemcpyAsync(dst, src, n, on); }, &r))
    return r;
  D().tick(s);
  return copy_on(s, dst, src, n, "cuMemcpyAsync");
}

// The driver's rules for a batch: a stream that is not the legacy one, at least one
// attribute, the first applying from copy 0, each from an increasing index within the
// batch, a source order the driver knows. On failure *failIdx names the copy, or is
// SIZE_MAX when the failure is not one copy's.
CUresult MemcpyBatchAsync(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count, CUmemcpyAttributes* attrs,
                          size_t* attr_idxs, size_t num_attrs, size_t* fail_idx, CUstream s) {
  std::lock_guard l(D().mutex);
  if (fail_idx) *fail_idx = SIZE_MAX;
  if (CUresult r = check_stream(s)) return r;
  if (!dsts || !srcs || !sizes || count == 0 || !attrs || !attr_idxs || num_attrs == 0 || num_attrs > count)
    return CUDA_ERROR_INVALID_VALUE;
  if (attr_idxs[0] != 0) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < num_attrs; ++i) {
    if (i > 0 && attr_idxs[i] <= attr_idxs[i - 1]) return CUDA_ERROR_INVALID_VALUE;
    if (attr_idxs[i] >= count) return CUDA_ERROR_INVALID_VALUE;
    if (attrs[i].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_INVALID) return CUDA_ERROR_INVALID_VALUE;
  }
  if (D().stream(s)->capturing) {
    D().problems.push_back("fake: cuMemcpyBatchAsync on a capturing stream (not modelled)");
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  for (size_t i = 0; i < count; ++i) {
    auto d = static_cast<std::uintptr_t>(dsts[i]), src = static_cast<std::uintptr_t>(srcs[i]);
    bool ok = sizes[i] > 0 && (D().device_range_valid(d, sizes[i]) || page_locked(d, sizes[i])) &&
              (D().device_range_valid(src, sizes[i]) || page_locked(src, sizes[i]));
    if (!ok) {
      if (fail_idx) *fail_idx = i;
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  D().tick(s);
  for (size_t i = 0; i < count; ++i)
    if (CUresult r = copy_on(s, dsts[i], srcs[i], sizes[i], "cuMemcpyBatchAsync")) return r;
  return CUDA_SUCCESS;
}

CUresult MemAllocManaged(CUdeviceptr* out, size_t bytes, unsigned flags) {
  std::lock_guard l(D().mutex);
  if (CUresult r = unsafe_call("cuMemAllocManaged")) return r;
  int d = current_device();
  if (d < 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (!out || bytes == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)) return CUDA_ERROR_INVALID_VALUE;
  void* p = ::operator new(bytes, std::align_val_t(256), std::nothrow);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(p, 0xA5, bytes);  // poison: uninitialized memory is not zero
  auto base = reinterpret_cast<std::uintptr_t>(p);
  Allocation a;
  a.bytes = bytes;
  a.device = d;
  a.managed = true;
  D().allocations[base] = a;
  D().forget_freed(base, bytes);
  D().created("device memory", p);  // freed by cuMemFree, like cuMemAlloc's
  *out = static_cast<CUdeviceptr>(base);
  return CUDA_SUCCESS;
}

bool valid_location(const CUmemLocation& l) {
  if (l.type == CU_MEM_LOCATION_TYPE_HOST) return true;
  return l.type == CU_MEM_LOCATION_TYPE_DEVICE && valid_device(l.id);
}

CUresult MemPrefetchAsync(CUdeviceptr p, size_t n, CUmemLocation location, unsigned flags, CUstream s) {
  std::lock_guard l(D().mutex);
  if (CUresult r = check_stream(s)) return r;
  if (flags != 0 || !valid_location(location) || managed_range(p, n) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (D().stream(s)->capturing) {
    D().problems.push_back("fake: cuMemPrefetchAsync on a capturing stream");
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  D().tick(s);
  // Migration moves the pages, not their values: a read for the ordering model.
  D().access(s, static_cast<std::uintptr_t>(p), n, false, "cuMemPrefetchAsync");
  return CUDA_SUCCESS;
}

CUresult MemAdvise(CUdeviceptr p, size_t n, CUmem_advise advice, CUmemLocation location) {
  std::lock_guard l(D().mutex);
  if (managed_range(p, n) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (advice < CU_MEM_ADVISE_SET_READ_MOSTLY || advice > CU_MEM_ADVISE_UNSET_ACCESSED_BY) return CUDA_ERROR_INVALID_VALUE;
  bool read_mostly = advice == CU_MEM_ADVISE_SET_READ_MOSTLY || advice == CU_MEM_ADVISE_UNSET_READ_MOSTLY;
  if (!read_mostly && !valid_location(location)) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

}  // namespace

void register_managed_memory(Driver& d) {
  using E = EntryId;
  d.implement<E::MemcpyAsync>(&MemcpyAsync);
  d.implement<E::MemcpyBatchAsync>(&MemcpyBatchAsync);
  d.implement<E::MemAllocManaged>(&MemAllocManaged);
  d.implement<E::MemPrefetchAsync>(&MemPrefetchAsync);
  d.implement<E::MemAdvise>(&MemAdvise);
}

}  // namespace cudakit::fake
