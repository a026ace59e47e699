#include "memory/pool_counters.hpp"

#include <bit>
#include <mutex>
#include <utility>

#include "cudakit/error.hpp"
#include "cudakit/memory_pool.hpp"
#include "device/device_state.hpp"
#include "memory/memory_testing.hpp"

namespace cudakit::detail {

namespace {

constexpr int max_pools = 64;
struct Entry {
  std::atomic<CUmemoryPool> pool{nullptr};
  PoolCounters counters;
};
Entry entries[max_pools];
std::mutex add_mutex;
std::atomic<PoolCounters*> default_counters[max_devices];

// Bit i set: slot i is owned by no thread. Taking a slot (acquire) sees every count its
// previous owner wrote before giving it back (release), so the new owner's plain
// load-and-store continues from them.
std::atomic<std::uint32_t> free_slots{0xFFFFu};

struct ThreadSlot {
  int index = -1;
  ThreadSlot() noexcept {
    std::uint32_t free = free_slots.load(std::memory_order_relaxed);
    while (free != 0 &&
           !free_slots.compare_exchange_weak(free, free & (free - 1), std::memory_order_acquire, std::memory_order_relaxed)) {
    }
    if (free != 0) index = std::countr_zero(free);
  }
  ~ThreadSlot() {
    // A count after this (another thread_local's destructor freeing a buffer) takes the
    // shared slot.
    if (index >= 0) free_slots.fetch_or(1u << std::exchange(index, -1), std::memory_order_release);
  }
  ThreadSlot(const ThreadSlot&) = delete;
  ThreadSlot& operator=(const ThreadSlot&) = delete;
};

}  // namespace

int PoolCounters::thread_slot() noexcept {
  static_assert(slots == 16, "free_slots has one bit per slot");
  thread_local ThreadSlot mine;
  return mine.index;
}

std::uint64_t PoolCounters::made() const noexcept {
  std::uint64_t n = 0;
  for (const Slot& s : slots_) n += s.made.load(std::memory_order_relaxed);
  return n;
}

std::uint64_t PoolCounters::live() const noexcept {
  std::uint64_t made = 0, freed = 0;
  for (const Slot& s : slots_) {
    freed += s.freed.load(std::memory_order_relaxed);
    made += s.made.load(std::memory_order_relaxed);
  }
  return made > freed ? made - freed : 0;  // a free counted before its allocation was read
}

void PoolCounters::reset() noexcept {
  for (Slot& s : slots_) {
    s.made.store(0, std::memory_order_relaxed);
    s.freed.store(0, std::memory_order_relaxed);
  }
}

PoolCounters* pool_counters(CUmemoryPool pool) noexcept {
  if (pool == nullptr) return nullptr;
  for (Entry& e : entries) {
    CUmemoryPool p = e.pool.load(std::memory_order_acquire);
    if (p == pool) return &e.counters;
    if (p == nullptr) break;
  }
  std::lock_guard lock(add_mutex);
  for (Entry& e : entries) {
    CUmemoryPool p = e.pool.load(std::memory_order_relaxed);
    if (p == pool) return &e.counters;
    if (p == nullptr) {
      e.counters.reset();
      e.pool.store(pool, std::memory_order_release);
      return &e.counters;
    }
  }
  return nullptr;
}

PoolCounters* default_pool_counters(int device) noexcept {
  if (device < 0 || device >= max_devices) return nullptr;
  if (PoolCounters* c = default_counters[device].load(std::memory_order_acquire)) [[likely]]
    return c;
  try {
    PoolCounters* c = pool_counters(MemoryPoolRef::device_default(Device::get(device)).handle());
    default_counters[device].store(c, std::memory_order_release);
    return c;
  } catch (...) {
    return nullptr;  // a device without pools: nothing to count
  }
}

void reset_pool_counters_for_testing() {
  std::lock_guard lock(add_mutex);
  for (Entry& e : entries) {
    e.pool.store(nullptr);
    e.counters.reset();
  }
  for (auto& c : default_counters) c.store(nullptr);
}

}  // namespace cudakit::detail
