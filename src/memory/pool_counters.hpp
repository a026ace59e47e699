// Internal: how many allocations cudakit made from each memory pool, and how many of
// them are live. The driver keeps the pool's bytes (reserved, used, their peaks); the
// count of allocations is cudakit's own.
//
// Counting is on the allocate-and-free hot path of every pool buffer, which threads share:
// each counter is split into cache-line slots, a thread adding to its own slot, so that
// threads allocating at once do not pass one line between their cores. Reading sums the
// slots (a snapshot: allocations racing with the read may or may not be in it).
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>

namespace cudakit::detail {

/// The counts of one pool.
class PoolCounters {
 public:
  void allocated() noexcept { slot().made.fetch_add(1, std::memory_order_relaxed); }
  void freed() noexcept { slot().freed.fetch_add(1, std::memory_order_relaxed); }
  /// Allocations made so far, and those not freed yet.
  std::uint64_t made() const noexcept;
  std::uint64_t live() const noexcept;
  void reset() noexcept;

 private:
  static constexpr int slots = 16;
  struct alignas(64) Slot {
    std::atomic<std::uint64_t> made{0};
    std::atomic<std::uint64_t> freed{0};
  };
  Slot& slot() noexcept;
  Slot slots_[slots];
};

/// The counters of `pool`, made on first use; null only when cudakit counts too many
/// pools already (the counts are then not kept for this one). Valid until the process
/// ends: pools come and go rarely, and a stale counter is only a number.
PoolCounters* pool_counters(CUmemoryPool pool) noexcept;
/// The counters of device `device`'s default pool (the hot path's lookup: one load).
PoolCounters* default_pool_counters(int device) noexcept;

}  // namespace cudakit::detail
