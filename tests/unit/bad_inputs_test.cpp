// Bad inputs to the public operations, and the error each gets (docs/bad-inputs.md lists
// them all with the tests that pin them; the ones not pinned elsewhere are here).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cudakit/cudakit.hpp"
#include "fake_fixture.hpp"

namespace cudakit {
namespace {

using driver::EntryId;
using testing::message_of;

class BadInputs : public testing::FakeDriverTest {
 protected:
  Device dev() { return Device::get(0); }
};

// ---- devices and contexts ----

class NoDevices : public testing::FakeDriverTest {
  void configure(fake::Driver& d) override { d.devices.clear(); }
};

TEST_F(NoDevices, CountIsZeroAndEveryOrdinalIsOutOfRange) {
  EXPECT_EQ(Device::count(), 0);
  EXPECT_TRUE(Device::all().empty());
  auto m = message_of<InvalidArgument>([] { Device::get(0); });
  EXPECT_NE(m.find("device ordinal 0 is out of range: this process sees 0 CUDA devices"), std::string::npos) << m;
}

TEST_F(BadInputs, EmptyContextRefIsRefusedEvenWhenNoContextIsCurrent) {
  forget_cached_current_context();  // the thread's cached context is null, like the empty ref's
  auto m = message_of<EmptyHandle>([] { ContextRef{}.make_current(); });
  EXPECT_NE(m.find("use of an empty Context (moved-from or default-constructed)"), std::string::npos) << m;
  EXPECT_THROW(ContextRef{}.synchronize(), EmptyHandle);
  EXPECT_THROW((void)ContextRef{}.stream_priority_range(), EmptyHandle);
  EXPECT_EQ(fake().calls(EntryId::CtxSetCurrent), 0);
}

TEST_F(BadInputs, MovedFromContextRefusesEveryUse) {
  Context a = Context::primary(0);
  Context b = std::move(a);
  EXPECT_THROW(a.make_current(), EmptyHandle);
  EXPECT_THROW(a.synchronize(), EmptyHandle);
  EXPECT_THROW((void)a.clone(), EmptyHandle);
  EXPECT_NO_THROW(b.make_current());
}

TEST_F(BadInputs, StreamOrEventInAnEmptyContextIsRefused) {
  auto m = message_of<EmptyHandle>([] { Stream s(ContextRef{}); });
  EXPECT_NE(m.find("use of an empty Context"), std::string::npos) << m;
  EXPECT_THROW(Event{ContextRef{}}, EmptyHandle);
  EXPECT_EQ(fake().calls(EntryId::StreamCreateWithPriority) + fake().calls(EntryId::EventCreate), 0);
}

// ---- streams ----

TEST_F(BadInputs, MovedFromStreamRefusesWaitsPriorityAndBeingWaitedOrRecordedOn) {
  Stream a(dev()), b(dev());
  Stream moved = std::move(a);
  Event e(dev());
  EXPECT_THROW(a.wait(e), EmptyHandle);
  EXPECT_THROW(a.wait(b), EmptyHandle);
  EXPECT_THROW(b.wait(a), EmptyHandle);
  EXPECT_THROW((void)a.priority(), EmptyHandle);
  auto m = message_of<EmptyHandle>([&] { e.record(a); });
  EXPECT_NE(m.find("cuEventRecord: use of an empty Stream"), std::string::npos) << m;
  EXPECT_EQ(fake().calls(EntryId::EventRecord) + fake().calls(EntryId::StreamWaitEvent), 0);
  EXPECT_TRUE(fake().problems.empty()) << "no legacy stream ever reached the driver";
}

TEST_F(BadInputs, AdoptRefusesThePerThreadDefaultStream) {
  auto m = message_of<InvalidArgument>([] { Stream::adopt(CU_STREAM_PER_THREAD, 0); });
  EXPECT_NE(m.find("the legacy or per-thread default stream cannot be adopted"), std::string::npos) << m;
}

TEST_F(BadInputs, AdoptOfAHandleTheDriverDoesNotKnowIsItsError) {
  (void)dev();
  auto bogus = reinterpret_cast<CUstream>(std::uintptr_t{0x1230});
  auto m = message_of<DriverError>([&] { Stream::adopt(bogus, 0); });
  EXPECT_NE(m.find("cuStreamGetFlags on stream 0x1230 on device 0"), std::string::npos) << m;
  EXPECT_NE(m.find("CUDA_ERROR_INVALID_HANDLE"), std::string::npos) << m;
}

// ---- events ----

TEST_F(BadInputs, ElapsedTimeRefusesEmptyEvents) {
  Event a(dev(), EventTiming::enabled);
  auto m = message_of<EmptyHandle>([&] { (void)elapsed_time(EventRef{}, a); });
  EXPECT_NE(m.find("use of an empty Event"), std::string::npos) << m;
  EXPECT_THROW((void)elapsed_time(a, EventRef{}), EmptyHandle);
  EXPECT_EQ(fake().calls(EntryId::EventElapsedTime), 0);
}

TEST_F(BadInputs, ElapsedTimeOfEventsNeverRecordedIsTheDriversError) {
  Event a(dev(), EventTiming::enabled), b(dev(), EventTiming::enabled);
  auto m = message_of<DriverError>([&] { (void)elapsed_time(a, b); });
  EXPECT_NE(m.find("cuEventElapsedTime on event"), std::string::npos) << m;
  EXPECT_NE(m.find("CUDA_ERROR_INVALID_HANDLE"), std::string::npos) << m;
}

// cuEventElapsedTime answers NOT_READY while the end event has not completed: unlike a
// query's "not yet", that is an error (there is no time to return); synchronize first.
TEST_F(BadInputs, ElapsedTimeBeforeTheEndEventCompletedIsNotReadyAsAnError) {
  Stream s(dev());
  Event a(dev(), EventTiming::enabled), b(dev(), EventTiming::enabled);
  a.record(s);
  b.record(s);
  fake().fail(EntryId::EventElapsedTime, 1, CUDA_ERROR_NOT_READY);
  try {
    (void)elapsed_time(a, b);
    FAIL() << "threw nothing";
  } catch (const DriverError& e) {
    EXPECT_EQ(e.code(), CUDA_ERROR_NOT_READY);
    EXPECT_EQ(e.call(), "cuEventElapsedTime");
  }
  EXPECT_EQ(detail::poison_of(0), nullptr) << "NOT_READY is not sticky";
  b.synchronize();
  EXPECT_NO_THROW((void)elapsed_time(a, b));
}

TEST_F(BadInputs, MovedFromEventRefusesSynchronizeAndTiming) {
  Event a(dev(), EventTiming::enabled);
  Event b = std::move(a);
  EXPECT_THROW(a.synchronize(), EmptyHandle);
  EXPECT_THROW((void)elapsed_time(a, b), EmptyHandle);
}

TEST_F(BadInputs, AdoptingANullEventGivesAnEmptyEventThatSaysSo) {
  Stream s(dev());
  {
    Event e = Event::adopt(nullptr, 0);
    EXPECT_FALSE(e);
    EXPECT_THROW(e.record(s), EmptyHandle);
  }
  EXPECT_EQ(fake().calls(EntryId::EventDestroy), 0) << "nothing to destroy";
}

// Not an error, but asked about: an event never recorded has nothing to wait for.
TEST_F(BadInputs, QueryOfAnEventNeverRecordedIsTrue) {
  Event e(dev());
  EXPECT_TRUE(e.query());
  EXPECT_NO_THROW(e.synchronize());
}

// ---- memory and copies ----

TEST_F(BadInputs, DeviceBufferRefusesAnEmptyStreamAndACountThatOverflows) {
  auto m = message_of<EmptyHandle>([] { DeviceBuffer<float> b(StreamRef{}, 4, uninitialized); });
  EXPECT_NE(m.find("cuMemAllocAsync: use of an empty Stream"), std::string::npos) << m;
  EXPECT_THROW((DeviceBuffer<float>(StreamRef{}, 4, zeroed, Allocator::plain)), EmptyHandle);
  Stream s(dev());
  const std::size_t too_many = static_cast<std::size_t>(-1) / 4;
  m = message_of<InvalidArgument>([&] { DeviceBuffer<double> b(s, too_many, uninitialized); });
  EXPECT_NE(m.find("DeviceBuffer of " + std::to_string(too_many) + " elements of 8 bytes overflows size_t"),
            std::string::npos)
      << m;
  m = message_of<InvalidArgument>([&] { PinnedBuffer<double> b(too_many, uninitialized); });
  EXPECT_NE(m.find("PinnedBuffer of " + std::to_string(too_many) + " elements of 8 bytes overflows size_t"),
            std::string::npos)
      << m;
  EXPECT_EQ(fake().calls(EntryId::MemAllocAsync) + fake().calls(EntryId::MemAlloc) + fake().calls(EntryId::MemHostAlloc),
            0);
}

TEST_F(BadInputs, ZeroElementBuffersAllocateNothingAndCopyNothing) {
  Stream s(dev());
  DeviceBuffer<float> d(s, 0, zeroed);
  PinnedBuffer<float> p(0, uninitialized);
  EXPECT_FALSE(d);
  EXPECT_EQ(d.device_pointer(), 0u);
  std::vector<float> none;
  copy(s, none, d);
  copy(s, d, none);
  fill(s, d, 1.0f);
  EXPECT_TRUE(download(s, d).empty());
  EXPECT_EQ(fake().calls(EntryId::MemAllocAsync) + fake().calls(EntryId::MemAlloc) + fake().calls(EntryId::MemHostAlloc) +
                fake().calls(EntryId::MemcpyHtoDAsync) + fake().calls(EntryId::MemcpyDtoHAsync) +
                fake().calls(EntryId::MemsetD32Async),
            0);
}

TEST_F(BadInputs, ViewsOutOfRangeAreRefusedWithTheSizes) {
  Stream s(dev());
  DeviceBuffer<float> d(s, 10, zeroed);
  auto m = message_of<InvalidArgument>([&] { (void)d.subspan(8, 5); });
  EXPECT_NE(m.find("subspan(8, 5) is out of range"), std::string::npos) << m;
  EXPECT_NE(m.find("10"), std::string::npos) << m;
  EXPECT_THROW((void)d.subspan(11), InvalidArgument);
  EXPECT_THROW((void)d.last(11), InvalidArgument);
  EXPECT_THROW((void)d.first(11), InvalidArgument);
  // Offset and count whose sum wraps around.
  EXPECT_THROW((void)d.subspan(2, static_cast<std::size_t>(-1)), InvalidArgument);
  EXPECT_EQ(d.subspan(10).size(), 0u) << "the end itself is in range";
}

TEST_F(BadInputs, CopiesAndFillsOnAnEmptyStreamAreRefused) {
  Stream s(dev());
  DeviceBuffer<float> d(s, 8, zeroed), e(s, 8, zeroed);
  std::vector<float> host(8, 1.0f);
  auto m = message_of<EmptyHandle>([&] { copy(StreamRef{}, host, d); });
  EXPECT_NE(m.find("cuMemcpyHtoDAsync: use of an empty Stream"), std::string::npos) << m;
  EXPECT_THROW(copy(StreamRef{}, d, host), EmptyHandle);
  EXPECT_THROW(copy(StreamRef{}, d, e), EmptyHandle);
  EXPECT_THROW(fill(StreamRef{}, d, 2.0f), EmptyHandle);
  EXPECT_THROW((void)download(StreamRef{}, d), EmptyHandle);
  EXPECT_THROW((void)upload(StreamRef{}, host), EmptyHandle);
}

// NOLINTBEGIN(bugprone-use-after-move): using the moved-from buffer is the point.
TEST_F(BadInputs, AMovedFromBufferThrowsEmptyHandleWhereverItIsUsed) {
  Stream s(dev());
  DeviceBuffer<float> a(s, 8, zeroed);
  DeviceBuffer<float> b = std::move(a);
  std::vector<float> host(8, 1.0f);
  fake().clear_log();
  auto m = message_of<EmptyHandle>([&] { copy(s, host, a); });
  EXPECT_NE(m.find("use of a moved-from DeviceBuffer"), std::string::npos) << m;
  EXPECT_THROW(copy(s, a, b), EmptyHandle);
  EXPECT_THROW(copy(s, b, a), EmptyHandle);
  EXPECT_THROW(copy(s, a, host), EmptyHandle);
  EXPECT_THROW((void)download(s, a), EmptyHandle);
  EXPECT_THROW(download(s, a, host), EmptyHandle);
  EXPECT_THROW(fill(s, a, 1.0f), EmptyHandle);
  EXPECT_THROW(fill_pattern8(s, a, 0xab), EmptyHandle);
  EXPECT_THROW((void)a.span(), EmptyHandle);
  EXPECT_THROW((void)std::as_const(a).span(), EmptyHandle);
  EXPECT_THROW((void)a.subspan(0), EmptyHandle);
  EXPECT_THROW((void)a.first(0), EmptyHandle);
  EXPECT_THROW((void)a.data(), EmptyHandle);
  EXPECT_THROW((void)std::as_const(a).data(), EmptyHandle);
  EXPECT_THROW((void)a.device_pointer(), EmptyHandle);
  EXPECT_THROW((void)reads(a), EmptyHandle);
  EXPECT_THROW((void)writes(a), EmptyHandle);
  EXPECT_TRUE(fake().log().empty()) << "nothing reached the driver";
  // The queries answer, and never throw.
  EXPECT_EQ(a.size(), 0u);
  EXPECT_TRUE(a.empty());
  EXPECT_FALSE(a);
  EXPECT_EQ(a.device_ordinal(), -1);
  EXPECT_EQ(a.allocation(), nullptr);
  EXPECT_EQ(download(s, b), std::vector<float>(8, 0.0f)) << "the buffer it moved to has the memory";
}

TEST_F(BadInputs, AMovedFromBufferStaysMovedFromWhenMovedOnAndIsUsableOnceAssignedOrReset) {
  Stream s(dev());
  DeviceBuffer<float> a(s, 8, zeroed);
  DeviceBuffer<float> b = std::move(a);
  DeviceBuffer<float> c = std::move(a);
  EXPECT_THROW((void)c.span(), EmptyHandle) << "moving a moved-from buffer passes the state on";
  DeviceBuffer<float> d;
  d = std::move(c);
  EXPECT_THROW((void)d.span(), EmptyHandle);
  a = DeviceBuffer<float>(s, 4, zeroed);
  EXPECT_EQ(download(s, a), std::vector<float>(4, 0.0f)) << "a new buffer assigned to it";
  c.reset();
  EXPECT_TRUE(download(s, c).empty()) << "reset() leaves an empty buffer";
  (void)b;
}
// NOLINTEND(bugprone-use-after-move)

TEST_F(BadInputs, DefaultConstructedAndResetBuffersAreEmptyRangesNotErrors) {
  Stream s(dev());
  DeviceBuffer<float> none;
  DeviceBuffer<float> was_reset(s, 8, zeroed);
  was_reset.reset();
  fake().clear_log();
  for (DeviceBuffer<float>* b : {&none, &was_reset}) {
    std::vector<float> nothing;
    copy(s, nothing, *b);
    copy(s, *b, nothing);
    fill(s, *b, 1.0f);
    EXPECT_TRUE(download(s, *b).empty());
    EXPECT_EQ(b->data(), nullptr);
    EXPECT_EQ(std::as_const(*b).data(), nullptr);
    EXPECT_EQ(b->device_pointer(), 0u);
    EXPECT_TRUE(b->span().empty());
    EXPECT_EQ(reads(*b).allocations[0], nullptr) << "declares nothing";
    std::vector<float> eight(8, 1.0f);
    auto m = message_of<InvalidArgument>([&] { copy(s, eight, *b); });
    EXPECT_NE(m.find("the source has 8 elements (32 bytes) but the destination has 0 elements (0 bytes)"),
              std::string::npos)
        << m;
  }
  EXPECT_EQ(fake().calls(EntryId::MemcpyHtoDAsync) + fake().calls(EntryId::MemcpyDtoHAsync) +
                fake().calls(EntryId::MemsetD32Async),
            0);
}

// ---- capture, graphs and executables ----

TEST_F(BadInputs, EmptyGraphsAndExecutablesSayWhenUsed) {
  Stream s(dev());
  Graph none;
  auto m = message_of<EmptyHandle>([&] { (void)none.instantiate(); });
  EXPECT_NE(m.find("use of an empty Graph (moved-from or default-constructed)"), std::string::npos) << m;
  EXPECT_THROW((void)none.node_count(), EmptyHandle);
  EXPECT_THROW((void)none.add_empty(), EmptyHandle);
  GraphExec nothing;
  m = message_of<EmptyHandle>([&] { nothing.launch(s); });
  EXPECT_NE(m.find("cuGraphLaunch: use of an empty GraphExec (moved-from or default-constructed)"), std::string::npos)
      << m;
  EXPECT_THROW(nothing.upload(s), EmptyHandle);
  EXPECT_THROW((void)nothing.node_count(), EmptyHandle);
  Graph g(dev());
  (void)g.add_empty();
  GraphExec exec = g.instantiate();
  m = message_of<EmptyHandle>([&] { exec.launch(StreamRef{}); });
  EXPECT_NE(m.find("cuGraphLaunch: use of an empty Stream"), std::string::npos) << m;
  EXPECT_THROW(exec.update(none), EmptyHandle);
  EXPECT_THROW(Capture scope(StreamRef{}), EmptyHandle);
  EXPECT_THROW((void)capture(StreamRef{}, [] {}), EmptyHandle);
  EXPECT_EQ(fake().calls(EntryId::GraphLaunch), 0);
}

class TwoDeviceBadInputs : public testing::FakeDriverTest {
  void configure(fake::Driver& d) override { d.devices.resize(2); }
};

TEST_F(TwoDeviceBadInputs, AnExecutableRunsAndUpdatesOnlyOnItsOwnDevice) {
  Stream there(Device::get(1));
  Graph g(Device::get(0)), other(Device::get(1));
  (void)g.add_empty();
  (void)other.add_empty();
  GraphExec exec = g.instantiate();
  auto m = message_of<InvalidArgument>([&] { exec.launch(there); });
  EXPECT_NE(m.find("cannot be launched on a stream of device 1"), std::string::npos) << m;
  m = message_of<InvalidArgument>([&] { exec.update(other); });
  EXPECT_NE(m.find("cannot take a graph of device 1"), std::string::npos) << m;
  EXPECT_EQ(fake().calls(EntryId::GraphLaunch) + fake().calls(EntryId::GraphExecUpdate), 0);
}

// ---- the Gpu facade, libraries ----

TEST_F(BadInputs, GpuOfAnOrdinalOutOfRangeNamesTheCount) {
  auto m = message_of<InvalidArgument>([] { Gpu g(3); });
  EXPECT_NE(m.find("device ordinal 3 is out of range: this process sees 1 CUDA device"), std::string::npos) << m;
  EXPECT_THROW(Gpu g(-1), InvalidArgument);
}

TEST_F(BadInputs, AnEmptyLibrarySaysSoWhenUsed) {
  Library none;
  auto m = message_of<EmptyHandle>([&] { (void)none.function(dev(), "saxpy"); });
  EXPECT_NE(m.find("use of an empty Library (moved-from or default-constructed)"), std::string::npos) << m;
  EXPECT_THROW((void)none.kernel_names(), EmptyHandle);
}

}  // namespace
}  // namespace cudakit
