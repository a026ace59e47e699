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

void throw_moved_from_buffer() {
  throw EmptyHandle(
      "use of a moved-from DeviceBuffer: its memory went to the buffer it was moved to (a default-constructed, "
      "0-element or reset() buffer is empty instead, and usable as an empty range)");
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
  if (active_captures.load(std::memory_order_relaxed) != 0) [[unlikely]] {
    // DESIGN 6: an allocation inside a capture would happen once, when captured, not at
    // each launch (a graph memory node would, but its memory is the graph's, not a
    // buffer's), so cudakit refuses it.
    if (stream_state_of(stream)->marks.capture() != nullptr)
      throw CaptureError(std::string(call) + " on " +
                         describe(Resource::of(ResourceKind::stream, stream.handle(), device)) +
                         " refused: the stream is capturing, and a buffer allocated inside a capture would be "
                         "allocated once, not at each launch of the graph; allocate it before the capture begins "
                         "(and fill it inside the capture if each launch needs it cleared)");
  }
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
  if (r == CUDA_ERROR_OUT_OF_MEMORY) throw_device_out_of_memory(call, device, bytes);
  check_on_stream(r, call, res, stream);  // a kernel's fault may surface here
  Ref<Allocation> a;
  try {
    a = Allocation::create(pointer, bytes, device, pool ? AllocationKind::pool : AllocationKind::plain, stream);
  } catch (...) {
    (void)(pool ? cu.MemFreeAsync(pointer, stream.handle()) : cu.MemFree(pointer));
    throw;
  }
  if (zero) {
    // The memset's error is raised before `a` frees the memory, as the error leaves: a
    // sticky code must poison the device with this error, the first one. Freed first, the
    // free would fail on the dead context and poison it with cuMemFreeAsync's error, and
    // the memset would then throw ContextPoisoned carrying the free instead of itself.
    CUresult z = cu.MemsetD8Async(pointer, 0, bytes, stream.handle());
    if (z != CUDA_SUCCESS)
      check_on_stream(z, cu.MemsetD8Async.name(),
                      Resource::of(ResourceKind::buffer, reinterpret_cast<const void*>(pointer), device), stream);
  }
  return a;
}

}  // namespace cudakit::detail
