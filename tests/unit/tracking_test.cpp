// Cross-stream tracking against the fake driver's ordering model (DESIGN 5). The fake runs
// everything in order, but its vector clocks see whether each pair of conflicting accesses
// on different streams was ordered by an event: a missing wait is a hazard that fails the
// test in TearDown.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>
#include <utility>

#include "cudakit/device_buffer.hpp"
#include "fake_fixture.hpp"

namespace cudakit {
namespace {

using driver::EntryId;

class TrackingTest : public testing::FakeDriverTest {
 protected:
  Device dev() { return Device::get(0); }

  // Work that writes `b` on `s` (what a fill or a kernel with a T* parameter does).
  static void write(DeviceSpan<float> b, StreamRef s) {
    b.use(s, Access::write);
    ASSERT_EQ(driver::cu.MemsetD32Async(b.device_pointer(), 0x3f800000u, b.size(), s.handle()), CUDA_SUCCESS);
  }
  // Work that reads `b` on `s` into `scratch`, which only `s` uses.
  static void read(DeviceSpan<const float> b, StreamRef s, DeviceBuffer<float>& scratch) {
    b.use(s, Access::read);
    scratch.span().use(s, Access::write);
    ASSERT_EQ(driver::cu.MemcpyDtoDAsync(scratch.device_pointer(), b.device_pointer(), b.size_bytes(), s.handle()),
              CUDA_SUCCESS);
  }
  int events_recorded() { return fake().calls(EntryId::EventRecord); }
  int waits() { return fake().calls(EntryId::StreamWaitEvent); }
};

TEST_F(TrackingTest, SingleStreamUseRecordsNoEventAndWaitsForNothing) {
  Stream s(dev());
  DeviceBuffer<float> a(s, 256, zeroed), scratch(s, 256, uninitialized);
  for (int i = 0; i < 100; ++i) {
    write(a, s);
    read(a, s, scratch);
  }
  EXPECT_EQ(events_recorded(), 0);
  EXPECT_EQ(waits(), 0);
  EXPECT_FALSE(a.allocation()->is_shared_across_streams());
}

TEST_F(TrackingTest, ReadAfterWriteOnSecondStreamWaitsOnceForTheWriter) {
  Stream a(dev()), b(dev());
  DeviceBuffer<float> x(a, 256, uninitialized), scratch(b, 256, uninitialized);
  write(x, a);
  read(x, b, scratch);
  EXPECT_EQ(events_recorded(), 1);
  EXPECT_EQ(waits(), 1);
  for (int i = 0; i < 10; ++i) read(x, b, scratch);
  EXPECT_EQ(waits(), 1) << "a stream that waited for the current write reads again for free";
}

TEST_F(TrackingTest, WriterWaitsForEveryReaderOnEveryStreamNotOnlyTheLast) {
  Stream w(dev()), r1(dev()), r2(dev()), w2(dev());
  DeviceBuffer<float> x(w, 256, uninitialized), s1(r1, 256, uninitialized), s2(r2, 256, uninitialized);
  write(x, w);
  read(x, r1, s1);
  read(x, r2, s2);
  int before = waits();
  write(x, w2);
  EXPECT_EQ(waits() - before, 3) << "the last writer and both readers";
}

TEST_F(TrackingTest, WriteAfterWriteOnAnotherStreamWaits) {
  Stream a(dev()), b(dev());
  DeviceBuffer<float> x(a, 64, uninitialized);
  write(x, a);
  write(x, b);
  EXPECT_EQ(waits(), 1);
  write(x, b);
  EXPECT_EQ(waits(), 1);
  EXPECT_FALSE(x.allocation()->is_shared_across_streams()) << "after a write that waited for all, one stream owns it";
}

TEST_F(TrackingTest, FreeWaitsForEveryStreamThatUsedTheBuffer) {
  Stream a(dev()), b(dev()), c(dev());
  DeviceBuffer<float> sb(b, 64, uninitialized), sc(c, 64, uninitialized);
  {
    DeviceBuffer<float> x(a, 64, uninitialized);
    write(x, a);
    read(x, b, sb);
    read(x, c, sc);
  }  // freed here: the model checks the free is ordered after both reads
  EXPECT_EQ(fake().calls(EntryId::MemFreeAsync), 1);
}

TEST_F(TrackingTest, ViewsShareTheirBuffersTracking) {
  Stream a(dev()), b(dev());
  DeviceBuffer<float> x(a, 256, uninitialized), scratch(b, 128, uninitialized);
  write(x.subspan(128, 128), a);
  read(x.span().first(128), b, scratch);
  EXPECT_EQ(waits(), 1) << "a view orders against work on another view of the same buffer";
}

TEST_F(TrackingTest, ReadOnlyViewNeverWrites) {
  Stream a(dev()), b(dev());
  DeviceBuffer<float> x(a, 64, uninitialized);
  DeviceSpan<const float> ro = x;
  ro.use(b, Access::write);  // a const view can only read
  ro.use(b, Access::write);
  EXPECT_EQ(waits(), 1);
  EXPECT_TRUE(x.allocation()->is_shared_across_streams());
}

TEST_F(TrackingTest, ManualOrderingScopeAddsNoEventAndTheModelSeesTheMissingOrder) {
  ignore_hazards();
  Stream a(dev()), b(dev());
  DeviceBuffer<float> x(a, 64, uninitialized), scratch(b, 64, uninitialized);
  {
    ManualOrdering manual;
    EXPECT_FALSE(tracking_enabled());
    write(x, a);
    read(x, b, scratch);  // unordered on purpose
  }
  EXPECT_TRUE(tracking_enabled());
  EXPECT_EQ(waits(), 0);
  EXPECT_FALSE(fake().hazards().empty()) << "the ordering model must catch an unordered read";
  a.synchronize();
  b.synchronize();
}

TEST_F(TrackingTest, ManualOrderingByHandIsRespected) {
  Stream a(dev()), b(dev());
  DeviceBuffer<float> x(a, 64, uninitialized), scratch(b, 64, uninitialized);
  {
    ManualOrdering manual;
    write(x, a);
    b.wait(a);
    read(x, b, scratch);
    a.wait(b);  // the free will go on a
  }
}

TEST_F(TrackingTest, DestroyingAStreamABufferRemembersWaitsForItsWorkFirst) {
  Stream keep(dev());
  DeviceBuffer<float> x;
  {
    Stream gone(dev());
    x = DeviceBuffer<float>(gone, 64, uninitialized);
    write(x, gone);
  }
  EXPECT_GE(fake().calls(EntryId::StreamSynchronize), 1);
  DeviceBuffer<float> scratch(keep, 64, uninitialized);
  read(x, keep, scratch);  // the dead writer needs no wait: its work completed
  EXPECT_EQ(waits(), 0);
}

TEST_F(TrackingTest, StreamNobodyRemembersIsDestroyedWithoutSynchronizing) {
  { Stream s(dev()); }
  EXPECT_EQ(fake().calls(EntryId::StreamSynchronize), 0);
}

TEST_F(TrackingTest, ManyThreadsReadingSharedWeightsWaitOncePerStream) {
  Stream upload(dev());
  DeviceBuffer<float> weights(upload, 1024, uninitialized);
  write(weights, upload);
  constexpr int threads = 8;
  std::vector<Stream> streams;
  std::vector<DeviceBuffer<float>> scratch;
  for (int t = 0; t < threads; ++t) {
    streams.emplace_back(dev());
    scratch.emplace_back(streams.back(), 1024, uninitialized);
  }
  int before = waits();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) read(weights, streams[t], scratch[t]);
    });
  for (auto& th : pool) th.join();
  EXPECT_EQ(waits() - before, threads) << "one wait per reading stream, none per launch";
}

// Two threads read the same buffers on their own streams at the same moment, right after
// their upload: for each buffer, one of them hands it off from its single stream (under
// the lock) while the other looks at whether it is tracked already (without the lock, on
// the repeated-read path). That look is an atomic read; under TSan a plain one is a data
// race. The threads walk many buffers per round, so that once both run, they meet often.
TEST_F(TrackingTest, ReadersArrivingTogetherRightAfterTheUploadHandBuffersOffWithoutARace) {
  constexpr int rounds = 300, buffers = 64;
  Stream upload(dev()), mine(dev()), theirs(dev());
  std::vector<DeviceBuffer<float>> weights;
  for (int b = 0; b < buffers; ++b) weights.emplace_back(upload, 64, uninitialized);
  // Only the uses are declared (no work is submitted): the race is in the tracking.
  auto read_all = [&](StreamRef s) {
    for (auto& w : weights) std::as_const(w).span().use(s, Access::read);
  };
  // The other thread spins until a round starts (a barrier's wake-up would let one thread
  // finish before the other starts).
  std::atomic<int> round{-1}, finished{-1};
  std::thread other([&] {
    for (int r = 0; r < rounds; ++r) {
      for (int spin = 0; round.load(std::memory_order_acquire) < r; ++spin)
        if (spin > 100000) std::this_thread::yield();
      read_all(theirs);
      finished.store(r, std::memory_order_release);
    }
  });
  int hand_offs = 0;
  for (int r = 0; r < rounds; ++r) {
    for (auto& w : weights) w.span().use(upload, Access::write);  // the upload: on one stream again
    round.store(r, std::memory_order_release);
    read_all(mine);
    while (finished.load(std::memory_order_acquire) != r) std::this_thread::yield();
    for (auto& w : weights) hand_offs += w.allocation()->is_shared_across_streams() ? 1 : 0;
  }
  other.join();
  EXPECT_EQ(hand_offs, rounds * buffers);
}

TEST_F(TrackingTest, UnknownStreamStateFromARawRefIsTrackedToo) {
  Stream a(dev()), b(dev());
  DeviceBuffer<float> x(a, 64, uninitialized), scratch(b, 64, uninitialized);
  write(x, StreamRef(a.handle(), 0));  // a borrowed ref of the same stream
  read(x, b, scratch);
  EXPECT_EQ(waits(), 2) << "the borrowed ref is a different stream identity; both orders are kept";
}

// Random sequences over several streams and buffers, checked by the ordering model:
// every hazard ordered, nothing leaked (TearDown), and buffers that stay on one stream
// never cost an event.
class TrackingModelTest : public TrackingTest, public ::testing::WithParamInterface<unsigned> {};

TEST_P(TrackingModelTest, RandomOperationsAreAlwaysOrdered) {
  std::mt19937 rng(GetParam());
  constexpr int n_streams = 4, n_buffers = 6;
  std::vector<Stream> streams;
  std::vector<DeviceBuffer<float>> scratch;
  for (int i = 0; i < n_streams; ++i) {
    streams.emplace_back(dev());
    scratch.emplace_back(streams.back(), 64, uninitialized);
  }
  // Phase 1: each buffer confined to one stream: no event, no wait.
  std::vector<DeviceBuffer<float>> confined;
  for (int i = 0; i < n_buffers; ++i) confined.emplace_back(streams[i % n_streams], 64, zeroed);
  for (int step = 0; step < 200; ++step) {
    int i = static_cast<int>(rng() % n_buffers);
    StreamRef s = streams[i % n_streams];
    if (rng() % 2) write(confined[i], s);
    else read(confined[i], s, scratch[i % n_streams]);
  }
  EXPECT_EQ(events_recorded(), 0);
  EXPECT_EQ(waits(), 0);

  // Phase 2: anything goes; the model checks every conflicting pair was ordered.
  std::vector<DeviceBuffer<float>> buffers;
  for (int i = 0; i < n_buffers; ++i) buffers.emplace_back(streams[i % n_streams], 64, zeroed);
  for (int step = 0; step < 400; ++step) {
    int op = static_cast<int>(rng() % 10);
    auto& b = buffers[rng() % n_buffers];
    int si = static_cast<int>(rng() % n_streams);
    StreamRef s = streams[si];
    if (!b) b = DeviceBuffer<float>(s, 64, uninitialized);
    if (op < 4) write(b, s);
    else if (op < 8) read(b, s, scratch[si]);
    else if (op == 8) b.reset();
    else streams[si].synchronize();
  }
}

INSTANTIATE_TEST_SUITE_P(FixedSeeds, TrackingModelTest, ::testing::Values(1u, 2u, 3u, 42u, 1234u, 99991u));

}  // namespace
}  // namespace cudakit
