#include "cudakit/shareable_memory.hpp"

#include <utility>

#include "cudakit/context.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "device/device_state.hpp"
#include "driver/checked_call.hpp"
#include "memory/out_of_memory.hpp"
#include "memory/shared_pool_state.hpp"
#include "memory/stream_fault.hpp"
#include "memory/virtual_memory.hpp"
#include "stream/deferred.hpp"

namespace cudakit {

using driver::cu;

namespace {

CUmemAllocationProp shareable_props(int device) {
  return detail::vmm::chunk_properties(device, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
}

Resource range_resource(CUdeviceptr pointer, int device) {
  return Resource::of(ResourceKind::buffer, reinterpret_cast<const void*>(pointer), device);
}

// A physical allocation mapped at a reserved range of this process (the virtual-memory
// primitives of virtual_memory.hpp), undone in reverse: unmap, release the handle, free
// the range. Each step is done once, whether the mapping is finished (the buffer's
// release) or left halfway (a failed set-up or import).
struct MappedMemory final : detail::ExternalRelease {
  int device = -1;
  CUmemGenericAllocationHandle handle = 0;
  bool has_handle = false;
  CUdeviceptr pointer = 0;
  std::size_t bytes = 0;  // of the physical allocation and of the range
  bool mapped = false;

  bool stream_ordered() const noexcept override { return false; }
  void release(CUstream) override {
    // Every step is tried, whatever the one before answered (a step left undone is a
    // leak); the first failure is thrown once all were tried.
    const Resource res = range_resource(pointer, device);
    CUresult first = CUDA_SUCCESS;
    const char* first_call = nullptr;
    auto attempt = [&](CUresult r, const char* call) {
      if (r != CUDA_SUCCESS && first == CUDA_SUCCESS) {
        first = r;
        first_call = call;
      }
    };
    // A failed unmap is parked and tried once more, as a growable buffer's is: while the
    // range is mapped it cannot be given back. The handle is released either way.
    bool unmapped = true;
    if (std::exchange(mapped, false)) {
      CUresult u = cu.MemUnmap(pointer, bytes);
      if (u != CUDA_SUCCESS) {
        park_driver_error(u, cu.MemUnmap.name(), res, "shareable memory release");
        u = cu.MemUnmap(pointer, bytes);
      }
      attempt(u, cu.MemUnmap.name());
      unmapped = u == CUDA_SUCCESS;
    }
    if (std::exchange(has_handle, false)) attempt(detail::vmm::release_chunk(handle), cu.MemRelease.name());
    // A range still mapped is kept (a leak, reported) unless the context is dead, where the
    // free is tried all the same and refused with its error (DESIGN 7).
    if (CUdeviceptr p = std::exchange(pointer, 0); p != 0) {
      if (unmapped || detail::poison_of(device) != nullptr)
        attempt(detail::vmm::free_reservation(p, bytes), cu.MemAddressFree.name());
      else
        park_error({CUDA_SUCCESS, "shareable memory release",
                    "the address range at " + describe(res) + " is kept (a leak): it could not be unmapped"});
    }
    if (first != CUDA_SUCCESS) check(first, first_call, res);
  }
  // Undoes a set-up that failed part way; errors are parked (an error is on its way out).
  void undo() noexcept {
    try {
      release(nullptr);
    } catch (const DriverError& e) {
      park_error({e.code(), "shareable memory set-up", e.what()});
    }
  }
  // Reserves a range for the whole allocation, maps it and lets `device` read and write it.
  void map() {
    pointer = detail::vmm::reserve(device, bytes, 0);
    detail::vmm::map_chunk(device, pointer, bytes, handle, {});  // all or nothing
    mapped = true;
  }
};

void require_vmm_sharing(Device device) {
  if (device.attribute(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) == 0 ||
      device.attribute(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED) == 0)
    throw FeatureUnavailable(cu.MemCreate.name(), driver::entry_info(driver::EntryId::MemCreate).introduced_in,
                             driver::version(),
                             "device " + std::to_string(device.ordinal()) +
                                 " cannot share virtual memory as POSIX file descriptors");
}

// Builds a buffer's allocation over `memory` (which it then owns), owned by `stream`.
detail::Ref<detail::Allocation> allocation_over(MappedMemory* memory, std::size_t bytes, StreamRef stream) {
  return detail::Allocation::create_external(memory->pointer, bytes, memory->device, memory, stream);
}

const MappedMemory& mapped_memory_of(const detail::Allocation* allocation) {
  auto* m = allocation ? dynamic_cast<const MappedMemory*>(allocation->external_release()) : nullptr;
  if (m == nullptr || !m->has_handle)
    throw InvalidArgument("the buffer was not made by allocate_shareable (only those are shared as virtual memory)");
  return *m;
}

}  // namespace

std::size_t shareable_granularity(Device device) {
  check_not_poisoned(cu.MemGetAllocationGranularity.name(), Resource::of_device(device.ordinal()));
  require_vmm_sharing(device);
  CUmemAllocationProp prop = shareable_props(device.ordinal());
  std::size_t granularity = 0;
  checked_call(cu.MemGetAllocationGranularity, Resource::of_device(device.ordinal()), &granularity, &prop,
               CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  return granularity;
}

namespace detail {

Ref<Allocation> allocate_shareable_bytes(StreamRef stream, std::size_t bytes, bool zero) {
  const char* call = cu.MemCreate.name();
  stream.require_handle(call);
  run_deferred_tasks_if_any();
  if (bytes == 0) return nullptr;
  const int d = stream.device_ordinal();
  Device device = Device::get(d);
  check_not_poisoned(call, Resource::of_device(d));
  ContextRef(library_context(d), d).make_current();
  const std::size_t size = detail::vmm::round_up(bytes, shareable_granularity(device));
  auto* memory = new MappedMemory;
  memory->device = d;
  memory->bytes = size;
  Ref<Allocation> a;
  try {
    memory->handle = detail::vmm::create_chunk(d, size, shareable_props(d));
    memory->has_handle = true;
    memory->map();
  } catch (...) {
    memory->undo();
    delete memory;
    throw;
  }
  a = allocation_over(memory, bytes, stream);
  if (zero) {
    CUresult z = cu.MemsetD8Async(a->pointer, 0, bytes, stream.handle());
    if (z != CUDA_SUCCESS) check_on_stream(z, cu.MemsetD8Async.name(), range_resource(a->pointer, d), stream);
  }
  return a;
}

IpcDescriptor shareable_descriptor(const Allocation* allocation) {
  const MappedMemory& m = mapped_memory_of(allocation);
  IpcDescriptor d;
  d.kind = IpcKind::virtual_memory;
  d.bytes = allocation->bytes;
  d.allocation_bytes = m.bytes;
  d.device_uuid = Device::get(m.device).uuid();
  return d;
}

FileDescriptor shareable_file(const Allocation* allocation) {
  const MappedMemory& m = mapped_memory_of(allocation);
  Resource res = range_resource(m.pointer, m.device);
  check_not_poisoned(cu.MemExportToShareableHandle.name(), res);
  int fd = -1;
  checked_call(cu.MemExportToShareableHandle, res, &fd, m.handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0ull);
  return FileDescriptor(fd);
}

Ref<Allocation> import_shareable_bytes(StreamRef stream, const IpcMessage& message, std::size_t count,
                                       std::size_t element_bytes) {
  const char* what = "import of a virtual-memory allocation";
  const char* call = cu.MemImportFromShareableHandle.name();
  stream.require_handle(call);
  const int d = stream.device_ordinal();
  Device device = Device::get(d);
  const IpcDescriptor& desc = message.descriptor;
  require_ipc_kind(desc, IpcKind::virtual_memory, what);
  require_ipc_device(desc, device, what);
  if (count == 0 || count > desc.bytes / element_bytes || count * element_bytes != desc.bytes)
    throw IpcError(IpcFailure::wrong_size, std::string(what) + " refused: the descriptor shares " +
                                               std::to_string(desc.bytes) + " bytes, not " + std::to_string(count) +
                                               " elements of " + std::to_string(element_bytes) + " bytes");
  check_not_poisoned(call, Resource::of_device(d));
  const std::size_t granularity = shareable_granularity(device);
  if (desc.allocation_bytes % granularity != 0)
    throw IpcError(IpcFailure::wrong_size, std::string(what) + " refused: an allocation of " +
                                               std::to_string(desc.allocation_bytes) +
                                               " bytes is not a multiple of the granularity (" +
                                               std::to_string(granularity) + ")");
  ContextRef(library_context(d), d).make_current();
  auto* memory = new MappedMemory;
  memory->device = d;
  memory->bytes = desc.allocation_bytes;
  void* handle = reinterpret_cast<void*>(static_cast<std::intptr_t>(message.file.get()));
  CUresult r = cu.MemImportFromShareableHandle(&memory->handle, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  if (r != CUDA_SUCCESS) {
    delete memory;
    if (is_sticky(r)) check(r, call, Resource::of_device(d));
    throw_stale_handle(r, call, d, what);
  }
  memory->has_handle = true;
  try {
    memory->map();
  } catch (const DriverError& e) {
    memory->undo();
    delete memory;
    // The driver refuses a mapping larger than its allocation: a descriptor that claims
    // more than the memory has.
    if (e.code() != CUDA_ERROR_INVALID_VALUE || e.call() != cu.MemMap.name()) throw;
    throw IpcError(IpcFailure::wrong_size,
                   std::string(e.call()) + " on " + e.resource() + ": " + error_name(e.code()) + ": " + what +
                       " refused: mapping the " + std::to_string(desc.allocation_bytes) +
                       " bytes the descriptor states failed, so the driver's allocation is smaller",
                   e.code());
  } catch (...) {
    memory->undo();
    delete memory;
    throw;
  }
  return allocation_over(memory, desc.bytes, stream);
}

}  // namespace detail

}  // namespace cudakit
