// Fake driver: sharing memory pools and events between processes, with real shared
// memory so that two processes of a test (fork) share what they export. Virtual memory
// shared between processes (cuMemCreate with a POSIX file descriptor handle type, its
// export and import) is fake_virtual_memory.cpp's.
//
// - A pool made with cuMemPoolCreate is a memfd: a header page (a magic, an id, the
//   device, and a table of its allocations, live or freed) and the memory after it.
//   Memory is mapped MAP_SHARED, so an importer sees the exporter's writes.
// - The shareable handle is a new file descriptor of that memfd (POSIX file descriptor
//   handles only); an import reads the header and refuses a file that is not the fake's
//   with CUDA_ERROR_INVALID_VALUE.
// - A pool pointer's export data names the pool's id, its slot and extent; an import of
//   a slot that was freed, or of data that names another pool, is refused with
//   CUDA_ERROR_INVALID_VALUE, as the driver refuses a stale or forged one.
// - The rules the driver states: only a pool created with a POSIX file descriptor handle
//   type exports one; only an event made with CU_EVENT_INTERPROCESS and
//   CU_EVENT_DISABLE_TIMING has an IPC handle.
// - An event's IPC handle is the exporter's pid and a file descriptor number of a memfd
//   that says whether the event still exists: the bytes are a capability, as the
//   driver's are, for any process of the same user.
//
// It wraps cuMemAllocFromPoolAsync, cuMemFreeAsync, cuMemFree, the pool attributes and
// cuEventDestroy of the other area files: for its own pools and memory it answers, for
// everything else it calls theirs.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <string>

#include "fake_driver.hpp"

namespace cudakit::fake {

namespace {

Driver& D() { return Driver::current(); }

constexpr std::uint64_t pool_magic = 0x4c4f4f50454b4146ull;    // "FAKEPOOL"
constexpr std::uint64_t event_magic = 0x544e5645454b4146ull;   // "FAKEEVNT"
constexpr std::size_t header_bytes = 4096;
constexpr std::size_t page = 4096;
constexpr std::size_t pool_capacity = std::size_t(1) << 32;  // sparse

struct Slot {
  std::uint64_t offset, bytes;
  std::uint32_t live, pad;
};
struct SharedHeader {
  std::uint64_t magic;
  std::uint64_t id;
  std::uint64_t bytes;
  std::int32_t device;
  std::uint32_t slot_count;
  Slot slots[160];
};
static_assert(sizeof(SharedHeader) <= header_bytes);

struct PoolExportData {
  std::uint64_t magic, pool_id;
  std::uint32_t slot, pad;
  std::uint64_t offset, bytes;
};
static_assert(sizeof(PoolExportData) <= sizeof(CUmemPoolPtrExportData));

struct EventState {
  std::uint64_t magic;
  std::uint32_t destroyed, pad;
};
struct EventHandleBytes {
  std::uint64_t magic;
  std::int32_t pid, fd;
};

std::uint64_t random_id() {
  static std::mt19937_64 generator{std::random_device{}()};
  return generator() | 1;
}

// A memfd with a header page, the header mapped shared.
struct SharedFile {
  int fd = -1;
  SharedHeader* header = nullptr;

  bool create(const char* name, std::size_t data_bytes) {
    fd = ::memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) return false;
    if (::ftruncate(fd, static_cast<off_t>(header_bytes + data_bytes)) != 0) return close_all();
    return map_header();
  }
  // Reads the header of a descriptor from outside: false unless it carries `magic`.
  bool adopt_copy(int from, std::uint64_t magic) {
    SharedHeader h{};
    if (from < 0 || ::pread(from, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h) || h.magic != magic) return false;
    fd = ::fcntl(from, F_DUPFD_CLOEXEC, 0);
    return fd >= 0 && map_header();
  }
  bool map_header() {
    void* p = ::mmap(nullptr, header_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return close_all();
    header = static_cast<SharedHeader*>(p);
    return true;
  }
  bool close_all() {
    if (header) ::munmap(header, header_bytes);
    if (fd >= 0) ::close(fd);
    header = nullptr;
    fd = -1;
    return false;
  }
};

struct SharedPool {
  SharedFile file;
  int device = 0;
  bool shareable = false;
  bool imported = false;
  bool destroyed = false;
  bool exported = false;  // cuMemPoolExportToShareableHandle succeeded once
  std::uint64_t next_offset = header_bytes;
  std::uint64_t threshold = 0;
  int mapped = 0;  // live allocations or imports of this process
};
struct PoolMapping {
  SharedPool* pool;
  std::uint32_t slot;
  std::size_t bytes;
};
struct OpenEvent {
  int fd = -1;
  EventState* state = nullptr;
};

std::map<CUmemoryPool, SharedPool*> pools;
std::map<std::uintptr_t, PoolMapping> pool_mappings;
std::map<CUevent, OpenEvent> exported_events, opened_events;

// The other areas' entries this file wraps.
PFN_cuMemAllocFromPoolAsync_v11020 base_alloc_from_pool;
PFN_cuMemFreeAsync_v11020 base_free_async;
PFN_cuMemFree_v3020 base_free;
PFN_cuMemPoolSetAttribute_v11020 base_pool_set;
PFN_cuMemPoolGetAttribute_v11020 base_pool_get;
PFN_cuMemPoolTrimTo_v11020 base_pool_trim;
PFN_cuEventDestroy_v4000 base_event_destroy;
PFN_cuEventCreate_v2000 base_event_create;

SharedPool* pool_of(CUmemoryPool p) {
  auto it = pools.find(p);
  return it == pools.end() || it->second->destroyed ? nullptr : it->second;
}
void finish_pool_if_done(CUmemoryPool handle) {
  auto it = pools.find(handle);
  if (it == pools.end() || !it->second->destroyed || it->second->mapped > 0) return;
  it->second->file.close_all();
  delete it->second;
  pools.erase(it);
}
// Device memory the rest of the fake sees (copies, kernels, the ordering model).
void publish(std::uintptr_t base, std::size_t bytes, int device, const char* kind) {
  Allocation a;
  a.bytes = bytes;
  a.device = device;
  a.async = true;
  a.shared_mapping = true;
  D().allocations[base] = a;
  D().forget_freed(base, bytes);
  if (kind) D().created(kind, reinterpret_cast<void*>(base));
}
void unpublish(std::uintptr_t base, std::size_t bytes, const char* kind) {
  if (kind) D().destroyed(kind, reinterpret_cast<void*>(base));
  auto& acc = D().accesses;
  acc.erase(std::remove_if(acc.begin(), acc.end(), [&](const Access& a) { return a.begin >= base && a.end <= base + bytes; }),
            acc.end());
  D().allocations.erase(base);
  D().freed[base] = bytes;
}

bool valid_device(int d) { return d >= 0 && d < static_cast<int>(D().devices.size()); }

std::size_t page_round(std::size_t n) { return (n + page - 1) / page * page; }

// Maps `bytes` of a pool's memory at `offset` (shared): the address, or 0.
std::uintptr_t map_pool_memory(SharedPool& pool, std::uint64_t offset, std::size_t bytes) {
  void* p = ::mmap(nullptr, page_round(bytes), PROT_READ | PROT_WRITE, MAP_SHARED, pool.file.fd, static_cast<off_t>(offset));
  return p == MAP_FAILED ? 0 : reinterpret_cast<std::uintptr_t>(p);
}

// ---- pools ----

CUresult MemPoolCreate(CUmemoryPool* out, const CUmemPoolProps* props) {
  std::lock_guard l(D().mutex);
  if (!out || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
      props->location.type != CU_MEM_LOCATION_TYPE_DEVICE || !valid_device(props->location.id))
    return CUDA_ERROR_INVALID_VALUE;
  if (props->handleTypes != CU_MEM_HANDLE_TYPE_NONE && props->handleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    return CUDA_ERROR_NOT_SUPPORTED;  // the fake shares POSIX file descriptors only
  auto* pool = new SharedPool;
  if (!pool->file.create("fake-pool", pool_capacity)) {
    delete pool;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  pool->file.header->magic = pool_magic;
  pool->file.header->id = random_id();
  pool->file.header->device = props->location.id;
  pool->device = props->location.id;
  pool->shareable = props->handleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  auto handle = reinterpret_cast<CUmemoryPool>(pool);
  pools[handle] = pool;
  D().created("memory pool", handle);
  *out = handle;
  return CUDA_SUCCESS;
}

CUresult MemPoolDestroy(CUmemoryPool handle) {
  std::lock_guard l(D().mutex);
  SharedPool* pool = pool_of(handle);
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  D().destroyed("memory pool", handle);
  // As the driver: outstanding allocations keep the pool until they are freed.
  pool->destroyed = true;
  finish_pool_if_done(handle);
  return CUDA_SUCCESS;
}

CUresult MemPoolExportToShareableHandle(void* out, CUmemoryPool handle, CUmemAllocationHandleType type,
                                        unsigned long long flags) {
  std::lock_guard l(D().mutex);
  SharedPool* pool = pool_of(handle);
  if (!out || !pool || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  // The driver's rule: only a pool created with this handle type exports it.
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || !pool->shareable || pool->imported)
    return CUDA_ERROR_INVALID_VALUE;
  int fd = ::fcntl(pool->file.fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  *static_cast<int*>(out) = fd;
  pool->exported = true;
  return CUDA_SUCCESS;
}

CUresult MemPoolImportFromShareableHandle(CUmemoryPool* out, void* os_handle, CUmemAllocationHandleType type,
                                          unsigned long long flags) {
  std::lock_guard l(D().mutex);
  if (!out || flags != 0 || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
  auto* pool = new SharedPool;
  if (!pool->file.adopt_copy(static_cast<int>(reinterpret_cast<std::intptr_t>(os_handle)), pool_magic)) {
    delete pool;
    return CUDA_ERROR_INVALID_VALUE;
  }
  pool->device = pool->file.header->device;
  pool->imported = true;
  auto handle = reinterpret_cast<CUmemoryPool>(pool);
  pools[handle] = pool;
  D().created("memory pool", handle);
  *out = handle;
  return CUDA_SUCCESS;
}

CUresult MemAllocFromPoolAsync(CUdeviceptr* out, size_t bytes, CUmemoryPool handle, CUstream s) {
  std::lock_guard l(D().mutex);
  if (pools.find(handle) == pools.end()) return base_alloc_from_pool(out, bytes, handle, s);
  SharedPool* pool = pool_of(handle);
  if (!out || !pool || bytes == 0 || pool->imported) return CUDA_ERROR_INVALID_VALUE;
  if (!D().stream(s)) return CUDA_ERROR_INVALID_HANDLE;
  SharedHeader& h = *pool->file.header;
  if (h.slot_count == std::size(h.slots) || pool->next_offset + page_round(bytes) > header_bytes + pool_capacity)
    return CUDA_ERROR_OUT_OF_MEMORY;
  const std::uint64_t offset = pool->next_offset;
  std::uintptr_t p = map_pool_memory(*pool, offset, bytes);
  if (p == 0) return CUDA_ERROR_OUT_OF_MEMORY;
  pool->next_offset += page_round(bytes);
  const std::uint32_t slot = h.slot_count++;
  h.slots[slot] = Slot{offset, bytes, 1, 0};
  std::memset(reinterpret_cast<void*>(p), 0xA5, bytes);  // poison: pool memory is not zero
  pool_mappings[p] = PoolMapping{pool, slot, bytes};
  ++pool->mapped;
  publish(p, bytes, pool->device, "device memory");
  D().tick(s);
  D().access(s, p, bytes, true, "cuMemAllocFromPoolAsync");
  *out = static_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}

// Frees a pool allocation or import of this process; the exporter's free marks the slot
// freed for every importer.
CUresult free_pool_mapping(std::uintptr_t p) {
  auto it = pool_mappings.find(p);
  PoolMapping m = it->second;
  pool_mappings.erase(it);
  if (!m.pool->imported) m.pool->file.header->slots[m.slot].live = 0;
  unpublish(p, m.bytes, "device memory");
  ::munmap(reinterpret_cast<void*>(p), page_round(m.bytes));
  --m.pool->mapped;
  finish_pool_if_done(reinterpret_cast<CUmemoryPool>(m.pool));
  return CUDA_SUCCESS;
}

CUresult MemFreeAsync(CUdeviceptr p, CUstream s) {
  std::lock_guard l(D().mutex);
  auto b = static_cast<std::uintptr_t>(p);
  if (pool_mappings.find(b) == pool_mappings.end()) return base_free_async(p, s);
  if (!D().stream(s)) return CUDA_ERROR_INVALID_HANDLE;
  D().tick(s);
  return free_pool_mapping(b);
}

CUresult MemFree(CUdeviceptr p) {
  std::lock_guard l(D().mutex);
  auto b = static_cast<std::uintptr_t>(p);
  if (pool_mappings.find(b) == pool_mappings.end()) return base_free(p);
  return free_pool_mapping(b);
}

CUresult MemPoolExportPointer(CUmemPoolPtrExportData* out, CUdeviceptr p) {
  std::lock_guard l(D().mutex);
  auto it = pool_mappings.find(static_cast<std::uintptr_t>(p));
  if (!out || it == pool_mappings.end() || !it->second.pool->shareable || it->second.pool->imported)
    return CUDA_ERROR_INVALID_VALUE;
  // The driver's rule (seen on the H200, and checked there by a device test): an
  // allocation is exported only from a pool already shared.
  if (!it->second.pool->exported) return CUDA_ERROR_INVALID_VALUE;
  const PoolMapping& m = it->second;
  const Slot& slot = m.pool->file.header->slots[m.slot];
  PoolExportData data{pool_magic, m.pool->file.header->id, m.slot, 0, slot.offset, slot.bytes};
  std::memset(out, 0, sizeof *out);
  std::memcpy(out->reserved, &data, sizeof data);
  return CUDA_SUCCESS;
}

CUresult MemPoolImportPointer(CUdeviceptr* out, CUmemoryPool handle, CUmemPoolPtrExportData* in) {
  std::lock_guard l(D().mutex);
  SharedPool* pool = pool_of(handle);
  if (!out || !in || !pool || !pool->imported) return CUDA_ERROR_INVALID_VALUE;
  PoolExportData data{};
  std::memcpy(&data, in->reserved, sizeof data);
  const SharedHeader& h = *pool->file.header;
  // Forged (another pool, no such slot, an extent the slot does not have). An allocation
  // already freed is imported, as the driver does (the H200 imported one freed and
  // trimmed away): whether it is live is for cudakit's ledger to tell.
  if (data.magic != pool_magic || data.pool_id != h.id || data.slot >= h.slot_count) return CUDA_ERROR_INVALID_VALUE;
  const Slot& slot = h.slots[data.slot];
  if (slot.offset != data.offset || slot.bytes != data.bytes) return CUDA_ERROR_INVALID_VALUE;
  std::uintptr_t p = map_pool_memory(*pool, slot.offset, slot.bytes);
  if (p == 0) return CUDA_ERROR_OUT_OF_MEMORY;
  pool_mappings[p] = PoolMapping{pool, data.slot, slot.bytes};
  ++pool->mapped;
  publish(p, slot.bytes, pool->device, "device memory");
  *out = static_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}

CUresult MemPoolSetAttribute(CUmemoryPool handle, CUmemPool_attribute attribute, void* value) {
  std::lock_guard l(D().mutex);
  if (pools.find(handle) == pools.end()) return base_pool_set(handle, attribute, value);
  SharedPool* pool = pool_of(handle);
  if (!pool || !value) return CUDA_ERROR_INVALID_VALUE;
  if (attribute == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) pool->threshold = *static_cast<cuuint64_t*>(value);
  return CUDA_SUCCESS;
}

CUresult MemPoolGetAttribute(CUmemoryPool handle, CUmemPool_attribute attribute, void* value) {
  std::lock_guard l(D().mutex);
  if (pools.find(handle) == pools.end()) return base_pool_get(handle, attribute, value);
  SharedPool* pool = pool_of(handle);
  if (!pool || !value) return CUDA_ERROR_INVALID_VALUE;
  std::uint64_t used = 0;
  for (auto& [p, m] : pool_mappings)
    if (m.pool == pool) used += m.bytes;
  auto* out = static_cast<cuuint64_t*>(value);
  switch (attribute) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *out = pool->threshold; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *out = used; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult MemPoolTrimTo(CUmemoryPool handle, size_t keep) {
  std::lock_guard l(D().mutex);
  if (pools.find(handle) == pools.end()) return base_pool_trim(handle, keep);
  return pool_of(handle) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult PointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr p) {
  std::lock_guard l(D().mutex);
  std::uintptr_t base = 0;
  const Allocation* a = D().allocation_of(static_cast<std::uintptr_t>(p), &base);
  if (!data || !a) return CUDA_ERROR_INVALID_VALUE;
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *static_cast<std::size_t*>(data) = a->bytes; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *static_cast<CUdeviceptr*>(data) = base; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *static_cast<int*>(data) = a->device; return CUDA_SUCCESS;
    default: return CUDA_ERROR_NOT_SUPPORTED;
  }
}

// ---- events ----

CUresult IpcGetEventHandle(CUipcEventHandle* out, CUevent e) {
  std::lock_guard l(D().mutex);
  FakeEvent* ev = D().event(e);
  if (!out || !ev) return CUDA_ERROR_INVALID_HANDLE;
  // The driver's rule: an interprocess event without timing.
  if ((ev->flags & CU_EVENT_INTERPROCESS) == 0 || (ev->flags & CU_EVENT_DISABLE_TIMING) == 0)
    return CUDA_ERROR_INVALID_VALUE;
  OpenEvent& shared = exported_events[e];
  if (shared.fd < 0) {
    shared.fd = ::memfd_create("fake-event", MFD_CLOEXEC);
    if (shared.fd < 0 || ::ftruncate(shared.fd, page) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    void* p = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_SHARED, shared.fd, 0);
    if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    shared.state = static_cast<EventState*>(p);
    shared.state->magic = event_magic;
  }
  EventHandleBytes bytes{event_magic, static_cast<std::int32_t>(::getpid()), shared.fd};
  std::memset(out, 0, sizeof *out);
  std::memcpy(out->reserved, &bytes, sizeof bytes);
  return CUDA_SUCCESS;
}

CUresult IpcOpenEventHandle(CUevent* out, CUipcEventHandle handle) {
  std::lock_guard l(D().mutex);
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  EventHandleBytes bytes{};
  std::memcpy(&bytes, handle.reserved, sizeof bytes);
  if (bytes.magic != event_magic) return CUDA_ERROR_INVALID_VALUE;
  // The exporter's memfd, through /proc: any process of the same user may open it.
  const std::string path = "/proc/" + std::to_string(bytes.pid) + "/fd/" + std::to_string(bytes.fd);
  OpenEvent opened;
  opened.fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (opened.fd < 0) return CUDA_ERROR_INVALID_VALUE;
  void* p = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_SHARED, opened.fd, 0);
  if (p == MAP_FAILED) {
    ::close(opened.fd);
    return CUDA_ERROR_INVALID_VALUE;
  }
  opened.state = static_cast<EventState*>(p);
  if (opened.state->magic != event_magic || opened.state->destroyed) {
    ::munmap(p, page);
    ::close(opened.fd);
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUevent e = nullptr;
  if (CUresult r = base_event_create(&e, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING)) {
    ::munmap(p, page);
    ::close(opened.fd);
    return r;
  }
  D().event(e)->recorded = true;  // the producer's record: complete, since the fake runs work at once
  opened_events[e] = opened;
  *out = e;
  return CUDA_SUCCESS;
}

void close_event_file(std::map<CUevent, OpenEvent>& files, CUevent e, bool mark_destroyed) {
  auto it = files.find(e);
  if (it == files.end()) return;
  if (it->second.state) {
    if (mark_destroyed) it->second.state->destroyed = 1;
    ::munmap(it->second.state, page);
  }
  if (it->second.fd >= 0) ::close(it->second.fd);
  files.erase(it);
}

CUresult EventDestroy(CUevent e) {
  std::lock_guard l(D().mutex);
  CUresult r = base_event_destroy(e);
  if (r == CUDA_SUCCESS) {
    close_event_file(exported_events, e, true);
    close_event_file(opened_events, e, false);
  }
  return r;
}

template <EntryId Id>
auto base_of(Driver& d) {
  return reinterpret_cast<typename driver::EntryType<Id>::type>(d.impls[static_cast<std::size_t>(Id)]);
}

}  // namespace

void register_ipc(Driver& d) {
  using E = EntryId;
  base_alloc_from_pool = base_of<E::MemAllocFromPoolAsync>(d);
  base_free_async = base_of<E::MemFreeAsync>(d);
  base_free = base_of<E::MemFree>(d);
  base_pool_set = base_of<E::MemPoolSetAttribute>(d);
  base_pool_get = base_of<E::MemPoolGetAttribute>(d);
  base_pool_trim = base_of<E::MemPoolTrimTo>(d);
  base_event_destroy = base_of<E::EventDestroy>(d);
  base_event_create = base_of<E::EventCreate>(d);
  d.implement<E::MemAllocFromPoolAsync>(&MemAllocFromPoolAsync);
  d.implement<E::MemFreeAsync>(&MemFreeAsync);
  d.implement<E::MemFree>(&MemFree);
  d.implement<E::MemPoolSetAttribute>(&MemPoolSetAttribute);
  d.implement<E::MemPoolGetAttribute>(&MemPoolGetAttribute);
  d.implement<E::MemPoolTrimTo>(&MemPoolTrimTo);
  d.implement<E::EventDestroy>(&EventDestroy);
  d.implement<E::PointerGetAttribute>(&PointerGetAttribute);
  d.implement<E::MemPoolCreate>(&MemPoolCreate);
  d.implement<E::MemPoolDestroy>(&MemPoolDestroy);
  d.implement<E::MemPoolExportToShareableHandle>(&MemPoolExportToShareableHandle);
  d.implement<E::MemPoolImportFromShareableHandle>(&MemPoolImportFromShareableHandle);
  d.implement<E::MemPoolExportPointer>(&MemPoolExportPointer);
  d.implement<E::MemPoolImportPointer>(&MemPoolImportPointer);
  d.implement<E::IpcGetEventHandle>(&IpcGetEventHandle);
  d.implement<E::IpcOpenEventHandle>(&IpcOpenEventHandle);
}

void forget_ipc_state() {
  for (auto& [p, m] : pool_mappings) ::munmap(reinterpret_cast<void*>(p), page_round(m.bytes));
  pool_mappings.clear();
  for (auto& [h, pool] : pools) {
    pool->file.close_all();
    delete pool;
  }
  pools.clear();
  while (!exported_events.empty()) close_event_file(exported_events, exported_events.begin()->first, true);
  while (!opened_events.empty()) close_event_file(opened_events, opened_events.begin()->first, false);
}

}  // namespace cudakit::fake
