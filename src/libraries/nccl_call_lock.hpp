// Internal: the lock every NCCL call on one communicator holds (Note [NCCL calls and the
// watchdog] in nccl_comm_state.hpp).
//
// Recursive, because a group holds the locks of its communicators across its calls. A
// one-rank collective costs a few microseconds of host time in NCCL, which evicts the lock's
// code from the CPU's caches between calls: std::recursive_mutex makes two calls into the C
// library, each cold (its lock alone measured about 40 ns on an H200's host), about a
// percent of the call. This lock is inline and uncontended in the common case: a
// compare-and-swap to take it, an exchange to give it back, no call into the C library
// (the holder is named by the address of a thread-local byte, not by pthread_self). A second
// thread (the watchdog's try_lock, or a user's call from another thread) sleeps on a futex
// (std::atomic::wait) and is woken only when it marked the lock contended.
#pragma once

#include <atomic>

namespace cudakit::nccl::detail {

class CallLock {
 public:
  CallLock() = default;
  CallLock(const CallLock&) = delete;
  CallLock& operator=(const CallLock&) = delete;

  void lock() noexcept {
    const void* const me = this_thread();
    if (holds(me)) [[unlikely]] {
      ++depth_;
      return;
    }
    int expected = free;
    if (!state_.compare_exchange_strong(expected, held, std::memory_order_acquire, std::memory_order_relaxed))
      [[unlikely]]
      wait_until_taken();
    take(me);
  }

  bool try_lock() noexcept {
    const void* const me = this_thread();
    if (holds(me)) {
      ++depth_;
      return true;
    }
    int expected = free;
    if (!state_.compare_exchange_strong(expected, held, std::memory_order_acquire, std::memory_order_relaxed))
      return false;
    take(me);
    return true;
  }

  void unlock() noexcept {
    if (--depth_ != 0) [[unlikely]]
      return;
    owner_.store(nullptr, std::memory_order_relaxed);
    if (state_.exchange(free, std::memory_order_release) == held_with_waiters) [[unlikely]]
      state_.notify_one();
  }

 private:
  static constexpr int free = 0, held = 1, held_with_waiters = 2;

  // A name for the calling thread that costs one thread-pointer read: the address of a
  // byte each thread has its own copy of. Two live threads never share it.
  static const void* this_thread() noexcept {
    static thread_local constinit char tag = 0;
    return &tag;
  }
  // Only the holder can read its own name here: no other thread stores it, and the holder
  // clears it before giving the lock back.
  bool holds(const void* me) const noexcept { return owner_.load(std::memory_order_relaxed) == me; }
  void take(const void* me) noexcept {
    owner_.store(me, std::memory_order_relaxed);
    depth_ = 1;
  }
  // Marks the lock contended, so that its holder wakes a sleeper when it gives it back, and
  // sleeps until the lock is taken (marked contended again: other sleepers may remain).
  void wait_until_taken() noexcept {
    while (state_.exchange(held_with_waiters, std::memory_order_acquire) != free)
      state_.wait(held_with_waiters, std::memory_order_relaxed);
  }

  std::atomic<int> state_{free};
  std::atomic<const void*> owner_{nullptr};
  int depth_ = 0;  // the holder's count of lock() calls not yet undone
};

}  // namespace cudakit::nccl::detail
