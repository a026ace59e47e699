// Streams and events.
#include <gtest/gtest.h>

#include <type_traits>

#include "cudakit/event.hpp"
#include "cudakit/stream.hpp"
#include "fake_fixture.hpp"

namespace cudakit {
namespace {

using driver::EntryId;
using testing::message_of;

class StreamTest : public testing::FakeDriverTest {
 protected:
  Device dev() { return Device::get(0); }
};

static_assert(!std::is_convertible_v<std::nullptr_t, StreamRef>, "a null StreamRef would mean the legacy stream");
static_assert(!std::is_constructible_v<StreamRef, int>, "0 would mean the legacy stream");
static_assert(std::is_trivially_copyable_v<StreamRef>);
static_assert(std::is_trivially_copyable_v<EventRef>);
static_assert(!std::is_copy_constructible_v<Stream> && std::is_nothrow_move_constructible_v<Stream>);
static_assert(!std::is_copy_constructible_v<Event> && std::is_nothrow_move_constructible_v<Event>);

TEST_F(StreamTest, StreamsAreAlwaysNonBlocking) {
  Stream s(dev());
  unsigned flags = 0;
  ASSERT_EQ(driver::cu.StreamGetFlags(s.handle(), &flags), CUDA_SUCCESS);
  EXPECT_EQ(flags, unsigned(CU_STREAM_NON_BLOCKING));
}

TEST_F(StreamTest, PriorityWithinRangeIsKept) {
  Stream s(dev(), -3);
  EXPECT_EQ(s.priority(), -3);
}

TEST_F(StreamTest, PriorityOutsideRangeIsRefusedWithTheRange) {
  auto m = message_of<InvalidArgument>([&] { Stream s(dev(), -6); });
  EXPECT_NE(m.find("stream priority -6 is outside device 0's range [-5 (most urgent), 0 (least urgent)]"), std::string::npos) << m;
  EXPECT_THROW(Stream(dev(), 1), InvalidArgument);
  EXPECT_EQ(fake().calls(EntryId::StreamCreateWithPriority), 0);
}

TEST_F(StreamTest, QueryAndSynchronize) {
  Stream s(dev());
  EXPECT_TRUE(s.query());
  EXPECT_NO_THROW(s.synchronize());
}

TEST_F(StreamTest, NotReadyIsFalseNotAnError) {
  Stream s(dev());
  fake().fail(EntryId::StreamQuery, 1, CUDA_ERROR_NOT_READY);
  EXPECT_FALSE(s.query());
  EXPECT_TRUE(s.query());
  Event e(dev());
  e.record(s);
  fake().fail(EntryId::EventQuery, 1, CUDA_ERROR_NOT_READY);
  EXPECT_FALSE(e.query());
  EXPECT_TRUE(e.query());
}

TEST_F(StreamTest, MovedFromStreamThrowsInsteadOfUsingTheLegacyStream) {
  Stream a(dev());
  Stream b = std::move(a);
  EXPECT_FALSE(a);
  auto m = message_of<EmptyHandle>([&] { a.synchronize(); });
  EXPECT_NE(m.find("legacy"), std::string::npos) << m;
  EXPECT_THROW(a.query(), EmptyHandle);
  EXPECT_THROW(StreamRef{}.synchronize(), EmptyHandle);
  EXPECT_THROW(a.host_callback([] {}), EmptyHandle);
  EXPECT_EQ(fake().problems.size(), 0u) << "no legacy stream ever reached the driver";
}

TEST_F(StreamTest, WaitOnAnotherStreamRecordsOnePooledEventAndOneWait) {
  Stream a(dev()), b(dev());
  b.wait(a);
  EXPECT_EQ(fake().calls(EntryId::EventRecord), 1);
  EXPECT_EQ(fake().calls(EntryId::StreamWaitEvent), 1);
  EXPECT_EQ(fake().calls(EntryId::EventCreate), 1);
  b.wait(a);
  EXPECT_EQ(fake().calls(EntryId::EventCreate), 1) << "the second wait reuses the pooled event";
  b.wait(b);
  EXPECT_EQ(fake().calls(EntryId::EventRecord), 2) << "waiting on itself is free";
}

TEST_F(StreamTest, WaitOnEvent) {
  Stream a(dev()), b(dev());
  Event e(dev());
  e.record(a);
  b.wait(e);
  EXPECT_EQ(fake().calls(EntryId::StreamWaitEvent), 1);
  EXPECT_THROW(b.wait(EventRef{}), EmptyHandle);
}

TEST_F(StreamTest, HostCallbackRunsAnyCallable) {
  Stream s(dev());
  int hits = 0;
  auto owned = std::make_unique<int>(5);
  s.host_callback([&hits, p = std::move(owned)] { hits += *p; });  // move-only callable
  s.host_callback([&hits]() mutable { ++hits; });
  EXPECT_EQ(hits, 6);
}

TEST_F(StreamTest, ExceptionInHostCallbackIsParkedNotLostOrFatal) {
  expect_parked_errors();
  Stream s(dev());
  s.host_callback([] { throw std::runtime_error("callback failed"); });
  auto parked = drain_parked_errors();
  ASSERT_EQ(parked.size(), 1u);
  EXPECT_EQ(parked[0].origin, "host callback");
  EXPECT_NE(parked[0].message.find("callback failed"), std::string::npos) << parked[0].message;
}

TEST_F(StreamTest, FailedHostCallbackEnqueueFreesTheCallable) {
  Stream s(dev());
  fake().fail(EntryId::LaunchHostFunc, 1, CUDA_ERROR_INVALID_VALUE);
  auto token = std::make_shared<int>(1);
  EXPECT_THROW(s.host_callback([token] {}), DriverError);
  EXPECT_EQ(token.use_count(), 1) << "the callable was freed, not leaked";
}

TEST_F(StreamTest, AdoptAndRelease) {
  Stream s(dev());
  CUstream raw = s.release();
  EXPECT_FALSE(s);
  Stream back = Stream::adopt(raw, 0);
  EXPECT_EQ(back.handle(), raw);
}

TEST_F(StreamTest, AdoptRefusesBlockingAndLegacyStreams) {
  Context c = Context::primary(0);
  c.make_current();
  CUstream blocking = nullptr;
  ASSERT_EQ(driver::cu.StreamCreateWithPriority(&blocking, 0, 0), CUDA_SUCCESS);
  auto m = message_of<InvalidArgument>([&] { Stream::adopt(blocking, 0); });
  EXPECT_NE(m.find("blocking stream"), std::string::npos) << m;
  driver::cu.StreamDestroy(blocking);
  EXPECT_THROW(Stream::adopt(CU_STREAM_LEGACY, 0), InvalidArgument);
  EXPECT_THROW(Stream::adopt(nullptr, 0), InvalidArgument);
}

TEST_F(StreamTest, EventTimingIsOffUnlessAsked) {
  Event plain(dev());
  Event timed(dev(), EventTiming::enabled);
  EXPECT_TRUE(fake().event(plain.handle())->flags & CU_EVENT_DISABLE_TIMING);
  EXPECT_FALSE(fake().event(timed.handle())->flags & CU_EVENT_DISABLE_TIMING);
}

TEST_F(StreamTest, ElapsedTimeBetweenTimingEvents) {
  Stream s(dev());
  Event a(dev(), EventTiming::enabled), b(dev(), EventTiming::enabled);
  a.record(s);
  b.record(s);
  b.synchronize();
  EXPECT_FLOAT_EQ(elapsed_time(a, b).count(), 0.5f);
  Event plain(dev());
  plain.record(s);
  auto m = message_of<DriverError>([&] { elapsed_time(a, plain); });
  EXPECT_NE(m.find("cuEventElapsedTime"), std::string::npos) << m;
}

TEST_F(StreamTest, MovedFromEventThrows) {
  Event a(dev());
  Event b = std::move(a);
  Stream s(dev());
  EXPECT_THROW(a.record(s), EmptyHandle);
  EXPECT_THROW(a.query(), EmptyHandle);
  EXPECT_NO_THROW(b.record(s));
}

TEST_F(StreamTest, FailedCreateLeaksNothing) {
  fake().fail(EntryId::EventCreate, 1, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_THROW(Event{dev()}, DriverError);
  fake().fail(EntryId::StreamCreateWithPriority, 1, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_THROW(Stream{dev()}, DriverError);
  EXPECT_EQ(fake().live("stream"), 0u);
  EXPECT_EQ(fake().live("event"), 0u);
}

}  // namespace
}  // namespace cudakit
