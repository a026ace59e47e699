// Bad inputs to the public operations, and the error each gets (docs/bad-inputs.md lists
// them all with the tests that pin them; the ones not pinned elsewhere are here).
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace cudakit
