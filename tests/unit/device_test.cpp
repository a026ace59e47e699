// Devices and contexts.
#include <gtest/gtest.h>

#include <thread>

#include "cudakit/context.hpp"
#include "cudakit/device.hpp"
#include "cudakit/event.hpp"
#include "cudakit/stream.hpp"
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


// A failed first query of a device throws (it once deadlocked: the error message names
// the device, which read the device table under the lock the query held) and leaves no
// half-made state behind: the next call asks again.
TEST_F(TwoDevices, FailedFirstDeviceGetThrowsAndTheNextCallAsksAgain) {
  fake().fail(EntryId::DeviceGet, 1, CUDA_ERROR_INVALID_VALUE);
  try {
    Device::get(1);
    FAIL() << "threw nothing";
  } catch (const DriverError& e) {
    EXPECT_EQ(e.call(), "cuDeviceGet");
    EXPECT_EQ(e.resource(), "device 1");
  }
  Device d = Device::get(1);
  EXPECT_EQ(d.handle(), 1);
  EXPECT_EQ(d.name(), "Second Fake GPU");
}

// The same for the name (it deadlocked on the name's own lock).
TEST_F(TwoDevices, FailedNameQueryThrowsAndTheNextCallAsksAgain) {
  Device d = Device::get(0);
  fake().fail(EntryId::DeviceGetName, 1, CUDA_ERROR_INVALID_VALUE);
  auto m = message_of<DriverError>([&] { (void)d.name(); });
  EXPECT_NE(m.find("cuDeviceGetName on device 0: CUDA_ERROR_INVALID_VALUE"), std::string::npos) << m;
  EXPECT_EQ(d.name(), "Fake GPU");
}

// A hand-made ref with a bad ordinal is refused, never an access outside the device table.
TEST_F(TwoDevices, RefWithAnOrdinalOutsideTheTableIsRefused) {
  for (int bad : {-1, 128, 1000}) {
    ContextRef context(fake::context_of(0), bad);
    auto m = message_of<InvalidArgument>([&] { Stream s(context); });
    EXPECT_NE(m.find("device ordinal " + std::to_string(bad) + " is out of range"), std::string::npos) << m;
    EXPECT_THROW(Event{context}, InvalidArgument);
    EXPECT_THROW((void)context.stream_priority_range(), InvalidArgument);
  }
  Stream a(Device::get(0));
  Stream b(Device::get(0));
  EXPECT_THROW(a.wait(StreamRef(b.handle(), 500)), InvalidArgument);
  // In the table but not a device: the driver says so.
  auto m = message_of<DriverError>([&] { Stream s(ContextRef(fake::context_of(0), 5)); });
  EXPECT_NE(m.find("cuDeviceGet on device 5: CUDA_ERROR_INVALID_DEVICE"), std::string::npos) << m;
}

// An attribute past this toolkit's CU_DEVICE_ATTRIBUTE_MAX (one a newer driver may know)
// goes to the driver uncached, never past the end of the cache. (Values outside the
// enum's range, like -1, are undefined behaviour in the caller: UBSan flags the cast.)
TEST_F(TwoDevices, AttributeBeyondTheCacheGoesToTheDriverUncached) {
  Device d = Device::get(0);
  EXPECT_THROW((void)d.attribute(CU_DEVICE_ATTRIBUTE_MAX), DriverError);
  EXPECT_THROW((void)d.attribute(static_cast<CUdevice_attribute>(200)), DriverError);
  EXPECT_EQ(fake().calls(EntryId::DeviceGetAttribute), 2);
}

// Resetting the library parks a failed release instead of deadlocking on the
// device table while the parked message names the device.
TEST_F(TwoDevices, FailedReleaseDuringResetIsParked) {
  expect_parked_errors();
  {
    Stream a(Device::get(0)), b(Device::get(0));
    b.wait(a);  // leaves one event in the pool
  }
  fake().fail(EntryId::EventDestroy, 0, CUDA_ERROR_INVALID_VALUE);
  cudakit::testing::reset_library_state();
  fake().clear_faults();
  auto parked = drain_parked_errors();
  ASSERT_EQ(parked.size(), 1u);
  EXPECT_EQ(parked[0].origin, "event pool");
  EXPECT_NE(parked[0].message.find("cuEventDestroy on event"), std::string::npos) << parked[0].message;
  fake().destroy_leftovers();
}

}  // namespace
}  // namespace cudakit
