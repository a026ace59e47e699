// Fake driver: device memory (host memory stands in), stream-ordered allocation and
// frees, copies and memsets, page-locked host memory (cuMemHostAlloc, registrations),
// the default memory pools, peer copies and peer access. Every access is recorded in the
// ordering model, so an unordered cross-stream access shows up as a hazard; accesses to
// page-locked host memory are recorded too (copies by streams, frees and unregistrations
// by the host, and, through cudakit's host-access hook, its staging memcpys), so a
// page-locked buffer freed or refilled while a copy still uses it is a hazard as well.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>

#include "memory/staging.hpp"
#include "fake_driver.hpp"

namespace cudakit::fake {

namespace {

Driver& D() { return Driver::current(); }

CUresult check_stream_arg(CUstream s) {
  if (s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) {
    D().problems.push_back("a memory call was given the legacy/default stream (DESIGN 1)");
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (!D().stream(s)) return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_SUCCESS;
}

CUresult allocate(CUdeviceptr* out, size_t bytes, int device, bool async, bool pinned, void** host_out = nullptr) {
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (!pinned && D().device_memory_used(device) + bytes > D().devices[device].total_memory) return CUDA_ERROR_OUT_OF_MEMORY;
  if (pinned) {
    std::size_t locked = 0;
    for (auto& [b, a] : D().allocations)
      if (a.pinned_host) locked += a.bytes;
    if (locked + bytes > D().pinned_host_limit) return CUDA_ERROR_OUT_OF_MEMORY;
  }
  void* p = ::operator new(bytes, std::align_val_t(256), std::nothrow);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(p, 0xA5, bytes);  // poison: uninitialized memory is not zero
  auto base = reinterpret_cast<std::uintptr_t>(p);
  D().allocations[base] = Allocation{bytes, device, pinned, async};
  D().forget_freed(base, bytes);
  D().created(pinned ? "pinned host memory" : "device memory", p);
  if (out) *out = static_cast<CUdeviceptr>(base);
  if (host_out) *host_out = p;
  return CUDA_SUCCESS;
}

CUresult free_memory(std::uintptr_t base, bool pinned) {
  auto it = D().allocations.find(base);
  if (it == D().allocations.end() || it->second.pinned_host != pinned || it->second.mapped) {
    D().problems.push_back(std::string("free of ") + (pinned ? "pinned" : "device") + " memory that is not allocated");
    return CUDA_ERROR_INVALID_VALUE;
  }
  D().destroyed(pinned ? "pinned host memory" : "device memory", reinterpret_cast<void*>(base));
  // Forget the freed range's accesses: the address may be handed out again.
  std::size_t bytes = it->second.bytes;
  auto& acc = D().accesses;
  acc.erase(std::remove_if(acc.begin(), acc.end(), [&](const Access& a) { return a.begin >= base && a.end <= base + bytes; }),
            acc.end());
  ::operator delete(reinterpret_cast<void*>(base), std::align_val_t(256));
  D().allocations.erase(it);
  D().freed[base] = bytes;  // a later access to it is a use after free
  return CUDA_SUCCESS;
}

int current_device() {
  // Read directly, not through the driver table: the fake's own look-ups are not calls
  // cudakit makes (the fault sweep would count and fail them as if they were).
  CUcontext c = current_context();
  return c ? device_of(c) : -1;
}

// A device range must lie inside one live allocation.
bool valid_range(CUdeviceptr p, std::size_t bytes) { return D().device_range_valid(static_cast<std::uintptr_t>(p), bytes); }

std::string hex(std::uintptr_t p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(p));
  return buf;
}

// Whether [p, p + bytes) is page-locked: inside one cuMemHostAlloc allocation or one
// registration.
bool page_locked(const void* p, std::size_t bytes) {
  auto b = reinterpret_cast<std::uintptr_t>(p);
  std::uintptr_t base = 0;
  if (const Allocation* a = D().allocation_of(b, &base); a != nullptr && a->pinned_host)
    return b + bytes <= base + a->bytes;
  auto& regs = D().host_registrations;
  auto it = regs.upper_bound(b);
  if (it == regs.begin()) return false;
  --it;
  return b + bytes <= it->first + it->second.bytes;
}

// A copy's host side: page-locked memory is an access in the ordering model; pageable
// memory is noted (cudakit never hands it to an asynchronous copy).
void host_side(CUstream s, const void* p, std::size_t bytes, bool write, const char* call) {
  if (page_locked(p, bytes))
    D().access(s, reinterpret_cast<std::uintptr_t>(p), bytes, write, std::string(call) + " (page-locked host side)");
  else
    D().pageable_async_copies.push_back(std::string(call) + " with pageable host memory at " +
                                        hex(reinterpret_cast<std::uintptr_t>(p)) + ", " + std::to_string(bytes) + " bytes");
}

std::uint64_t pool_used(int device) {
  std::uint64_t used = 0;
  for (auto& [b, a] : D().allocations)
    if (a.async && a.device == device) used += a.bytes;
  return used;
}

void pool_allocated(int device) {
  FakePool& p = D().pools[device];
  std::uint64_t used = pool_used(device);
  p.reserved = std::max(p.reserved, used);
  p.reserved_high = std::max(p.reserved_high, p.reserved);
  p.used_high = std::max(p.used_high, used);
}

CUresult MemAlloc(CUdeviceptr* out, size_t bytes) {
  std::lock_guard l(D().mutex);
  if (CUresult r = unsafe_call("cuMemAlloc")) return r;
  int d = current_device();
  if (d < 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  return allocate(out, bytes, d, false, false);
}

CUresult MemFree(CUdeviceptr p) {
  std::lock_guard l(D().mutex);
  if (CUresult r = unsafe_call("cuMemFree")) return r;
  auto base = static_cast<std::uintptr_t>(p);
  // Synchronous free: the host must already know every access completed.
  if (auto it = D().allocations.find(base); it != D().allocations.end())
    D().access(nullptr, base, it->second.bytes, true, "cuMemFree");
  return free_memory(base, false);
}

// Graph memory nodes (stream-ordered allocation inside a capture) are not modelled.
CUresult refuse_graph_memory(CUstream s, const char* what) {
  if (!D().stream(s)->capturing) return CUDA_SUCCESS;
  D().problems.push_back(std::string("fake: ") + what + " on a capturing stream (graph memory nodes are not modelled)");
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult MemAllocAsync(CUdeviceptr* out, size_t bytes, CUstream s) {
  std::lock_guard l(D().mutex);
  if (CUresult r = check_stream_arg(s)) return r;
  if (CUresult r = refuse_graph_memory(s, "cuMemAllocAsync")) return r;
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = allocate(out, bytes, D().stream(s)->device, true, false);
  if (r == CUDA_SUCCESS) {
    D().tick(s);
    D().access(s, static_cast<std::uintptr_t>(*out), bytes, true, "cuMemAllocAsync");
    pool_allocated(D().stream(s)->device);
  }
  return r;
}

CUresult MemFreeAsync(CUdeviceptr p, CUstream s) {
  std::lock_guard l(D().mutex);
  if (CUresult r = check_stream_arg(s)) return r;
  if (CUresult r = refuse_graph_memory(s, "cuMemFreeAsync")) return r;
  auto base = static_cast<std::uintptr_t>(p);
  auto it = D().allocations.find(base);
  if (it == D().allocations.end()) return CUDA_ERROR_INVALID_VALUE;
  D().tick(s);
  D().access(s, base, it->second.bytes, true, "cuMemFreeAsync");
  return free_memory(base, false);
}

CUresult MemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream s) {
  std::lock_guard l(D().mutex);
  if (CUresult r = check_stream_arg(s)) return r;
  if (!valid_range(p, n)) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r; capture_operation(s, CU_GRAPH_NODE_TYPE_MEMSET, "cuMemsetD8Async", [=](CUstream on) { return MemsetD8Async(p, v, n, on); }, &r)) return r;
  D().tick(s);
  D().access(s, static_cast<std::uintptr_t>(p), n, true, "cuMemsetD8Async");
  std::memset(reinterpret_cast<void*>(p), v, n);
  return CUDA_SUCCESS;
}

CUresult MemsetD16Async(CUdeviceptr p, unsigned short v, size_t n, CUstream s) {
  std::lock_guard l(D().mutex);
  if (CUresult r = check_stream_arg(s)) return r;
  if (p % 2 || !valid_range(p, n * 2)) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r; capture_operation(s, CU_GRAPH_NODE_TYPE_MEMSET, "cuMemsetD16Async", [=](CUstream on) { return MemsetD16Async(p, v, n, on); }, &r)) return r;
  D().tick(s);
  D().access(s, static_cast<std::uintptr_t>(p), n * 2, true, "cuMemsetD16Async");
  auto* d = reinterpret_cast<unsigned short*>(p);
  for (size_t i = 0; i < n; ++i) d[i] = v;
  return CUDA_SUCCESS;
}

CUresult MemsetD32Async(CUdeviceptr p, unsigned v, size_t n, CUstream s) {
  std::lock_guard l(D().mutex);
  if (CUresult r = check_stream_arg(s)) return r;
  if (p % 4 || !valid_range(p, n * 4)) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r; capture_operation(s, CU_GRAPH_NODE_TYPE_MEMSET, "cuMemsetD32Async", [=](CUstream on) { return MemsetD32Async(p, v, n, on); }, &r)) return r;
  D().tick(s);
  D().access(s, static_cast<std::uintptr_t>(p), n * 4, true, "cuMemsetD32Async");
  auto* d = reinterpret_cast<unsigned*>(p);
  for (size_t i = 0; i < n; ++i) d[i] = v;
  return CUDA_SUCCESS;
}

// `height` rows of `width` 4-byte words, `pitch` bytes apart.
CUresult MemsetD2D32Async(CUdeviceptr p, size_t pitch, unsigned v, size_t width, size_t height, CUstream s) {
  std::lock_guard l(D().mutex);
  if (CUresult r = check_stream_arg(s)) return r;
  if (height == 0 || width == 0) return CUDA_SUCCESS;
  const size_t span = pitch * (height - 1) + width * 4;
  if (p % 4 || pitch % 4 || (height > 1 && pitch < width * 4) || !valid_range(p, span)) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r; capture_operation(s, CU_GRAPH_NODE_TYPE_MEMSET, "cuMemsetD2D32Async",
                                    [=](CUstream on) { return MemsetD2D32Async(p, pitch, v, width, height, on); }, &r))
    return r;
  D().tick(s);
  D().access(s, static_cast<std::uintptr_t>(p), span, true, "cuMemsetD2D32Async");
  for (size_t row = 0; row < height; ++row) {
    auto* d = reinterpret_cast<unsigned*>(p + row * pitch);
    for (size_t i = 0; i < width; ++i) d[i] = v;
  }
  return CUDA_SUCCESS;
}

CUresult MemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  std::lock_guard l(D().mutex);
  if (CUresult r = check_stream_arg(s)) return r;
  if (!valid_range(dst, n) || !valid_range(src, n)) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r; capture_operation(s, CU_GRAPH_NODE_TYPE_MEMCPY, "cuMemcpyDtoDAsync", [=](CUstream on) { return MemcpyDtoDAsync(dst, src, n, on); }, &r)) return r;
  D().tick(s);
  D().access(s, static_cast<std::uintptr_t>(src), n, false, "cuMemcpyDtoDAsync (source)");
  D().access(s, static_cast<std::uintptr_t>(dst), n, true, "cuMemcpyDtoDAsync (destination)");
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<void*>(src), n);
  return CUDA_SUCCESS;
}

CUresult MemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  std::lock_guard l(D().mutex);
  if (CUresult r = check_stream_arg(s)) return r;
  if (!valid_range(dst, n) || !src) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r; capture_operation(s, CU_GRAPH_NODE_TYPE_MEMCPY, "cuMemcpyHtoDAsync", [=](CUstream on) { return MemcpyHtoDAsync(dst, src, n, on); }, &r)) return r;
  D().tick(s);
  host_side(s, src, n, false, "cuMemcpyHtoDAsync");
  D().access(s, static_cast<std::uintptr_t>(dst), n, true, "cuMemcpyHtoDAsync");
  std::memcpy(reinterpret_cast<void*>(dst), src, n);
  return CUDA_SUCCESS;
}

CUresult MemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  std::lock_guard l(D().mutex);
  if (CUresult r = check_stream_arg(s)) return r;
  if (!valid_range(src, n) || !dst) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r; capture_operation(s, CU_GRAPH_NODE_TYPE_MEMCPY, "cuMemcpyDtoHAsync", [=](CUstream on) { return MemcpyDtoHAsync(dst, src, n, on); }, &r)) return r;
  D().tick(s);
  D().access(s, static_cast<std::uintptr_t>(src), n, false, "cuMemcpyDtoHAsync");
  host_side(s, dst, n, true, "cuMemcpyDtoHAsync");
  std::memcpy(dst, reinterpret_cast<void*>(src), n);
  return CUDA_SUCCESS;
}


// ---- page-locked host memory ----

CUresult MemHostAlloc(void** pp, size_t bytes, unsigned flags) {
  std::lock_guard l(D().mutex);
  if (CUresult r = unsafe_call("MemHostAlloc")) return r;
  int d = current_device();
  if (d < 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (!pp) return CUDA_ERROR_INVALID_VALUE;
  if (flags & ~unsigned(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED))
    return CUDA_ERROR_INVALID_VALUE;
  CUresult r = allocate(nullptr, bytes, d, false, true, pp);
  if (r == CUDA_SUCCESS) D().allocations[reinterpret_cast<std::uintptr_t>(*pp)].host_flags = flags;
  return r;
}

CUresult MemFreeHost(void* p) {
  std::lock_guard l(D().mutex);
  if (CUresult r = unsafe_call("MemFreeHost")) return r;
  auto base = reinterpret_cast<std::uintptr_t>(p);
  // Not stream-ordered: the host must already know every copy that used it completed.
  if (auto it = D().allocations.find(base); it != D().allocations.end() && it->second.pinned_host)
    D().access(nullptr, base, it->second.bytes, true, "cuMemFreeHost");
  return free_memory(base, true);
}

CUresult MemHostRegister(void* p, size_t bytes, unsigned flags) {
  std::lock_guard l(D().mutex);
  if (CUresult r = unsafe_call("MemHostRegister")) return r;
  if (current_device() < 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (!p || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (flags & ~unsigned(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_READ_ONLY))
    return CUDA_ERROR_INVALID_VALUE;
  auto b = reinterpret_cast<std::uintptr_t>(p);
  for (auto& [base, reg] : D().host_registrations)
    if (b < base + reg.bytes && base < b + bytes) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  for (auto& [base, a] : D().allocations)
    if (a.pinned_host && b < base + a.bytes && base < b + bytes) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  D().host_registrations[b] = HostRegistration{bytes, flags};
  D().forget_freed(b, bytes);  // the host may have reused freed memory
  D().created("host registration", p);
  return CUDA_SUCCESS;
}

CUresult MemHostUnregister(void* p) {
  std::lock_guard l(D().mutex);
  if (CUresult r = unsafe_call("MemHostUnregister")) return r;
  auto b = reinterpret_cast<std::uintptr_t>(p);
  auto it = D().host_registrations.find(b);
  if (it == D().host_registrations.end()) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  std::size_t bytes = it->second.bytes;
  // Like a free: no copy may still use the range (the memory goes back to being pageable).
  D().access(nullptr, b, bytes, true, "cuMemHostUnregister");
  auto& acc = D().accesses;
  acc.erase(std::remove_if(acc.begin(), acc.end(), [&](const Access& a) { return a.begin >= b && a.end <= b + bytes; }),
            acc.end());
  D().host_registrations.erase(it);
  D().destroyed("host registration", p);
  return CUDA_SUCCESS;
}

CUresult MemHostGetDevicePointer(CUdeviceptr* out, void* p, unsigned flags) {
  std::lock_guard l(D().mutex);
  if (!out || !p || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  auto b = reinterpret_cast<std::uintptr_t>(p);
  std::uintptr_t base = 0;
  bool mapped = false;
  if (const Allocation* a = D().allocation_of(b, &base); a != nullptr && a->pinned_host)
    mapped = (a->host_flags & CU_MEMHOSTALLOC_DEVICEMAP) != 0;
  auto& regs = D().host_registrations;
  if (auto it = regs.upper_bound(b); !mapped && it != regs.begin()) {
    --it;
    mapped = b < it->first + it->second.bytes && (it->second.flags & CU_MEMHOSTREGISTER_DEVICEMAP) != 0;
  }
  if (!mapped) return CUDA_ERROR_INVALID_VALUE;
  *out = static_cast<CUdeviceptr>(b);  // unified addressing: the same address
  return CUDA_SUCCESS;
}

// ---- memory pools ----

char pool_storage[16];

CUmemoryPool pool_handle(int device) { return reinterpret_cast<CUmemoryPool>(&pool_storage[device]); }
int pool_device(CUmemoryPool pool) {
  auto p = reinterpret_cast<char*>(pool);
  if (p < pool_storage || p >= pool_storage + sizeof pool_storage) return -1;
  int d = static_cast<int>(p - pool_storage);
  return d < static_cast<int>(D().devices.size()) ? d : -1;
}

CUresult DeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice device) {
  std::lock_guard l(D().mutex);
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  if (device < 0 || device >= static_cast<int>(D().devices.size())) return CUDA_ERROR_INVALID_DEVICE;
  *pool = pool_handle(device);
  return CUDA_SUCCESS;
}

CUresult MemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attribute, void* value) {
  std::lock_guard l(D().mutex);
  int d = pool_device(pool);
  if (d < 0 || !value) return CUDA_ERROR_INVALID_VALUE;
  FakePool& p = D().pools[d];
  auto v = *static_cast<cuuint64_t*>(value);
  switch (attribute) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: p.release_threshold = v; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
      if (v != 0) return CUDA_ERROR_INVALID_VALUE;
      p.reserved_high = p.reserved;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      if (v != 0) return CUDA_ERROR_INVALID_VALUE;
      p.used_high = pool_used(d);
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult MemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attribute, void* value) {
  std::lock_guard l(D().mutex);
  int d = pool_device(pool);
  if (d < 0 || !value) return CUDA_ERROR_INVALID_VALUE;
  FakePool& p = D().pools[d];
  auto* out = static_cast<cuuint64_t*>(value);
  switch (attribute) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *out = p.release_threshold; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *out = p.reserved; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *out = p.reserved_high; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *out = pool_used(d); return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *out = p.used_high; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: *static_cast<int*>(value) = 1; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult MemPoolTrimTo(CUmemoryPool pool, size_t keep) {
  std::lock_guard l(D().mutex);
  int d = pool_device(pool);
  if (d < 0) return CUDA_ERROR_INVALID_VALUE;
  FakePool& p = D().pools[d];
  p.reserved = std::max<std::uint64_t>(pool_used(d), std::min<std::uint64_t>(p.reserved, keep));
  return CUDA_SUCCESS;
}

CUresult MemAllocFromPoolAsync(CUdeviceptr* out, size_t bytes, CUmemoryPool pool, CUstream s) {
  std::lock_guard l(D().mutex);
  if (CUresult r = check_stream_arg(s)) return r;
  if (CUresult r = refuse_graph_memory(s, "cuMemAllocFromPoolAsync")) return r;
  int d = pool_device(pool);
  if (!out || d < 0) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = allocate(out, bytes, d, true, false);
  if (r == CUDA_SUCCESS) {
    D().tick(s);
    D().access(s, static_cast<std::uintptr_t>(*out), bytes, true, "cuMemAllocFromPoolAsync");
    pool_allocated(d);
  }
  return r;
}

// ---- peers ----

CUresult MemcpyPeerAsync(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t n, CUstream s) {
  std::lock_guard l(D().mutex);
  if (CUresult r = check_stream_arg(s)) return r;
  int dd = device_of(dst_ctx), sd = device_of(src_ctx);
  if (dd < 0 || sd < 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (!valid_range(dst, n) || !valid_range(src, n)) return CUDA_ERROR_INVALID_VALUE;
  if (D().allocation_of(dst)->device != dd || D().allocation_of(src)->device != sd) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r; capture_operation(s, CU_GRAPH_NODE_TYPE_MEMCPY, "cuMemcpyPeerAsync",
                                    [=](CUstream on) { return MemcpyPeerAsync(dst, dst_ctx, src, src_ctx, n, on); }, &r))
    return r;
  D().tick(s);
  D().access(s, static_cast<std::uintptr_t>(src), n, false, "cuMemcpyPeerAsync (source)");
  D().access(s, static_cast<std::uintptr_t>(dst), n, true, "cuMemcpyPeerAsync (destination)");
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<void*>(src), n);
  return CUDA_SUCCESS;
}

CUresult CtxEnablePeerAccess(CUcontext peer, unsigned flags) {
  std::lock_guard l(D().mutex);
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  int from = current_device();
  if (from < 0) return CUDA_ERROR_INVALID_CONTEXT;
  int to = device_of(peer);
  if (to < 0 || to >= static_cast<int>(D().devices.size())) return CUDA_ERROR_INVALID_CONTEXT;
  if (to == from) return CUDA_ERROR_INVALID_DEVICE;
  if (!D().peer_access.insert({from, to}).second) return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  return CUDA_SUCCESS;
}

// cudakit's own host-side accesses to its staging memory (detail/staging.hpp).
void staging_host_access(CUstream s, const void* p, std::size_t bytes, bool write, const char* what) {
  D().access(s, reinterpret_cast<std::uintptr_t>(p), bytes, write, what);
}

}  // namespace

void register_memory(Driver& d) {
  using E = EntryId;
  d.implement<E::MemAlloc>(&MemAlloc);
  d.implement<E::MemFree>(&MemFree);
  d.implement<E::MemAllocAsync>(&MemAllocAsync);
  d.implement<E::MemFreeAsync>(&MemFreeAsync);
  d.implement<E::MemsetD8Async>(&MemsetD8Async);
  d.implement<E::MemsetD16Async>(&MemsetD16Async);
  d.implement<E::MemsetD32Async>(&MemsetD32Async);
  d.implement<E::MemsetD2D32Async>(&MemsetD2D32Async);
  d.implement<E::MemcpyDtoDAsync>(&MemcpyDtoDAsync);
  d.implement<E::MemcpyHtoDAsync>(&MemcpyHtoDAsync);
  d.implement<E::MemcpyDtoHAsync>(&MemcpyDtoHAsync);
  d.implement<E::MemHostAlloc>(&MemHostAlloc);
  d.implement<E::MemFreeHost>(&MemFreeHost);
  d.implement<E::MemHostRegister>(&MemHostRegister);
  d.implement<E::MemHostUnregister>(&MemHostUnregister);
  d.implement<E::MemHostGetDevicePointer>(&MemHostGetDevicePointer);
  d.implement<E::DeviceGetDefaultMemPool>(&DeviceGetDefaultMemPool);
  d.implement<E::MemPoolSetAttribute>(&MemPoolSetAttribute);
  d.implement<E::MemPoolGetAttribute>(&MemPoolGetAttribute);
  d.implement<E::MemPoolTrimTo>(&MemPoolTrimTo);
  d.implement<E::MemAllocFromPoolAsync>(&MemAllocFromPoolAsync);
  d.implement<E::MemcpyPeerAsync>(&MemcpyPeerAsync);
  d.implement<E::CtxEnablePeerAccess>(&CtxEnablePeerAccess);
  detail::host_access_hook = &staging_host_access;
}

}  // namespace cudakit::fake
