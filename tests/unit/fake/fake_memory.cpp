// Fake driver: device memory (host memory stands in), stream-ordered allocation and
// frees, copies and memsets. Every access is recorded in the ordering model, so an
// unordered cross-stream access shows up as a hazard.
#include <algorithm>
#include <cstring>
#include <new>

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
  std::size_t used = 0;
  for (auto& [b, a] : D().allocations)
    if (!a.pinned_host && a.device == device) used += a.bytes;
  if (!pinned && used + bytes > D().devices[device].total_memory) return CUDA_ERROR_OUT_OF_MEMORY;
  void* p = ::operator new(bytes, std::align_val_t(256), std::nothrow);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(p, 0xA5, bytes);  // poison: uninitialized memory is not zero
  auto base = reinterpret_cast<std::uintptr_t>(p);
  D().allocations[base] = Allocation{bytes, device, pinned, async};
  D().created(pinned ? "pinned host memory" : "device memory", p);
  if (out) *out = static_cast<CUdeviceptr>(base);
  if (host_out) *host_out = p;
  return CUDA_SUCCESS;
}

CUresult free_memory(std::uintptr_t base, bool pinned) {
  auto it = D().allocations.find(base);
  if (it == D().allocations.end() || it->second.pinned_host != pinned) {
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
  return CUDA_SUCCESS;
}

int current_device() {
  CUcontext c = nullptr;
  driver::cu.CtxGetCurrent(&c);
  return c ? device_of(c) : -1;
}

// A device range must lie inside one live allocation.
bool valid_range(CUdeviceptr p, std::size_t bytes) {
  std::uintptr_t base = 0;
  const Allocation* a = D().allocation_of(static_cast<std::uintptr_t>(p), &base);
  return a != nullptr && static_cast<std::uintptr_t>(p) + bytes <= base + a->bytes;
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
  std::memcpy(dst, reinterpret_cast<void*>(src), n);
  return CUDA_SUCCESS;
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
  d.implement<E::MemcpyDtoDAsync>(&MemcpyDtoDAsync);
  d.implement<E::MemcpyHtoDAsync>(&MemcpyHtoDAsync);
  d.implement<E::MemcpyDtoHAsync>(&MemcpyDtoHAsync);
}

}  // namespace cudakit::fake
