#include "cudakit/pool_resource.hpp"

#include <cstdint>
#include <string>

#include "cudakit/context.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "device/device_state.hpp"
#include "memory/out_of_memory.hpp"
#include "memory/pool_counters.hpp"

namespace cudakit {

using driver::cu;

namespace {

void require_alignment(std::size_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > default_alignment)
    throw InvalidArgument("PoolResource: alignment " + std::to_string(alignment) +
                          " refused: a pool's allocations are aligned to 256 bytes; ask for a power of two up to 256");
}

Resource pool_resource_of(const MemoryPoolRef& pool) {
  return Resource::of(ResourceKind::memory_pool, pool.handle(), pool.device_ordinal());
}

std::size_t reserve_of(const MemoryPoolRef& pool) noexcept {
  try {
    return pool.reserved_bytes();
  } catch (...) {
    return OutOfMemory::no_pool;
  }
}

}  // namespace

PoolResource::PoolResource(Device device) : pool_(MemoryPoolRef::device_default(device)) {}

PoolResource::PoolResource(MemoryPoolRef pool) : pool_(pool) {
  if (!pool_) throw InvalidArgument("PoolResource: the memory pool ref is empty");
}

StreamRef PoolResource::borrowed(CUstream stream) const {
  // The legacy stream (0, CU_STREAM_LEGACY = 1) and the per-thread default stream (2):
  // cudakit never submits to them (DESIGN 1).
  if (reinterpret_cast<std::uintptr_t>(stream) <= 2)
    throw InvalidArgument("PoolResource: the legacy or per-thread default stream cannot be used by cudakit; "
                          "pass a stream created with cuStreamCreate or cudaStreamCreateWithFlags");
  return StreamRef(stream, device_ordinal());
}

void* PoolResource::allocate_async(std::size_t bytes, std::size_t alignment, StreamRef stream) const {
  const char* call = cu.MemAllocFromPoolAsync.name();
  stream.require_handle(call);
  require_alignment(alignment);
  if (bytes == 0) return nullptr;
  const int device = device_ordinal();
  const Resource res = pool_resource_of(pool_);
  check_not_poisoned(call, res);
  ContextRef(detail::library_context(device), device).make_current();
  CUdeviceptr pointer = 0;
  CUresult r = cu.MemAllocFromPoolAsync(&pointer, bytes, pool_.handle(), stream.handle());
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    // The pool's unused memory is not lost: hand it back and try once more.
    try {
      pool_.trim_to(0);
    } catch (const DriverError&) {
    }
    r = cu.MemAllocFromPoolAsync(&pointer, bytes, pool_.handle(), stream.handle());
  }
  if (r == CUDA_ERROR_OUT_OF_MEMORY) detail::throw_pool_out_of_memory(call, device, bytes, reserve_of(pool_));
  check(r, call, res);
  if (detail::PoolCounters* c = detail::pool_counters(pool_.handle())) c->allocated();
  return reinterpret_cast<void*>(pointer);
}

void PoolResource::deallocate_async(void* pointer, std::size_t, std::size_t, StreamRef stream) const {
  if (pointer == nullptr) return;
  const char* call = cu.MemFreeAsync.name();
  stream.require_handle(call);
  const Resource res = Resource::of(ResourceKind::buffer, pointer, device_ordinal());
  ContextRef(detail::library_context(device_ordinal()), device_ordinal()).make_current();
  CUresult r = cu.MemFreeAsync(reinterpret_cast<CUdeviceptr>(pointer), stream.handle());
  if (detail::PoolCounters* c = detail::pool_counters(pool_.handle())) c->freed();
  check(r, call, res);
}

void* PoolResource::allocate(std::size_t bytes, std::size_t alignment) const {
  StreamRef service(detail::service_stream(device_ordinal()), device_ordinal());
  void* p = allocate_async(bytes, alignment, service);
  if (p != nullptr) {
    CUresult r = cu.StreamSynchronize(service.handle());
    if (r != CUDA_SUCCESS) {
      (void)cu.MemFreeAsync(reinterpret_cast<CUdeviceptr>(p), service.handle());
      if (detail::PoolCounters* c = detail::pool_counters(pool_.handle())) c->freed();
      check(r, cu.StreamSynchronize.name(), pool_resource_of(pool_));
    }
  }
  return p;
}

void PoolResource::deallocate(void* pointer, std::size_t bytes, std::size_t alignment) const {
  if (pointer == nullptr) return;
  StreamRef service(detail::service_stream(device_ordinal()), device_ordinal());
  deallocate_async(pointer, bytes, alignment, service);
  check(cu.StreamSynchronize(service.handle()), cu.StreamSynchronize.name(), pool_resource_of(pool_));
}

}  // namespace cudakit
