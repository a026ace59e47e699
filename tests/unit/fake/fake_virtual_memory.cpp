// Fake driver: virtual memory (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess,
// cuMemUnmap, cuMemRelease, cuMemAddressFree, cuMemExportToShareableHandle,
// cuMemImportFromShareableHandle) with the driver's rules:
//   - sizes, offsets and addresses are multiples of the allocation granularity;
//   - a chunk is mapped only inside a reservation, onto addresses nothing else maps;
//   - a mapping is usable only after cuMemSetAccess gave a device access: before, copies
//     refuse it, and the host addresses behind it stay inaccessible (a kernel body that
//     touches them faults, as a GPU would);
//   - a reservation is freed only once nothing is mapped in it, whole;
//   - a released chunk stays until its last mapping is gone (as the driver keeps it);
//   - a chunk exports a shareable handle only when made with that requested handle type
//     (POSIX file descriptors, the only type the fake knows; other types are
//     CUDA_ERROR_NOT_SUPPORTED), and an import refuses a file that is not a fake chunk's
//     with CUDA_ERROR_INVALID_VALUE.
// A shareable chunk is real shared memory, so that two processes of a test (fork) share
// it: a memfd with a header page (a magic, the size, the device) and the bytes after it,
// mapped MAP_SHARED at the chunk's addresses; its shareable handle is a new descriptor of
// that memfd. A process-local chunk lives in the reservation's own host pages.
// Unmapping is a free for the ordering model: every access to the range must be known
// complete by the host, and a later access is a use after free.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "fake_driver.hpp"

namespace cudakit::fake {

std::size_t Driver::device_memory_used(int device) const {
  std::lock_guard l(mutex);
  std::size_t used = 0;
  for (auto& [b, a] : allocations)
    if (!a.pinned_host && !a.mapped && !a.managed && a.device == device) used += a.bytes;
  for (auto& [h, c] : physical)
    if (c.device == device && !c.imported) used += c.bytes;  // an import is the exporter's memory
  return used;
}

bool Driver::device_range_valid(std::uintptr_t p, std::size_t bytes) const {
  std::lock_guard l(mutex);
  std::uintptr_t base = 0;
  const Allocation* a = allocation_of(p, &base);
  if (a == nullptr) return false;
  std::uintptr_t end = p + bytes;
  // Mappings next to each other are one range to the device, as in a real address space.
  while (a->mapped && end > base + a->bytes) {
    std::uintptr_t next = base + a->bytes;
    auto it = allocations.find(next);
    if (it == allocations.end() || !it->second.mapped) return false;
    base = next;
    a = &it->second;
  }
  return end <= base + a->bytes;
}

void release_virtual_memory_left_behind(Driver& d) {
  for (auto& [base, r] : d.reservations) ::munmap(r.host_base, r.host_bytes);
  d.reservations.clear();
  for (auto& [h, c] : d.physical)
    if (c.fd >= 0) ::close(c.fd);
  d.physical.clear();
}

namespace {

Driver& D() { return Driver::current(); }

bool valid_device(int d) { return d >= 0 && d < static_cast<int>(D().devices.size()); }

bool multiple(std::size_t v) { return v % D().vmm_granularity == 0; }

// The reservation holding [p, p + bytes) whole, or null.
Reservation* reservation_of(std::uintptr_t p, std::size_t bytes) {
  auto it = D().reservations.upper_bound(p);
  if (it == D().reservations.begin()) return nullptr;
  --it;
  return p + bytes <= it->first + it->second.bytes ? &it->second : nullptr;
}

bool overlaps_a_mapping(std::uintptr_t p, std::size_t bytes) {
  for (auto& [b, m] : D().mappings)
    if (p < b + m.bytes && b < p + bytes) return true;
  return false;
}

constexpr std::uint64_t chunk_magic = 0x4d454d56454b4146ull;  // "FAKEVMEM"
constexpr std::size_t header_bytes = 4096;

// The header page of a shareable chunk's memfd.
struct ChunkHeader {
  std::uint64_t magic;
  std::uint64_t bytes;
  std::int32_t device;
};

// A memfd for a shareable chunk of `bytes` on `device`, its bytes poisoned (new memory is
// not zero); -1 when the host has no room.
int create_shared_chunk(std::size_t bytes, int device) {
  int fd = ::memfd_create("fake-vmm-chunk", MFD_CLOEXEC);
  if (fd < 0) return -1;
  ChunkHeader h{chunk_magic, bytes, device};
  void* data = MAP_FAILED;
  if (::ftruncate(fd, static_cast<off_t>(header_bytes + bytes)) == 0 &&
      ::pwrite(fd, &h, sizeof h, 0) == static_cast<ssize_t>(sizeof h))
    data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(header_bytes));
  if (data == MAP_FAILED) {
    ::close(fd);
    return -1;
  }
  std::memset(data, 0xA5, bytes);
  ::munmap(data, bytes);
  return fd;
}

// Gives addresses a mapping used back to their reservation: inaccessible, and for a
// shareable chunk no longer its memory.
void restore_reservation_pages(std::uintptr_t b, std::size_t bytes, bool shared) {
  if (shared)
    ::mmap(reinterpret_cast<void*>(b), bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  else
    ::mprotect(reinterpret_cast<void*>(b), bytes, PROT_NONE);
}

bool valid_properties(const CUmemAllocationProp* prop) {
  return prop != nullptr && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED &&
         prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE && valid_device(prop->location.id);
}

CUresult MemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                     CUmemAllocationGranularity_flags option) {
  std::lock_guard l(D().mutex);
  if (!granularity || !valid_properties(prop)) return CUDA_ERROR_INVALID_VALUE;
  if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
    return CUDA_ERROR_INVALID_VALUE;
  *granularity = D().vmm_granularity;
  return CUDA_SUCCESS;
}

CUresult MemAddressReserve(CUdeviceptr* out, size_t bytes, size_t alignment, CUdeviceptr addr, unsigned long long flags) {
  std::lock_guard l(D().mutex);
  if (!out || bytes == 0 || !multiple(bytes) || flags != 0 || addr != 0) return CUDA_ERROR_INVALID_VALUE;
  if (alignment != 0 && (alignment & (alignment - 1)) != 0) return CUDA_ERROR_INVALID_VALUE;
  std::size_t align = std::max(alignment, D().vmm_granularity);
  std::size_t host_bytes = bytes + align;
  void* host = ::mmap(nullptr, host_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (host == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  auto h = reinterpret_cast<std::uintptr_t>(host);
  std::uintptr_t base = (h + align - 1) / align * align;
  D().reservations[base] = Reservation{bytes, host_bytes, host};
  D().created("address reservation", reinterpret_cast<void*>(base));
  *out = static_cast<CUdeviceptr>(base);
  return CUDA_SUCCESS;
}

CUresult MemAddressFree(CUdeviceptr p, size_t bytes) {
  std::lock_guard l(D().mutex);
  auto base = static_cast<std::uintptr_t>(p);
  auto it = D().reservations.find(base);
  if (it == D().reservations.end() || it->second.bytes != bytes) {
    D().problems.push_back("cuMemAddressFree of a range that is not one whole reservation");
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (overlaps_a_mapping(base, bytes)) {
    D().problems.push_back("cuMemAddressFree of a reservation that still has mappings (unmap them first)");
    return CUDA_ERROR_INVALID_VALUE;
  }
  ::munmap(it->second.host_base, it->second.host_bytes);
  D().reservations.erase(it);
  D().destroyed("address reservation", reinterpret_cast<void*>(base));
  return CUDA_SUCCESS;
}

CUresult MemCreate(CUmemGenericAllocationHandle* handle, size_t bytes, const CUmemAllocationProp* prop,
                   unsigned long long flags) {
  std::lock_guard l(D().mutex);
  if (!handle || bytes == 0 || !multiple(bytes) || flags != 0 || !valid_properties(prop)) return CUDA_ERROR_INVALID_VALUE;
  const CUmemAllocationHandleType shareable = prop->requestedHandleTypes;
  if (shareable != CU_MEM_HANDLE_TYPE_NONE && shareable != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    return CUDA_ERROR_NOT_SUPPORTED;
  int device = prop->location.id;
  if (D().device_memory_used(device) + bytes > D().devices[device].total_memory) return CUDA_ERROR_OUT_OF_MEMORY;
  int fd = -1;
  if (shareable == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR && (fd = create_shared_chunk(bytes, device)) < 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  CUmemGenericAllocationHandle h = D().next_physical_handle++;
  D().physical[h] = PhysicalChunk{bytes, device, 0, false, shareable, fd, false};
  D().created("physical memory", reinterpret_cast<void*>(h));
  *handle = h;
  return CUDA_SUCCESS;
}

void forget_chunk_if_done(CUmemGenericAllocationHandle h) {
  auto it = D().physical.find(h);
  if (it == D().physical.end() || !it->second.released || it->second.mappings != 0) return;
  if (it->second.fd >= 0) ::close(it->second.fd);
  D().physical.erase(it);
}

CUresult MemRelease(CUmemGenericAllocationHandle h) {
  std::lock_guard l(D().mutex);
  auto it = D().physical.find(h);
  if (it == D().physical.end() || it->second.released) return CUDA_ERROR_INVALID_VALUE;
  it->second.released = true;
  D().destroyed("physical memory", reinterpret_cast<void*>(h));
  forget_chunk_if_done(h);
  return CUDA_SUCCESS;
}

CUresult MemExportToShareableHandle(void* out, CUmemGenericAllocationHandle h, CUmemAllocationHandleType type,
                                    unsigned long long flags) {
  std::lock_guard l(D().mutex);
  auto c = D().physical.find(h);
  if (!out || flags != 0 || c == D().physical.end() || c->second.released) return CUDA_ERROR_INVALID_VALUE;
  // The driver's rule: only a chunk made with this requested handle type exports it.
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || c->second.fd < 0) return CUDA_ERROR_INVALID_VALUE;
  int fd = ::fcntl(c->second.fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  *static_cast<int*>(out) = fd;
  return CUDA_SUCCESS;
}

CUresult MemImportFromShareableHandle(CUmemGenericAllocationHandle* out, void* os_handle,
                                      CUmemAllocationHandleType type) {
  std::lock_guard l(D().mutex);
  if (!out || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
  int from = static_cast<int>(reinterpret_cast<std::intptr_t>(os_handle));
  ChunkHeader h{};
  if (from < 0 || ::pread(from, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h) || h.magic != chunk_magic ||
      !valid_device(h.device))
    return CUDA_ERROR_INVALID_VALUE;
  int fd = ::fcntl(from, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  CUmemGenericAllocationHandle handle = D().next_physical_handle++;
  D().physical[handle] =
      PhysicalChunk{static_cast<std::size_t>(h.bytes), h.device, 0, false, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, fd, true};
  D().created("physical memory", reinterpret_cast<void*>(handle));
  *out = handle;
  return CUDA_SUCCESS;
}

CUresult MemMap(CUdeviceptr p, size_t bytes, size_t offset, CUmemGenericAllocationHandle h, unsigned long long flags) {
  std::lock_guard l(D().mutex);
  auto base = static_cast<std::uintptr_t>(p);
  if (bytes == 0 || flags != 0 || !multiple(base) || !multiple(bytes) || !multiple(offset)) return CUDA_ERROR_INVALID_VALUE;
  auto c = D().physical.find(h);
  if (c == D().physical.end() || c->second.released) return CUDA_ERROR_INVALID_HANDLE;
  if (offset + bytes > c->second.bytes) return CUDA_ERROR_INVALID_VALUE;
  if (reservation_of(base, bytes) == nullptr) {
    D().problems.push_back("cuMemMap outside a reservation");
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (overlaps_a_mapping(base, bytes)) return CUDA_ERROR_INVALID_VALUE;
  // A shareable chunk's memory is its memfd's, so every mapping of it (in any process)
  // sees the same bytes; inaccessible until cuMemSetAccess, like the reservation's pages.
  if (int fd = c->second.fd; fd >= 0 && ::mmap(reinterpret_cast<void*>(base), bytes, PROT_NONE, MAP_SHARED | MAP_FIXED, fd,
                                               static_cast<off_t>(header_bytes + offset)) == MAP_FAILED)
    return CUDA_ERROR_OUT_OF_MEMORY;
  D().mappings[base] = Mapping{bytes, h, false, {}};
  ++c->second.mappings;
  return CUDA_SUCCESS;
}

// The mappings that cover [p, p + bytes) exactly, in order; empty when they do not.
std::vector<std::uintptr_t> mappings_covering(std::uintptr_t p, std::size_t bytes) {
  std::vector<std::uintptr_t> found;
  std::uintptr_t at = p;
  while (at < p + bytes) {
    auto it = D().mappings.find(at);
    if (it == D().mappings.end()) return {};
    found.push_back(at);
    at += it->second.bytes;
  }
  if (at != p + bytes) return {};
  return found;
}

CUresult MemSetAccess(CUdeviceptr p, size_t bytes, const CUmemAccessDesc* desc, size_t count) {
  std::lock_guard l(D().mutex);
  auto base = static_cast<std::uintptr_t>(p);
  if (!desc || count == 0 || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i)
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || !valid_device(desc[i].location.id) ||
        desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
      return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::uintptr_t> covered = mappings_covering(base, bytes);
  if (covered.empty()) return CUDA_ERROR_INVALID_VALUE;  // not mapped, or not whole mappings
  for (std::uintptr_t b : covered) {
    Mapping& m = D().mappings[b];
    for (size_t i = 0; i < count; ++i) {
      int d = desc[i].location.id;
      int owner = D().physical[m.handle].device;
      // Another device reaches this memory only where the hardware lets it (peer access).
      if (d != owner && !D().peer_access.count({d, owner})) return CUDA_ERROR_INVALID_DEVICE;
      m.devices.insert(d);
    }
    if (m.accessible) continue;
    m.accessible = true;
    ::mprotect(reinterpret_cast<void*>(b), m.bytes, PROT_READ | PROT_WRITE);
    // Poison: new memory is not zero. A shareable chunk was poisoned when it was made, and
    // its bytes are what its exporter wrote.
    if (D().physical[m.handle].fd < 0) std::memset(reinterpret_cast<void*>(b), 0xA5, m.bytes);
    Allocation a;
    a.bytes = m.bytes;
    a.device = D().physical[m.handle].device;
    a.mapped = true;
    D().allocations[b] = a;
    D().forget_freed(b, m.bytes);
  }
  return CUDA_SUCCESS;
}

CUresult MemUnmap(CUdeviceptr p, size_t bytes) {
  std::lock_guard l(D().mutex);
  auto base = static_cast<std::uintptr_t>(p);
  if (bytes == 0 || !multiple(base) || !multiple(bytes)) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::uintptr_t> covered = mappings_covering(base, bytes);
  if (covered.empty()) return CUDA_ERROR_INVALID_VALUE;
  for (std::uintptr_t b : covered) {
    Mapping m = D().mappings[b];
    if (m.accessible) {
      // Like a free: the host must know that every access to the range completed.
      D().access(nullptr, b, m.bytes, true, "cuMemUnmap");
      auto& acc = D().accesses;
      acc.erase(std::remove_if(acc.begin(), acc.end(), [&](const Access& a) { return a.begin >= b && a.end <= b + m.bytes; }),
                acc.end());
      D().allocations.erase(b);
      D().freed[b] = m.bytes;
    }
    restore_reservation_pages(b, m.bytes, D().physical[m.handle].fd >= 0);
    D().mappings.erase(b);
    --D().physical[m.handle].mappings;
    forget_chunk_if_done(m.handle);
  }
  return CUDA_SUCCESS;
}

}  // namespace

void register_virtual_memory(Driver& d) {
  using E = EntryId;
  d.implement<E::MemGetAllocationGranularity>(&MemGetAllocationGranularity);
  d.implement<E::MemAddressReserve>(&MemAddressReserve);
  d.implement<E::MemAddressFree>(&MemAddressFree);
  d.implement<E::MemCreate>(&MemCreate);
  d.implement<E::MemRelease>(&MemRelease);
  d.implement<E::MemMap>(&MemMap);
  d.implement<E::MemUnmap>(&MemUnmap);
  d.implement<E::MemSetAccess>(&MemSetAccess);
  d.implement<E::MemExportToShareableHandle>(&MemExportToShareableHandle);
  d.implement<E::MemImportFromShareableHandle>(&MemImportFromShareableHandle);
}

}  // namespace cudakit::fake
