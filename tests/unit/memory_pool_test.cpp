// The default memory pool's settings against the fake driver.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "memory_fixture.hpp"

namespace cudakit {
namespace {

using driver::EntryId;

class MemoryPoolTest : public testing::MemoryTest {};

TEST_F(MemoryPoolTest, FirstPoolAllocationKeepsFreedMemoryInThePoolOncePerDevice) {
  Stream s(dev());
  EXPECT_EQ(fake().pools[0].release_threshold, 0u) << "the driver's default";
  for (int i = 0; i < 10; ++i) DeviceBuffer<float> b(s, 100, uninitialized);
  EXPECT_EQ(fake().pools[0].release_threshold, keep_all_pool_memory);
  EXPECT_EQ(calls(EntryId::MemPoolSetAttribute), 1);
  EXPECT_EQ(calls(EntryId::MemPoolGetAttribute), 1);
  EXPECT_EQ(calls(EntryId::DeviceGetDefaultMemPool), 1);
  EXPECT_EQ(default_memory_pool(dev()).release_threshold(), keep_all_pool_memory);
}

TEST_F(MemoryPoolTest, PlainAllocationsLeaveThePoolAlone) {
  Stream s(dev());
  DeviceBuffer<float> b(s, 100, uninitialized, Allocator::plain);
  EXPECT_EQ(calls(EntryId::MemPoolSetAttribute), 0);
}

TEST_F(MemoryPoolTest, AThresholdTheUserChoseIsKept) {
  MemoryPoolRef pool = default_memory_pool(dev());
  pool.set_release_threshold(0);  // "give memory back at every synchronize", on purpose
  Stream s(dev());
  DeviceBuffer<float> b(s, 100, uninitialized);
  EXPECT_EQ(pool.release_threshold(), 0u);
  EXPECT_EQ(calls(EntryId::MemPoolSetAttribute), 1) << "only the user's";
}

TEST_F(MemoryPoolTest, AThresholdSetOutsideCudakitIsKept) {
  fake().pools[0].release_threshold = 64 << 20;  // the runtime, PyTorch, ... chose 64 MiB
  Stream s(dev());
  DeviceBuffer<float> b(s, 100, uninitialized);
  EXPECT_EQ(default_memory_pool(dev()).release_threshold(), std::uint64_t(64) << 20);
  EXPECT_EQ(calls(EntryId::MemPoolSetAttribute), 0);
}

TEST_F(MemoryPoolTest, UsageAndTrim) {
  Stream s(dev());
  MemoryPoolRef pool = default_memory_pool(dev());
  EXPECT_EQ(pool.device_ordinal(), 0);
  EXPECT_TRUE(pool);
  {
    DeviceBuffer<char> a(s, 1000, uninitialized), b(s, 3000, uninitialized);
    PoolUsage u = pool.usage();
    EXPECT_EQ(u.used_bytes, 4000u);
    EXPECT_EQ(u.reserved_bytes, 4000u);
    EXPECT_EQ(u.used_high_bytes, 4000u);
  }
  s.synchronize();
  EXPECT_EQ(pool.used_bytes(), 0u);
  EXPECT_EQ(pool.reserved_bytes(), 4000u) << "freed memory stays in the pool";
  pool.trim_to(1000);
  EXPECT_EQ(pool.reserved_bytes(), 1000u);
  pool.trim_to(0);
  EXPECT_EQ(pool.reserved_bytes(), 0u);
  EXPECT_EQ(pool.usage().used_high_bytes, 4000u);
  pool.reset_peaks();
  EXPECT_EQ(pool.usage().used_high_bytes, 0u);
  EXPECT_EQ(pool.usage().reserved_high_bytes, 0u);
}

TEST_F(MemoryPoolTest, EmptyRefThrowsEmptyHandle) {
  MemoryPoolRef none;
  EXPECT_THROW(none.release_threshold(), EmptyHandle);
  EXPECT_THROW(none.trim_to(0), EmptyHandle);
}

TEST_F(MemoryPoolTest, AFailedConfigurationFailsTheAllocationAndIsTriedAgain) {
  Stream s(dev());
  fake().fail(EntryId::MemPoolGetAttribute, 1, CUDA_ERROR_INVALID_VALUE);
  EXPECT_THROW(DeviceBuffer<float>(s, 10, uninitialized), DriverError);
  EXPECT_EQ(fake().live("device memory"), 0u);
  DeviceBuffer<float> b(s, 10, uninitialized);
  EXPECT_EQ(fake().pools[0].release_threshold, keep_all_pool_memory);
}


// ---- statistics: the driver's bytes and cudakit's count of allocations ----

TEST_F(MemoryPoolTest, UsageCountsCudakitsLiveAndMadeAllocations) {
  Stream s(dev());
  MemoryPoolRef pool = default_memory_pool(dev());
  EXPECT_EQ(pool.usage().live_allocations, 0u);
  {
    DeviceBuffer<char> a(s, 1000, uninitialized), b(s, 3000, uninitialized), c(s, 5, zeroed);
    DeviceBuffer<char> plain(s, 100, uninitialized, Allocator::plain);  // not from the pool
    PoolUsage u = pool.usage();
    EXPECT_EQ(u.live_allocations, 3u);
    EXPECT_EQ(u.allocations_made, 3u);
    EXPECT_EQ(u.used_bytes, 4005u);
    b.reset();
    u = pool.usage();
    EXPECT_EQ(u.live_allocations, 2u);
    EXPECT_EQ(u.allocations_made, 3u);
  }
  PoolUsage u = pool.usage();
  EXPECT_EQ(u.live_allocations, 0u);
  EXPECT_EQ(u.allocations_made, 3u);
  EXPECT_EQ(u.used_high_bytes, 4005u) << "the high-water mark";
}

TEST_F(MemoryPoolTest, CountsFromManyThreadsAddUp) {
  constexpr int threads = 8, per_thread = 200;
  std::array<std::vector<DeviceBuffer<int>>, threads> keep;  // outlive their threads' streams
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      Stream s(dev());
      std::vector<DeviceBuffer<int>> kept;
      for (int i = 0; i < per_thread; ++i) {
        DeviceBuffer<int> b(s, 16 + t, uninitialized);
        if (i % 4 == 0) kept.push_back(std::move(b));
      }
      s.synchronize();
      kept.erase(kept.begin(), kept.begin() + per_thread / 8);  // keep 25 per thread past the join
      keep[t] = std::move(kept);
    });
  for (auto& w : workers) w.join();
  PoolUsage u = default_memory_pool(dev()).usage();
  EXPECT_EQ(u.allocations_made, std::uint64_t(threads) * per_thread);
  EXPECT_EQ(u.live_allocations, std::uint64_t(threads) * (per_thread / 4 - per_thread / 8));
  for (auto& k : keep) k.clear();
  EXPECT_EQ(default_memory_pool(dev()).usage().live_allocations, 0u);
}

TEST_F(MemoryPoolTest, CountsFromMoreThreadsAtOnceThanCounterSlotsAndFromLaterThreadsAddUp) {
  // 24 threads alive at once: 16 own a counter slot, the others share one. Then a second
  // wave, which takes the slots the first wave's threads gave back at their end.
  constexpr int threads = 24, per_thread = 50;
  for (int wave = 0; wave < 2; ++wave) {
    std::latch all_alive(threads);
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&] {
        Stream s(dev());
        all_alive.arrive_and_wait();
        for (int i = 0; i < per_thread; ++i) DeviceBuffer<int> b(s, 16, uninitialized);
        s.synchronize();
      });
    for (auto& w : workers) w.join();
  }
  PoolUsage u = default_memory_pool(dev()).usage();
  EXPECT_EQ(u.allocations_made, std::uint64_t(2 * threads * per_thread));
  EXPECT_EQ(u.live_allocations, 0u);
}

// ---- out of memory: trim the pool, try once more, then a message with the numbers ----

TEST_F(MemoryPoolTest, AnAllocationThatRunsOutOfMemoryOnceTrimsThePoolAndSucceeds) {
  Stream s(dev());
  MemoryPoolRef pool = default_memory_pool(dev());
  { DeviceBuffer<char> cached(s, 8000, uninitialized); }  // freed into the pool's reserve
  s.synchronize();
  ASSERT_EQ(pool.reserved_bytes(), 8000u);
  fake().clear_log();
  fake().fail(EntryId::MemAllocAsync, 1, CUDA_ERROR_OUT_OF_MEMORY);
  std::vector<int> host(500);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<int>(i * 2654435761u);
  DeviceBuffer<int> b(s, host.size(), uninitialized);
  copy(s, host, b);
  EXPECT_EQ(download(s, b), host);
  std::vector<EntryId> log = fake().log();
  auto at = [&](EntryId e) { return std::find(log.begin(), log.end(), e) - log.begin(); };
  EXPECT_EQ(calls(EntryId::MemAllocAsync), 2) << "tried once more";
  EXPECT_EQ(calls(EntryId::MemPoolTrimTo), 1);
  EXPECT_LT(at(EntryId::MemPoolTrimTo), static_cast<long>(log.size()));
  EXPECT_EQ(pool.usage().allocations_made, 2u) << "the failed try is not counted";
  EXPECT_EQ(pool.reserved_bytes(), 2000u) << "the unused reserve went back; the new buffer reserves its own";
}

TEST_F(MemoryPoolTest, AnAllocationThatRunsOutOfMemoryTwiceNamesTheBytesTheReserveAndTheFreeMemory) {
  Stream s(dev());
  DeviceBuffer<char> live(s, 3000, uninitialized);  // the pool's reserve that cannot go back
  { DeviceBuffer<char> cached(s, 5000, uninitialized); }
  s.synchronize();
  fake().fail(EntryId::MemAllocAsync, 0, CUDA_ERROR_OUT_OF_MEMORY);
  try {
    DeviceBuffer<char> b(s, 123456, uninitialized);
    FAIL() << "allocated";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.requested(), 123456u);
    EXPECT_EQ(e.pool_reserved_bytes(), 3000u);
    EXPECT_EQ(e.total_bytes(), std::size_t(16) << 30);
    EXPECT_GT(e.free_bytes(), 0u);
    std::string m = e.what();
    EXPECT_NE(m.find("asked for 123456 bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("free of 16.00 GiB"), std::string::npos) << m;
    EXPECT_NE(m.find("the memory pool released its unused memory and still reserves 3000 bytes"), std::string::npos)
        << m;
  }
  fake().clear_faults();
  EXPECT_EQ(calls(EntryId::MemAllocAsync), 4) << "the two buffers, then the failed one twice";
  EXPECT_EQ(calls(EntryId::MemPoolTrimTo), 1);
  EXPECT_EQ(fake().pools[0].reserved, 3000u);
  EXPECT_EQ(default_memory_pool(dev()).usage().live_allocations, 1u);
}

TEST_F(MemoryPoolTest, APlainAllocationOutOfMemoryNamesNoPool) {
  Stream s(dev());
  fake().fail(EntryId::MemAlloc, 0, CUDA_ERROR_OUT_OF_MEMORY);
  try {
    DeviceBuffer<char> b(s, 4096, uninitialized, Allocator::plain);
    FAIL() << "allocated";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.pool_reserved_bytes(), OutOfMemory::no_pool);
    EXPECT_EQ(std::string(e.what()).find("pool"), std::string::npos) << e.what();
  }
  fake().clear_faults();
}

class TwoDevicePoolTest : public testing::MemoryTest {
 protected:
  void configure(fake::Driver& d) override { d.devices.resize(2); }
};

TEST_F(TwoDevicePoolTest, EachDeviceHasItsOwnDefaultPoolConfiguredOnce) {
  Stream s0(dev(0)), s1(dev(1));
  DeviceBuffer<float> a(s0, 10, uninitialized), b(s1, 10, uninitialized), c(s1, 10, uninitialized);
  EXPECT_NE(default_memory_pool(dev(0)), default_memory_pool(dev(1)));
  EXPECT_EQ(fake().pools[0].release_threshold, keep_all_pool_memory);
  EXPECT_EQ(fake().pools[1].release_threshold, keep_all_pool_memory);
  EXPECT_EQ(calls(EntryId::MemPoolSetAttribute), 2);
}

}  // namespace
}  // namespace cudakit
