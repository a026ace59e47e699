#include "cudakit/shareable_pool.hpp"

#include <unistd.h>

#include <cstring>

#include "cudakit/context.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "device/device_state.hpp"
#include "driver/checked_call.hpp"
#include "memory/out_of_memory.hpp"
#include "memory/shared_pool_state.hpp"
#include "memory/stream_fault.hpp"
#include "stream/deferred.hpp"

namespace cudakit {

using driver::cu;

namespace detail {

namespace {

std::string uuid_text(const std::array<std::uint8_t, 16>& uuid) {
  static const char digits[] = "0123456789abcdef";
  std::string s;
  for (std::size_t i = 0; i < uuid.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += digits[uuid[i] >> 4];
    s += digits[uuid[i] & 15];
  }
  return s;
}

Resource pool_resource(CUmemoryPool pool, int device) { return Resource::of(ResourceKind::memory_pool, pool, device); }

void make_device_current(int device) { ContextRef(library_context(device), device).make_current(); }

// The release of a shareable pool's allocation, or of an imported one: a stream-ordered
// free (the driver takes cuMemFreeAsync for both), holding the pool until then.
struct PoolMemoryRelease final : ExternalRelease {
  PoolMemoryRelease(std::shared_ptr<SharedPoolState> pool, CUdeviceptr pointer,
                    AllocationLedger::Entry entry = {})
      : pool(std::move(pool)), pointer(pointer), entry(entry) {}
  bool stream_ordered() const noexcept override { return true; }
  // `stream` is null only on a dead context (no stream could be made): then, as for the
  // default pool's memory, cuMemFree, which needs no stream (never stream handle 0: DESIGN 1).
  void release(CUstream stream) override {
    // Out of the ledger before the free: a descriptor sent from now on is refused.
    if (entry.generation != 0) pool->ledger->leave(entry);
    const Resource res = Resource::of(ResourceKind::buffer, reinterpret_cast<const void*>(pointer), pool->device);
    if (stream == nullptr)
      check(cu.MemFree(pointer), cu.MemFree.name(), res);
    else
      check(cu.MemFreeAsync(pointer, stream), cu.MemFreeAsync.name(), res);
  }
  std::shared_ptr<SharedPoolState> pool;
  CUdeviceptr pointer;
  AllocationLedger::Entry entry;  // the producer's allocations only
};

void require_stream_on(StreamRef stream, int device, const char* call) {
  stream.require_handle(call);
  if (stream.device_ordinal() != device)
    throw InvalidArgument(std::string(call) + ": the stream is on device " + std::to_string(stream.device_ordinal()) +
                          " and the pool on device " + std::to_string(device));
}

// A size the driver reports for imported memory, against the size the descriptor states.
std::uint64_t range_size_of(CUdeviceptr pointer, int device) {
  std::size_t range = 0;
  checked_call(cu.PointerGetAttribute, Resource::of(ResourceKind::buffer, reinterpret_cast<const void*>(pointer), device),
               &range, CU_POINTER_ATTRIBUTE_RANGE_SIZE, pointer);
  return range;
}

int device_of_pointer(CUdeviceptr pointer, int device) {
  int ordinal = -1;
  checked_call(cu.PointerGetAttribute, Resource::of(ResourceKind::buffer, reinterpret_cast<const void*>(pointer), device),
               &ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, pointer);
  return ordinal;
}

}  // namespace

SharedPoolState::~SharedPoolState() {
  if (pool == nullptr) return;
  // The driver destroys a pool whose allocations are not all freed once they are.
  CUresult r = cu.MemPoolDestroy(pool);
  if (r != CUDA_SUCCESS) park_driver_error(r, cu.MemPoolDestroy.name(), pool_resource(pool, device), "memory pool destroy");
}

void require_ipc_kind(const IpcDescriptor& descriptor, IpcKind kind, const char* what) {
  if (descriptor.kind != kind)
    throw IpcError(IpcFailure::wrong_kind, std::string(what) + " refused: the descriptor is of a " +
                                               ipc_kind_name(descriptor.kind) + ", not of a " + ipc_kind_name(kind));
}

void require_ipc_device(const IpcDescriptor& descriptor, Device device, const char* what) {
  const auto local = device.uuid();
  if (descriptor.device_uuid != local)
    throw IpcError(IpcFailure::wrong_device, std::string(what) + " refused: the descriptor's device is GPU-" +
                                                 uuid_text(descriptor.device_uuid) + ", not device " +
                                                 std::to_string(device.ordinal()) + " (GPU-" + uuid_text(local) + ")");
}

void throw_stale_handle(CUresult code, const char* call, int device, const char* what) {
  throw IpcError(IpcFailure::stale,
                 std::string(call) + " on " + describe(Resource::of_device(device)) + ": " + error_name(code) + ": " +
                     what + " refused: the driver does not know the handle; the memory or event is gone in the "
                     "process that shared it, or the descriptor is forged",
                 code);
}

void throw_released_import() {
  throw EmptyHandle("use of a released ImportedBuffer: its import was released (release() or a move), and an "
                    "import cannot be used again; import the memory anew");
}

}  // namespace detail

// ---- the producer's pool ----

ShareablePool::ShareablePool(Device device, std::uint64_t release_threshold) {
  const int d = device.ordinal();
  const char* call = cu.MemPoolCreate.name();
  Resource res = Resource::of_device(d);
  check_not_poisoned(call, res);
  if (!device.supports_memory_pools() ||
      (device.attribute(CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES) & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == 0)
    throw FeatureUnavailable(call, driver::entry_info(driver::EntryId::MemPoolCreate).introduced_in, driver::version(),
                             "device " + std::to_string(d) +
                                 " cannot share memory pools as POSIX file descriptors "
                                 "(CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES)");
  detail::make_device_current(d);
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = device.handle();  // the driver names a device location by its handle
  auto state = std::make_shared<detail::SharedPoolState>();
  state->device = d;
  state->device_uuid = device.uuid();
  checked_call(cu.MemPoolCreate, res, &state->pool, &props);
  cuuint64_t threshold = release_threshold;
  checked_call(cu.MemPoolSetAttribute, detail::pool_resource(state->pool, d), state->pool,
               CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold);
  // cuMemPoolExportPointer refuses (CUDA_ERROR_INVALID_VALUE) an allocation of a pool that
  // was never exported, so a descriptor made before the pool is first sent would fail.
  int fd = -1;
  checked_call(cu.MemPoolExportToShareableHandle, detail::pool_resource(state->pool, d), &fd, state->pool,
               CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0ull);
  state->exported = FileDescriptor(fd);
  state->ledger.emplace(detail::AllocationLedger::create());
  state_ = std::move(state);
}

ShareablePool::ShareablePool(ShareablePool&&) noexcept = default;
ShareablePool& ShareablePool::operator=(ShareablePool&&) noexcept = default;
ShareablePool::~ShareablePool() = default;

MemoryPoolRef ShareablePool::ref() const {
  if (!state_) detail::throw_empty_handle("ShareablePool");
  return MemoryPoolRef(state_->pool, state_->device);
}

detail::Ref<detail::Allocation> ShareablePool::allocate_bytes(StreamRef stream, std::size_t bytes, bool zero) const {
  if (!state_) detail::throw_empty_handle("ShareablePool");
  const char* call = cu.MemAllocFromPoolAsync.name();
  const int d = state_->device;
  detail::require_stream_on(stream, d, call);
  detail::run_deferred_tasks_if_any();
  if (bytes == 0) return nullptr;
  Resource res = detail::pool_resource(state_->pool, d);
  check_not_poisoned(call, res);
  detail::make_device_current(d);
  CUdeviceptr pointer = 0;
  CUresult r = cu.MemAllocFromPoolAsync(&pointer, bytes, state_->pool, stream.handle());
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    (void)cu.MemPoolTrimTo(state_->pool, 0);
    r = cu.MemAllocFromPoolAsync(&pointer, bytes, state_->pool, stream.handle());
  }
  if (r == CUDA_ERROR_OUT_OF_MEMORY) detail::throw_device_out_of_memory(call, d, bytes);
  detail::check_on_stream(r, call, res, stream);
  detail::AllocationLedger::Entry entry;
  detail::Ref<detail::Allocation> a;
  try {
    entry = state_->ledger->enter();
    a = detail::Allocation::create_external(pointer, bytes, d, new detail::PoolMemoryRelease(state_, pointer, entry),
                                            stream);
  } catch (...) {
    state_->ledger->leave(entry);
    (void)cu.MemFreeAsync(pointer, stream.handle());
    throw;
  }
  if (zero) {
    CUresult z = cu.MemsetD8Async(pointer, 0, bytes, stream.handle());
    if (z != CUDA_SUCCESS)
      detail::check_on_stream(z, cu.MemsetD8Async.name(),
                              Resource::of(ResourceKind::buffer, reinterpret_cast<const void*>(pointer), d), stream);
  }
  return a;
}

IpcDescriptor ShareablePool::descriptor() const {
  if (!state_) detail::throw_empty_handle("ShareablePool");
  IpcDescriptor d;
  d.kind = IpcKind::memory_pool;
  d.device_uuid = state_->device_uuid;
  return d;
}

FileDescriptor ShareablePool::file() const {
  if (!state_) detail::throw_empty_handle("ShareablePool");
  Resource res = detail::pool_resource(state_->pool, state_->device);
  check_not_poisoned(cu.MemPoolExportToShareableHandle.name(), res);
  int fd = -1;
  checked_call(cu.MemPoolExportToShareableHandle, res, &fd, state_->pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0ull);
  return FileDescriptor(fd);
}

void ShareablePool::send(const IpcChannel& channel) const {
  FileDescriptor fd = file();
  channel.send(descriptor(), fd.get());
  IpcDescriptor ledger;
  ledger.kind = IpcKind::allocation_ledger;
  ledger.device_uuid = state_->device_uuid;
  FileDescriptor ledger_file = state_->ledger->file();
  channel.send(ledger, ledger_file.get());
}

IpcDescriptor ShareablePool::descriptor_of(const detail::Allocation* allocation) const {
  if (!state_) detail::throw_empty_handle("ShareablePool");
  auto* release = allocation ? dynamic_cast<detail::PoolMemoryRelease*>(allocation->external_release()) : nullptr;
  if (release == nullptr || release->pool != state_)
    throw InvalidArgument("ShareablePool::descriptor: the buffer was not allocated from this pool (only a "
                          "shareable pool's own allocations can be shared)");
  if (release->entry.generation == 0)
    throw InvalidArgument("ShareablePool::descriptor: more than " + std::to_string(detail::AllocationLedger::slots) +
                          " allocations of this pool are live; only that many can be shared at once");
  Resource res = Resource::of(ResourceKind::buffer, reinterpret_cast<const void*>(allocation->pointer), state_->device);
  check_not_poisoned(cu.MemPoolExportPointer.name(), res);
  CUmemPoolPtrExportData data{};
  checked_call(cu.MemPoolExportPointer, res, &data, allocation->pointer);
  IpcDescriptor d;
  d.kind = IpcKind::pool_allocation;
  d.bytes = allocation->bytes;
  d.allocation_bytes = allocation->bytes;
  d.device_uuid = state_->device_uuid;
  d.payload_bytes = sizeof data.reserved;
  std::memcpy(d.payload.data(), data.reserved, sizeof data.reserved);
  d.ledger_slot = release->entry.slot;
  d.ledger_generation = release->entry.generation;
  return d;
}

// ---- the consumer's pool ----

ImportedPool::ImportedPool(IpcMessage message, Device device) {
  const char* what = "import of a memory pool";
  detail::require_ipc_kind(message.descriptor, IpcKind::memory_pool, what);
  detail::require_ipc_device(message.descriptor, device, what);
  const int d = device.ordinal();
  const char* call = cu.MemPoolImportFromShareableHandle.name();
  check_not_poisoned(call, Resource::of_device(d));
  detail::make_device_current(d);
  auto state = std::make_shared<detail::SharedPoolState>();
  state->device = d;
  state->device_uuid = message.descriptor.device_uuid;
  state->imported = true;
  // The driver takes a POSIX file descriptor by value, cast to a pointer; it does not
  // close it: `message.file` does, when this returns.
  void* handle = reinterpret_cast<void*>(static_cast<std::intptr_t>(message.file.get()));
  CUresult r = cu.MemPoolImportFromShareableHandle(&state->pool, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0ull);
  if (r != CUDA_SUCCESS) {
    state->pool = nullptr;
    if (is_sticky(r)) check(r, call, Resource::of_device(d));
    detail::throw_stale_handle(r, call, d, what);
  }
  state_ = std::move(state);
}

ImportedPool ImportedPool::receive(const IpcChannel& channel, Device device, std::chrono::milliseconds timeout) {
  IpcMessage pool_message = channel.receive(timeout);
  // Both messages are taken before either is checked, so that a refused pool leaves no
  // ledger behind to be read as the next message; a message that is no pool is refused
  // at once (no ledger follows it).
  if (pool_message.descriptor.kind != IpcKind::memory_pool) return ImportedPool(std::move(pool_message), device);
  IpcMessage ledger = channel.receive(timeout);
  ImportedPool pool(std::move(pool_message), device);
  const char* what = "import of a pool's allocation ledger";
  detail::require_ipc_kind(ledger.descriptor, IpcKind::allocation_ledger, what);
  if (ledger.descriptor.device_uuid != pool.state_->device_uuid)
    throw IpcError(IpcFailure::wrong_device, std::string(what) + " refused: the ledger's device is not the pool's");
  pool.state_->ledger.emplace(detail::AllocationLedger::open(std::move(ledger.file)));
  return pool;
}

ImportedPool::ImportedPool(ImportedPool&&) noexcept = default;
ImportedPool& ImportedPool::operator=(ImportedPool&&) noexcept = default;
ImportedPool::~ImportedPool() = default;

CUmemoryPool ImportedPool::handle() const noexcept { return state_ ? state_->pool : nullptr; }

detail::Ref<detail::Allocation> ImportedPool::import_bytes(StreamRef stream, const IpcMessage& message,
                                                           std::size_t count, std::size_t element_bytes) const {
  const char* what = "import of a pool allocation";
  if (!state_) detail::throw_empty_handle("ImportedPool");
  const int d = state_->device;
  detail::require_stream_on(stream, d, cu.MemPoolImportPointer.name());
  const IpcDescriptor& desc = message.descriptor;
  detail::require_ipc_kind(desc, IpcKind::pool_allocation, what);
  if (desc.device_uuid != state_->device_uuid)
    throw IpcError(IpcFailure::wrong_device, std::string(what) + " refused: the allocation's device is not the pool's");
  if (count == 0 || count > desc.bytes / element_bytes || count * element_bytes != desc.bytes)
    throw IpcError(IpcFailure::wrong_size, std::string(what) + " refused: the descriptor shares " +
                                               std::to_string(desc.bytes) + " bytes, not " + std::to_string(count) +
                                               " elements of " + std::to_string(element_bytes) + " bytes");
  // The driver imports an allocation its producer already freed: the ledger tells.
  if (state_->ledger && !state_->ledger->live({desc.ledger_slot, desc.ledger_generation}))
    throw IpcError(IpcFailure::stale, std::string(what) + " refused: the producer freed that allocation (its pool's "
                                                            "ledger no longer holds slot " +
                                          std::to_string(desc.ledger_slot) + " at generation " +
                                          std::to_string(desc.ledger_generation) + ")");
  Resource res = detail::pool_resource(state_->pool, d);
  check_not_poisoned(cu.MemPoolImportPointer.name(), res);
  detail::make_device_current(d);
  CUmemPoolPtrExportData data{};
  std::memcpy(data.reserved, desc.payload.data(), sizeof data.reserved);
  CUdeviceptr pointer = 0;
  CUresult r = cu.MemPoolImportPointer(&pointer, state_->pool, &data);
  if (r != CUDA_SUCCESS) {
    if (is_sticky(r)) check(r, cu.MemPoolImportPointer.name(), res);
    detail::throw_stale_handle(r, cu.MemPoolImportPointer.name(), d, what);
  }
  // From here the import is owned, so every refusal below releases it.
  detail::Ref<detail::Allocation> a;
  try {
    a = detail::Allocation::create_external(pointer, desc.bytes, d, new detail::PoolMemoryRelease(state_, pointer),
                                            stream);
  } catch (...) {
    (void)cu.MemFreeAsync(pointer, stream.handle());
    throw;
  }
  // What the driver mapped must cover what the descriptor claims, on the pool's device:
  // a descriptor that claims more than the allocation would let kernels run off its end.
  const std::uint64_t mapped = detail::range_size_of(pointer, d);
  if (mapped < desc.bytes)
    throw IpcError(IpcFailure::wrong_size, std::string(what) + " refused: the descriptor claims " +
                                               std::to_string(desc.bytes) + " bytes, and the driver's allocation has " +
                                               std::to_string(mapped));
  const int on = detail::device_of_pointer(pointer, d);
  if (on != d)
    throw IpcError(IpcFailure::wrong_device, std::string(what) + " refused: the driver places the memory on device " +
                                                 std::to_string(on) + ", not on device " + std::to_string(d));
  return a;
}

}  // namespace cudakit
