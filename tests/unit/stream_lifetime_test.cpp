// A stream's state against failures and mistakes around it: an allocation that fails
// while a stream or a buffer is made (fault injection of the heap, allocation_counter.hpp),
// a StreamRef used after its Stream was destroyed (Note [Stale stream refs]), a borrowed
// stream's handle named on another device, and a staging buffer whose copy cannot be
// waited for.
#include <gtest/gtest.h>

#include <new>
#include <string>
#include <vector>

#include "allocation_counter.hpp"
#include "cudakit/device_buffer.hpp"
#include "cudakit/staging.hpp"
#include "cudakit/stream.hpp"
#include "memory/memory_testing.hpp"
#include "memory_fixture.hpp"

namespace cudakit {
namespace {

using driver::EntryId;
using testing::CountAllocations;
using testing::FailNthAllocation;
using testing::message_of;

class StreamLifetimeTest : public testing::MemoryTest {
 protected:
  void configure(fake::Driver& d) override { d.devices.resize(2); }
};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Each heap allocation that a buffer's creation on a borrowed stream makes fails in turn
// (the first one on a handle the registry does not know yet allocates the stream's state):
// the buffer's memory is freed exactly once, by whoever owns it when the failure leaves.
TEST_F(StreamLifetimeTest, ABufferWhoseCreationFailsToAllocateFreesItsMemoryOnce) {
  ContextRef(detail::library_context(0), 0).make_current();
  std::vector<CUstream> raw;
  bool failed = true;
  for (long nth = 1; failed && nth < 50; ++nth) {
    CUstream h = nullptr;
    ASSERT_EQ(driver::cu.StreamCreateWithPriority(&h, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
    raw.push_back(h);  // kept until the end: a new handle each time, unknown to the registry
    StreamRef borrowed(h, 0);
    int frees = fake().calls(EntryId::MemFreeAsync), allocs = fake().calls(EntryId::MemAllocAsync);
    {
      FailNthAllocation fail(nth);
      try {
        DeviceBuffer<float> b(borrowed, 64, uninitialized);
      } catch (const std::bad_alloc&) {
      }
      failed = fail.failed();
    }
    if (fake().calls(EntryId::MemAllocAsync) > allocs)
      EXPECT_EQ(fake().calls(EntryId::MemFreeAsync) - frees, 1) << "allocation " << nth << " failed";
  }
  EXPECT_FALSE(failed) << "the sweep did not reach a creation that allocates nothing more";
  for (CUstream h : raw) {
    ASSERT_EQ(driver::cu.StreamSynchronize(h), CUDA_SUCCESS);
    ASSERT_EQ(driver::cu.StreamDestroy(h), CUDA_SUCCESS);
  }
}

// A Stream whose state cannot be allocated leaves no stream handle behind.
TEST_F(StreamLifetimeTest, AStreamWhoseStateCannotBeAllocatedLeavesNoHandle) {
  // States live in slots that are reused (stream_state.cpp): make streams until one needs a
  // new slot, so the next one allocates.
  std::vector<Stream> held;
  held.reserve(10002);
  held.emplace_back(dev());  // the device's own set-up allocates too: done first
  for (int i = 0; i < 10000; ++i) {
    CountAllocations count;
    held.emplace_back(dev());
    if (count.count() > 0) break;
  }
  std::size_t streams = fake().live("stream");
  {
    FailNthAllocation fail(1);
    EXPECT_THROW(Stream s(dev()), std::bad_alloc);
    EXPECT_TRUE(fail.failed());
  }
  EXPECT_EQ(fake().live("stream"), streams) << "the new stream's handle leaked";
}

// A StreamRef kept past its Stream names a stream that is gone: it says so (stale()), and
// its use is refused with a message that says what went wrong, instead of a use of freed
// memory or of a handle the driver may have given to another stream.
TEST_F(StreamLifetimeTest, AStreamRefUsedAfterItsStreamIsDestroyedIsRefusedInWords) {
  Stream live(dev());
  DeviceBuffer<float> x(live, 64, uninitialized);
  StreamRef kept;
  {
    Stream gone(dev());
    kept = gone;
    EXPECT_FALSE(kept.stale());
  }
  EXPECT_TRUE(kept.stale());
  std::string m = message_of<EmptyHandle>([&] { kept.synchronize(); });
  EXPECT_TRUE(contains(m, "after its Stream was destroyed")) << m;
  m = message_of<EmptyHandle>([&] { DeviceSpan<float>(x).use(kept, Access::read); });  // a tracked use on another stream
  EXPECT_TRUE(contains(m, "after its Stream was destroyed")) << m;
  m = message_of<EmptyHandle>([&] { live.wait(kept); });
  EXPECT_TRUE(contains(m, "after its Stream was destroyed")) << m;
  EXPECT_FALSE(StreamRef(live).stale());
  Stream released(dev());
  StreamRef before_release = released;
  CUstream h = released.release();
  EXPECT_TRUE(before_release.stale());
  ASSERT_EQ(driver::cu.StreamDestroy(h), CUDA_SUCCESS);
}

// A raw handle the registry of borrowed streams knows on one device, named on another: the
// stream it named is gone and the driver gave its handle to a new one. The new stream gets
// a state of its own, on its own device.
TEST_F(StreamLifetimeTest, ABorrowedHandleNamedOnAnotherDeviceGetsAStateOfItsOwn) {
  ContextRef(detail::library_context(0), 0).make_current();
  CUstream h = nullptr;
  ASSERT_EQ(driver::cu.StreamCreateWithPriority(&h, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
  detail::StreamState* first = detail::borrowed_stream_state(h, 0);
  EXPECT_EQ(first->device, 0);
  EXPECT_EQ(detail::borrowed_stream_state(h, 0), first);
  detail::StreamState* second = detail::borrowed_stream_state(h, 1);
  EXPECT_EQ(second->device, 1);
  EXPECT_EQ(second->handle, h);
  ASSERT_EQ(driver::cu.StreamDestroy(h), CUDA_SUCCESS);
}

// The staging pool is torn down while a copy through one of its buffers is in flight, and
// that copy cannot be waited for: the buffer is kept (a leak, reported), not freed from
// under the copy, and the failed wait is parked (DESIGN 2).
TEST_F(StreamLifetimeTest, AStagingBufferWhoseCopyCannotBeWaitedForIsKeptAndReported) {
  expect_parked_errors();
  int host_frees = 0;
  {
    Stream s(dev());
    std::vector<float> input = values(256, 3);
    DeviceBuffer<float> b = upload(s, input);  // pageable: through a staging buffer, left in flight
    s.synchronize();
    ASSERT_EQ(staging_usage(dev()).buffers, 1);
    host_frees = fake().calls(EntryId::MemFreeHost);
    fake().fail(EntryId::EventSynchronize, 0, CUDA_ERROR_INVALID_VALUE);
    detail::reset_staging_for_testing();
    fake().clear_faults();
  }
  EXPECT_EQ(fake().calls(EntryId::MemFreeHost), host_frees) << "the staging buffer was freed under its copy";
  auto parked = drain_parked_errors();
  bool kept = false, wait_parked = false;
  for (const auto& p : parked) {
    kept = kept || contains(p.message, "is kept (a leak)");
    wait_parked = wait_parked || contains(p.message, "cuEventSynchronize");
  }
  EXPECT_TRUE(kept);
  EXPECT_TRUE(wait_parked);
  // The kept buffer, for the ledger: its event and its page-locked memory.
  testing::reset_library_state();
  fake().destroy_leftovers();
  std::vector<void*> pinned;
  for (const auto& [base, a] : fake().allocations)
    if (a.pinned_host) pinned.push_back(reinterpret_cast<void*>(base));
  ASSERT_EQ(pinned.size(), 1u);
  EXPECT_EQ(driver::cu.MemFreeHost(pinned[0]), CUDA_SUCCESS);
}

}  // namespace
}  // namespace cudakit
