// CallLock (libraries/nccl_call_lock.hpp): the recursive lock every NCCL call on a
// communicator holds. Recursion on one thread, exclusion between threads, try_lock's refusal
// while another thread holds it, and a sleeper woken when the holder gives it back.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "libraries/nccl_call_lock.hpp"

namespace cudakit::nccl::detail {
namespace {

bool another_thread_can_take(CallLock& lock) {
  bool took = false;
  std::thread([&] {
    took = lock.try_lock();
    if (took) lock.unlock();
  }).join();
  return took;
}

TEST(CallLockTest, TheHolderTakesItAgainAndOnlyTheLastUnlockGivesItBack) {
  CallLock lock;
  lock.lock();
  lock.lock();
  EXPECT_TRUE(lock.try_lock());
  EXPECT_FALSE(another_thread_can_take(lock));
  lock.unlock();
  lock.unlock();
  EXPECT_FALSE(another_thread_can_take(lock)) << "still held once";
  lock.unlock();
  EXPECT_TRUE(another_thread_can_take(lock));
}

TEST(CallLockTest, AThreadWaitingForTheLockIsWokenWhenTheHolderGivesItBack) {
  CallLock lock;
  lock.lock();
  std::atomic<bool> waiting{false}, took{false};
  std::thread waiter([&] {
    waiting = true;
    std::lock_guard guard(lock);
    took = true;
  });
  while (!waiting) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let it go to sleep on the lock
  EXPECT_FALSE(took) << "the lock was taken while held";
  lock.unlock();
  waiter.join();
  EXPECT_TRUE(took);
  EXPECT_TRUE(another_thread_can_take(lock));
}

TEST(CallLockTest, ThreadsTakingItInTurnNeverOverlap) {
  CallLock lock;
  constexpr int threads = 4, rounds = 20000;
  long long counter = 0;  // plain: the lock alone guards it (TSan checks that too)
  std::atomic<int> inside{0}, overlaps{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (int i = 0; i < rounds; ++i) {
        std::lock_guard outer(lock);
        std::lock_guard inner(lock);  // recursive, as a group's calls are
        if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
        ++counter;
        inside.fetch_sub(1);
      }
    });
  for (auto& t : pool) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(counter, static_cast<long long>(threads) * rounds);
}

}  // namespace
}  // namespace cudakit::nccl::detail
