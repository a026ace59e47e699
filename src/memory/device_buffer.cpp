#include "cudakit/device_buffer.hpp"

#include "cudakit/detail/capture_counts.hpp"
#include "device/capture_tolerant_scope.hpp"
#include "cudakit/device.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "cudakit/memory_pool.hpp"
#include "stream/deferred.hpp"
#include "device/device_state.hpp"
#include "memory/out_of_memory.hpp"
#include "memory/pool_counters.hpp"
#include "memory/stream_fault.hpp"
#include "stream/stream_state_of.hpp"

namespace cudakit::detail {

using driver::cu;

void throw_device_out_of_memory(const char* call, int device, std::size_t bytes) {
  MemoryInfo info;
  try {
    info = Device::get(device).memory_info();
  } catch (...) {
  }
  throw OutOfMemory(call, describe(Resource::of_device(device)), bytes, info.free_bytes, info.total_bytes);
}

void throw_pool_out_of_memory(const char* call, int device, std::size_t bytes, std::size_t pool_reserved_bytes) {
  MemoryInfo info;
  try {
    info = Device::get(device).memory_info();
  } catch (...) {
  }
  throw OutOfMemory(call, describe(Resource::of_device(device)), bytes, info.free_bytes, info.total_bytes,
                    pool_reserved_bytes);
}

void throw_moved_from_buffer() {
  throw EmptyHandle(
      "use of a moved-from DeviceBuffer: its memory went to the buffer it was moved to (a default-constructed, "
      "0-element or reset() buffer is empty instead, and usable as an empty range)");
}

namespace {

// DESIGN 6: an allocation inside a capture would happen once, when captured, not at each
// launch (a graph memory node would, but its memory is the graph's, not a buffer's), so
// cudakit refuses it.
void refuse_allocation_in_capture(const char* call, StreamRef stream, int device) {
  if (active_captures.load(std::memory_order_relaxed) == 0) [[likely]]
    return;
  if (stream_state_of(stream)->marks.capture() != nullptr)
    throw CaptureError(std::string(call) + " on " + describe(Resource::of(ResourceKind::stream, stream.handle(), device)) +
                       " refused: the stream is capturing, and a buffer allocated inside a capture would be "
                       "allocated once, not at each launch of the graph; allocate it before the capture begins "
                       "(and fill it inside the capture if each launch needs it cleared)");
}

// The zero-fill of a new buffer. Its error is raised before `a` frees the memory, as the
// error leaves: a sticky code must poison the device with this error, the first one.
// Freed first, the free would fail on the dead context and poison it with the free's
// error, and the memset would then throw ContextPoisoned carrying the free instead.
void zero_fill(CUdeviceptr pointer, std::size_t bytes, int device, StreamRef stream) {
  CUresult z = cu.MemsetD8Async(pointer, 0, bytes, stream.handle());
  if (z != CUDA_SUCCESS)
    check_on_stream(z, cu.MemsetD8Async.name(),
                    Resource::of(ResourceKind::buffer, reinterpret_cast<const void*>(pointer), device), stream);
}

}  // namespace

Ref<Allocation> allocate_from_resource(StreamRef stream, std::size_t bytes, bool zero, const MemoryResource& resource) {
  const char* call = "DeviceBuffer from a memory resource";
  stream.require_handle(call);
  run_deferred_tasks_if_any();  // a safe point: frees graphs let go of (graph.hpp)
  if (bytes == 0) return nullptr;
  const int device = stream.device_ordinal();
  check_not_poisoned(call, Resource::of_device(device));
  refuse_allocation_in_capture(call, stream, device);
  ContextRef(library_context(device), device).make_current();
  void* memory = resource.allocate_async(bytes, default_alignment, stream);
  if (memory == nullptr)
    throw Error(std::string(call) + " on " + describe(Resource::of_device(device)) + ": the resource returned null for " +
                std::to_string(bytes) + " bytes (a resource reports failure by throwing)");
  const auto pointer = reinterpret_cast<CUdeviceptr>(memory);
  Ref<Allocation> a;
  try {
    a = Allocation::create(pointer, bytes, device, AllocationKind::resource, stream);
  } catch (...) {
    resource.deallocate_async(memory, bytes, default_alignment, stream);
    throw;
  }
  a->resource = resource.model();
  if (zero) zero_fill(pointer, bytes, device, stream);
  return a;
}

Ref<Allocation> allocate_device_memory(StreamRef stream, std::size_t bytes, bool zero, Allocator allocator) {
  const bool pool = allocator == Allocator::pool;
  const char* call = pool ? cu.MemAllocAsync.name() : cu.MemAlloc.name();
  stream.require_handle(call);
  run_deferred_tasks_if_any();  // a safe point: frees graphs let go of (graph.hpp)
  if (bytes == 0) return nullptr;
  int device = stream.device_ordinal();
  Resource res = Resource::of_device(device);
  check_not_poisoned(call, res);
  refuse_allocation_in_capture(call, stream, device);
  ContextRef(library_context(device), device).make_current();
  if (pool) configure_default_pool(device);  // once per device: see memory_pool.hpp
  CUdeviceptr pointer = 0;
  auto try_allocate = [&] {
    if (pool) return cu.MemAllocAsync(&pointer, bytes, stream.handle());
    CaptureTolerantScope tolerant;  // cuMemAlloc is not stream-ordered: safe beside a capture
    return cu.MemAlloc(&pointer, bytes);
  };
  CUresult r = try_allocate();
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    // Memory the default pool keeps for reuse (memory_pool.hpp) is not lost: hand it
    // back and try once more before giving up.
    trim_default_pool_quietly(device);
    r = try_allocate();
  }
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    if (pool) throw_pool_out_of_memory(call, device, bytes, default_pool_reserve_quietly(device));
    throw_device_out_of_memory(call, device, bytes);
  }
  check_on_stream(r, call, res, stream);  // a kernel's fault may surface here
  Ref<Allocation> a;
  try {
    a = Allocation::create(pointer, bytes, device, pool ? AllocationKind::pool : AllocationKind::plain, stream);
  } catch (...) {
    (void)(pool ? cu.MemFreeAsync(pointer, stream.handle()) : cu.MemFree(pointer));
    throw;
  }
  if (pool)
    if (PoolCounters* c = default_pool_counters(device)) c->allocated();
  if (zero) zero_fill(pointer, bytes, device, stream);
  return a;
}

}  // namespace cudakit::detail
