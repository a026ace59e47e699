// Internal: how many allocations cudakit made from each memory pool, and how many of
// them are live. The driver keeps the pool's bytes (reserved, used, their peaks); the
// count of allocations is cudakit's own.
//
// Counting is on the allocate-and-free hot path of every pool buffer, which threads share:
// each counter is split into cache-line slots. A thread owns one slot while it lives (up
// to `slots` threads at once; a slot freed by a thread's end goes to the next thread), so
// it adds with a plain load and store, no locked instruction; threads beyond that share
// one slot through fetch_add. Threads allocating at once never pass a line between their
// cores. Reading sums the slots (a snapshot: allocations racing with the read may or may
// not be in it).
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>

namespace cudakit::detail {

/// The counts of one pool.
class PoolCounters {
 public:
  void allocated() noexcept { add(&Slot::made); }
  void freed() noexcept { add(&Slot::freed); }
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
  /// The slot this thread owns while it lives (the same index in every pool's counters),
  /// or -1 when every slot is owned.
  static int thread_slot() noexcept;
  void add(std::atomic<std::uint64_t> Slot::*counter) noexcept {
    const int mine = thread_slot();
    if (mine >= 0) [[likely]] {
      std::atomic<std::uint64_t>& c = slots_[mine].*counter;  // written by this thread alone
      c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    } else {
      (slots_[slots].*counter).fetch_add(1, std::memory_order_relaxed);
    }
  }
  Slot slots_[slots + 1];  // the last one: threads without a slot of their own, shared
};

/// The counters of `pool`, made on first use; null only when cudakit counts too many
/// pools already (the counts are then not kept for this one). Valid until the process
/// ends: pools come and go rarely, and a stale counter is only a number.
PoolCounters* pool_counters(CUmemoryPool pool) noexcept;
/// The counters of device `device`'s default pool (the hot path's lookup: one load).
PoolCounters* default_pool_counters(int device) noexcept;

}  // namespace cudakit::detail
