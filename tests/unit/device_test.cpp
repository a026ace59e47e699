// Devices and contexts (issue 2, point 5).
#include <gtest/gtest.h>

#include <thread>

#include "cudakit/context.hpp"
#include "cudakit/device.hpp"
#include "fake_fixture.hpp"

namespace cudakit {
namespace {

using driver::EntryId;
using testing::message_of;

class TwoDevices : public testing::FakeDriverTest {
  void configure(fake::Driver& d) override {
    d.devices.resize(2);
    d.devices[1].name = "Second Fake GPU";
    d.devices[1].major = 8;
  }
};

TEST_F(TwoDevices, EnumeratesDevicesWithTheirProperties) {
  ASSERT_EQ(Device::count(), 2);
  auto all = Device::all();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name(), "Fake GPU");
  EXPECT_EQ(all[1].name(), "Second Fake GPU");
  EXPECT_EQ(all[0].compute_capability(), (ComputeCapability{9, 0}));
  EXPECT_EQ(all[0].compute_capability().arch(), "sm_90");
  EXPECT_EQ(all[1].compute_capability().number(), 80);
  EXPECT_EQ(all[0].pci_bus_id(), "0000:19:00.0");
  EXPECT_EQ(all[1].uuid_string(), "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f");
  EXPECT_EQ(all[0].total_memory(), 16ull << 30);
  EXPECT_TRUE(all[0].can_access_peer(all[1]));
}

TEST_F(TwoDevices, OutOfRangeOrdinalNamesTheCount) {
  auto m = message_of<InvalidArgument>([] { Device::get(2); });
  EXPECT_NE(m.find("device ordinal 2 is out of range: this process sees 2 CUDA devices"), std::string::npos) << m;
  EXPECT_THROW(Device::get(-1), InvalidArgument);
}

TEST_F(TwoDevices, AttributesAreCachedAfterTheFirstQuery) {
  Device d = Device::get(0);
  int before = fake().calls(EntryId::DeviceGetAttribute);
  EXPECT_EQ(d.max_threads_per_block(), 1024);
  EXPECT_EQ(d.max_threads_per_block(), 1024);
  EXPECT_EQ(d.max_block_dims(), (std::array<int, 3>{1024, 1024, 64}));
  EXPECT_EQ(d.max_block_dims(), (std::array<int, 3>{1024, 1024, 64}));
  EXPECT_EQ(fake().calls(EntryId::DeviceGetAttribute), before + 1 + 3);
  EXPECT_EQ(d.max_shared_memory_per_block_optin(), 227 * 1024);
}

TEST_F(TwoDevices, MemoryInfoGoesThroughThePrimaryContext) {
  MemoryInfo m = Device::get(1).memory_info();
  EXPECT_EQ(m.total_bytes, 16ull << 30);
  EXPECT_EQ(m.free_bytes, 16ull << 30);
}

TEST_F(TwoDevices, PrimaryContextIsRetainedAndReleasedByRaii) {
  {
    Context a = Context::primary(0);
    Context b = a.clone();
    EXPECT_EQ(a.handle(), b.handle());
    EXPECT_EQ(fake().primary_retains[0], 2);
    Context moved = std::move(a);
    EXPECT_FALSE(a);
    EXPECT_EQ(fake().primary_retains[0], 2);
  }
  EXPECT_EQ(fake().primary_retains[0], 0);
}

TEST_F(TwoDevices, MovedFromContextSaysSoWhenUsed) {
  Context a = Context::primary(0);
  Context b = std::move(a);
  EXPECT_THROW(a.synchronize(), EmptyHandle);
  EXPECT_NO_THROW(b.synchronize());
}

TEST_F(TwoDevices, CurrentContextIsSetOnlyWhenItChanges) {
  Context c0 = Context::primary(0);
  Context c1 = Context::primary(1);
  int before = fake().calls(EntryId::CtxSetCurrent);
  c0.make_current();
  c0.make_current();
  c0.make_current();
  EXPECT_EQ(fake().calls(EntryId::CtxSetCurrent), before + 1);
  c1.make_current();
  c0.make_current();
  EXPECT_EQ(fake().calls(EntryId::CtxSetCurrent), before + 3);
}

TEST_F(TwoDevices, CurrentContextCacheIsPerThread) {
  Context c0 = Context::primary(0);
  c0.make_current();
  int before = fake().calls(EntryId::CtxSetCurrent);
  std::thread([&] { c0.make_current(); }).join();
  EXPECT_EQ(fake().calls(EntryId::CtxSetCurrent), before + 1);
}

TEST_F(TwoDevices, StreamPriorityRangeIsReadOnce) {
  Context c0 = Context::primary(0);
  auto r1 = c0.ref().stream_priority_range();
  auto r2 = c0.ref().stream_priority_range();
  EXPECT_EQ(r1, (std::pair<int, int>{0, -5}));
  EXPECT_EQ(r1, r2);
  EXPECT_EQ(fake().calls(EntryId::CtxGetStreamPriorityRange), 1);
}

}  // namespace
}  // namespace cudakit
