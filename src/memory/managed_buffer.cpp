// ManagedBuffer's allocation, prefetches and advice (managed_buffer.hpp).
#include "cudakit/managed_buffer.hpp"

#include <string>

#include "cudakit/context.hpp"
#include "cudakit/detail/capture_counts.hpp"
#include "cudakit/device.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "device/capture_tolerant_scope.hpp"
#include "device/device_state.hpp"
#include "memory/out_of_memory.hpp"
#include "memory/stream_fault.hpp"
#include "stream/deferred.hpp"
#include "stream/stream_state_of.hpp"

namespace cudakit::detail {

using driver::cu;

namespace {

Resource managed_resource(CUdeviceptr pointer, int device) {
  return Resource::of(ResourceKind::buffer, reinterpret_cast<const void*>(pointer), device);
}

CUmemLocation location_of(int device) {
  CUmemLocation l{};
  l.type = device < 0 ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
  l.id = device < 0 ? 0 : device;
  return l;
}

CUmem_advise driver_advice(ManagedAdvice a) {
  switch (a) {
    case ManagedAdvice::read_mostly: return CU_MEM_ADVISE_SET_READ_MOSTLY;
    case ManagedAdvice::not_read_mostly: return CU_MEM_ADVISE_UNSET_READ_MOSTLY;
    case ManagedAdvice::preferred_location: return CU_MEM_ADVISE_SET_PREFERRED_LOCATION;
    case ManagedAdvice::no_preferred_location: return CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION;
    case ManagedAdvice::accessed_by: return CU_MEM_ADVISE_SET_ACCESSED_BY;
    case ManagedAdvice::not_accessed_by: return CU_MEM_ADVISE_UNSET_ACCESSED_BY;
  }
  throw InvalidArgument("ManagedBuffer::advise: an advice that is not one of ManagedAdvice's values");
}

// A managed buffer larger than the device's free memory would oversubscribe it: refused
// unless the caller allows it (managed_buffer.hpp).
void refuse_oversubscription(int device, std::size_t bytes) {
  MemoryInfo info = Device::get(device).memory_info();
  if (bytes <= info.free_bytes) return;
  throw OutOfMemory(std::string(cu.MemAllocManaged.name()) +
                        " (refused by cudakit before the driver: the buffer is larger than the device's free memory, "
                        "and oversubscribing it pages memory under every kernel, also other processes'; "
                        "ManagedOptions{.oversubscribe = true} allows it)",
                    describe(Resource::of_device(device)), bytes, info.free_bytes, info.total_bytes);
}

}  // namespace

void throw_moved_from_managed_buffer() {
  throw EmptyHandle("use of a moved-from ManagedBuffer: its memory went to the buffer it was moved to");
}

Ref<Allocation> allocate_managed_memory(StreamRef stream, std::size_t bytes, bool zero, ManagedOptions options) {
  const char* call = cu.MemAllocManaged.name();
  stream.require_handle(call);
  run_deferred_tasks_if_any();
  if (bytes == 0) return nullptr;
  int device = stream.device_ordinal();
  Resource res = Resource::of_device(device);
  check_not_poisoned(call, res);
  if (Device::get(device).attribute(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY) == 0)
    throw FeatureUnavailable(call, driver::entry_info(driver::EntryId::MemAllocManaged).introduced_in, driver::version(),
                             "ManagedBuffer: device " + std::to_string(device) + " does not support managed memory");
  ContextRef(library_context(device), device).make_current();
  if (!options.oversubscribe) refuse_oversubscription(device, bytes);
  CUdeviceptr pointer = 0;
  CUresult r;
  {
    CaptureTolerantScope tolerant(device);  // not stream-ordered: safe beside a capture
    r = cu.MemAllocManaged(&pointer, bytes, CU_MEM_ATTACH_GLOBAL);
  }
  if (r == CUDA_ERROR_OUT_OF_MEMORY) throw_device_out_of_memory(call, device, bytes);
  check(r, call, res);
  Ref<Allocation> a;
  try {
    a = Allocation::create(pointer, bytes, device, AllocationKind::managed, stream);
  } catch (...) {
    (void)cu.MemFree(pointer);
    throw;
  }
  if (zero) {
    // Raised before `a` frees the memory, for the reason allocate_device_memory gives.
    if (CUresult z = cu.MemsetD8Async(pointer, 0, bytes, stream.handle()); z != CUDA_SUCCESS)
      check_on_stream(z, cu.MemsetD8Async.name(), managed_resource(pointer, device), stream);
  }
  return a;
}

void prefetch_managed(Allocation* allocation, CUdeviceptr pointer, std::size_t bytes, StreamRef stream, int device) {
  const char* call = cu.MemPrefetchAsync.name();
  stream.require_handle(call);
  if (allocation == nullptr || bytes == 0) return;
  Resource res = managed_resource(pointer, allocation->device);
  check_not_poisoned(call, res);
  if (active_captures.load(std::memory_order_relaxed) != 0 && stream_state_of(stream)->marks.capture() != nullptr)
    throw CaptureError(std::string(call) + " on " +
                       describe(Resource::of(ResourceKind::stream, stream.handle(), stream.device_ordinal())) +
                       " refused: the stream is capturing, and a graph has no prefetch node; prefetch before the "
                       "capture begins, or on a stream that is not capturing");
  if (device >= 0) (void)Device::get(device);  // InvalidArgument for an ordinal out of range
  allocation->use(stream, Access::read);
  check_on_stream(cu.MemPrefetchAsync(pointer, bytes, location_of(device), 0u, stream.handle()), call, res, stream);
}

void advise_managed(const Allocation* allocation, CUdeviceptr pointer, std::size_t bytes, ManagedAdvice advice,
                    int device) {
  if (allocation == nullptr || bytes == 0) return;
  const char* call = cu.MemAdvise.name();
  Resource res = managed_resource(pointer, allocation->device);
  check_not_poisoned(call, res);
  if (device >= 0) (void)Device::get(device);
  CaptureTolerantScope tolerant(allocation->device);  // not stream-ordered
  ContextRef(library_context(allocation->device), allocation->device).make_current();
  check(cu.MemAdvise(pointer, bytes, driver_advice(advice), location_of(device)), call, res);
}

}  // namespace cudakit::detail
