// The default memory pool's settings against the fake driver.
#include <gtest/gtest.h>

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
