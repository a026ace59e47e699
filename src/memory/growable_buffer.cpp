// GrowableBuffer's reservation and chunks (growable_buffer.hpp, virtual_range.hpp).
#include "cudakit/growable_buffer.hpp"

#include <algorithm>
#include <memory>
#include <string>

#include "cudakit/context.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "cudakit/peer_access.hpp"
#include "device/capture_tolerant_scope.hpp"
#include "device/device_state.hpp"
#include "memory/virtual_memory.hpp"
#include "memory/virtual_range.hpp"
#include "stream/deferred.hpp"

namespace cudakit::detail {

using driver::cu;

namespace {

Resource range_resource(const Allocation* a) {
  return Resource::of(ResourceKind::buffer, reinterpret_cast<const void*>(a->pointer), a->device);
}

// The devices besides the owner that get access to a new chunk: those the buffer was
// opened to, and every device whose peer access to the owner is enabled.
std::vector<int> peers_of(const VirtualRange& r, int device) {
  std::vector<int> peers = r.peers;
  int count = Device::count();
  for (int p = 0; p < count; ++p)
    if (p != device && peer_access_enabled(p, device) && std::find(peers.begin(), peers.end(), p) == peers.end())
      peers.push_back(p);
  return peers;
}

void make_library_context_current(int device) { ContextRef(library_context(device), device).make_current(); }

// Chunks a shrink takes off go to the front of the retired ones: they come right before them.
void retire(VirtualRange& r, std::vector<VirtualChunk>::iterator from) {
  for (auto it = from; it != r.chunks.end(); ++it) r.mapped -= it->bytes;
  r.retired.insert(r.retired.begin(), from, r.chunks.end());
  r.chunks.erase(from, r.chunks.end());
}

// Unmaps and releases `chunk`. When the unmap fails the chunk is still mapped and stays
// the range's, and the error is thrown. A failed release is parked
// (the driver refused to take the memory back: a leak that is not cudakit's to mend), as
// a destructor's release would be.
void give_back(const VirtualChunk& chunk, const Resource& res) {
  if (CUresult u = cu.MemUnmap(chunk.address, chunk.bytes); u != CUDA_SUCCESS) check(u, cu.MemUnmap.name(), res);
  if (CUresult rel = cu.MemRelease(chunk.handle); rel != CUDA_SUCCESS)
    park_driver_error(rel, cu.MemRelease.name(), res, "growable buffer shrink");
}

}  // namespace

void throw_moved_from_growable_buffer() {
  throw EmptyHandle("use of a moved-from GrowableBuffer: its reservation went to the buffer it was moved to");
}

void throw_beyond_reservation(const char* operation, std::size_t count, std::size_t max_count, std::size_t element_bytes) {
  throw InvalidArgument(std::string(operation) + "(" + std::to_string(count) + ") asks for " +
                        std::to_string(count * element_bytes) + " bytes, past the buffer's reservation of " +
                        std::to_string(max_count) + " elements (" + std::to_string(max_count * element_bytes) +
                        " bytes); reserve more when the buffer is made (addresses cost no memory)");
}

Ref<Allocation> reserve_virtual_range(int device, std::size_t max_bytes) {
  Device owner = Device::get(device);
  run_deferred_tasks_if_any();
  const char* call = cu.MemAddressReserve.name();
  check_not_poisoned(call, Resource::of_device(device));
  driver::require(driver::EntryId::MemCreate, "GrowableBuffer (virtual memory management)");
  if (!vmm::supported(device))
    throw FeatureUnavailable(cu.MemCreate.name(), driver::entry_info(driver::EntryId::MemCreate).introduced_in,
                             driver::version(),
                             "GrowableBuffer: device " + std::to_string(device) + " (" + owner.name() +
                                 ") does not support virtual memory management "
                                 "(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 0); use a DeviceBuffer");
  CaptureTolerantScope tolerant(device);  // nothing here is stream-ordered: safe beside a capture
  make_library_context_current(device);
  auto range = std::make_unique<VirtualRange>();
  range->granularity = vmm::granularity(device);
  range->reserved = vmm::round_up(max_bytes, range->granularity);
  range->base = vmm::reserve(device, range->reserved, range->granularity);
  Ref<Allocation> a;
  try {
    a = Allocation::create(range->base, range->reserved, device, AllocationKind::virtual_range, StreamRef{});
  } catch (...) {
    (void)vmm::free_reservation(range->base, range->reserved);
    throw;
  }
  a->virtual_range = range.release();
  return a;
}

std::size_t virtual_range_mapped(const Allocation* a) noexcept { return a ? a->virtual_range->mapped : 0; }
std::size_t virtual_range_reserved(const Allocation* a) noexcept { return a ? a->virtual_range->reserved : 0; }
std::size_t virtual_range_granularity(const Allocation* a) noexcept { return a ? a->virtual_range->granularity : 0; }

void map_virtual_range(Allocation* a, std::size_t bytes) {
  if (a == nullptr) return;
  VirtualRange& r = *a->virtual_range;
  if (bytes <= r.mapped) return;
  check_not_poisoned(cu.MemMap.name(), range_resource(a));
  CaptureTolerantScope tolerant(a->device);
  make_library_context_current(a->device);
  // Retired chunks hold the addresses right after the chunks in use: take them back first.
  std::size_t adopted = 0;
  while (r.mapped < bytes && adopted < r.retired.size()) r.mapped += r.retired[adopted++].bytes;
  r.chunks.insert(r.chunks.end(), r.retired.begin(), r.retired.begin() + static_cast<std::ptrdiff_t>(adopted));
  r.retired.erase(r.retired.begin(), r.retired.begin() + static_cast<std::ptrdiff_t>(adopted));
  if (r.mapped >= bytes) return;
  try {
    // No retired chunk is left (a growth past them took them all): the end is free.
    std::size_t need = vmm::round_up(bytes - r.mapped, r.granularity);
    CUdeviceptr at = r.base + r.mapped;
    std::vector<int> peers = peers_of(r, a->device);
    r.chunks.reserve(r.chunks.size() + 1);  // the push below cannot fail once memory is mapped
    CUmemGenericAllocationHandle h = vmm::map_new_chunk(a->device, at, need, peers);
    r.chunks.push_back({at, need, h});
    r.mapped += need;
  } catch (...) {
    // The buffer stays as it was: the adopted chunks are retired again.
    retire(r, r.chunks.end() - static_cast<std::ptrdiff_t>(adopted));
    throw;
  }
}

void unmap_virtual_range(Allocation* a, std::size_t bytes) {
  if (a == nullptr) return;
  VirtualRange& r = *a->virtual_range;
  // The chunks wholly past `bytes`: from the first that starts at or after it.
  auto first_past = r.chunks.begin();
  while (first_past != r.chunks.end() && first_past->address - r.base < bytes) ++first_past;
  if (first_past == r.chunks.end() && r.retired.empty()) return;
  // A graph, a capture or a pending release may still touch them; unmapping under a
  // capture in global mode would invalidate it. Kept mapped, given back later.
  if (!a->held_by_owner_alone() || unsafe_calls_would_invalidate_a_capture()) {
    retire(r, first_past);
    return;
  }
  check_not_poisoned(cu.MemUnmap.name(), range_resource(a));
  CaptureTolerantScope tolerant(a->device);
  a->synchronize_users();  // no stream may still use what goes (throws, changing nothing)
  make_library_context_current(a->device);
  retire(r, first_past);
  // Last chunk first, so that what remains is always contiguous.
  while (!r.retired.empty()) {
    give_back(r.retired.back(), range_resource(a));  // throws when the unmap failed: the chunk stays retired
    r.retired.pop_back();
  }
}

void allow_virtual_range_access(Allocation* a, int peer) {
  if (a == nullptr) return;
  if (peer == a->device) return;
  if (!peer_access_enabled(peer, a->device))
    throw InvalidArgument("GrowableBuffer::allow_access_from(device " + std::to_string(peer) +
                          "): peer access from device " + std::to_string(peer) + " to device " +
                          std::to_string(a->device) + " is not enabled (call enable_peer_access first)");
  VirtualRange& r = *a->virtual_range;
  if (std::find(r.peers.begin(), r.peers.end(), peer) != r.peers.end()) return;
  CaptureTolerantScope tolerant(a->device);
  make_library_context_current(a->device);
  const int devices[] = {a->device, peer};
  for (const VirtualChunk& c : r.chunks) vmm::grant_access(c.address, c.bytes, devices, a->device);
  for (const VirtualChunk& c : r.retired) vmm::grant_access(c.address, c.bytes, devices, a->device);
  r.peers.push_back(peer);
}

// The destructor's path. A chunk whose unmap fails is tried once more: while anything is
// mapped in it, the reservation cannot be given back. Each failure is parked; on a dead
// context (DESIGN 7) the reservation's release is tried all the same.
void release_virtual_range(VirtualRange* range, int device) noexcept {
  std::unique_ptr<VirtualRange> r(range);
  const Resource res = Resource::of(ResourceKind::buffer, reinterpret_cast<const void*>(r->base), device);
  const char* origin = "growable buffer free";
  try {
    make_library_context_current(device);
  } catch (...) {
    // On a dead context the calls below fail with its error, parked; nothing else can be done.
  }
  bool all_unmapped = true;
  auto teardown = [&](std::vector<VirtualChunk>& chunks) {
    for (auto c = chunks.rbegin(); c != chunks.rend(); ++c) {
      CUresult u = cu.MemUnmap(c->address, c->bytes);
      if (u != CUDA_SUCCESS) {
        park_driver_error(u, cu.MemUnmap.name(), res, origin);
        u = cu.MemUnmap(c->address, c->bytes);
      }
      all_unmapped = all_unmapped && u == CUDA_SUCCESS;
      if (CUresult rel = cu.MemRelease(c->handle); rel != CUDA_SUCCESS) park_driver_error(rel, cu.MemRelease.name(), res, origin);
    }
    chunks.clear();
  };
  teardown(r->retired);
  teardown(r->chunks);
  if (!all_unmapped && poison_of(device) == nullptr) {
    park_error({CUDA_SUCCESS, origin,
                "the address range at " + describe(res) + " is kept (a leak): a chunk in it could not be unmapped"});
    return;
  }
  if (CUresult c = vmm::free_reservation(r->base, r->reserved); c != CUDA_SUCCESS)
    park_driver_error(c, cu.MemAddressFree.name(), res, origin);
}

}  // namespace cudakit::detail
