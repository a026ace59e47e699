// Captures against the lifetimes and the threads around them (DESIGN 6 and 9, decision 14):
// a stream destroyed while its capture runs, two threads beginning a capture on one stream,
// a use from another thread as the capture ends, and a failed capture's graph. The races
// run in an order the test fixes: the fake holds a thread inside a driver call
// (fake::Driver::on_call), or cudakit's test hook holds it between two reads, until the
// other thread got where the race needs it.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "graph_fixture.hpp"
#include "stream/capture_state.hpp"

namespace cudakit {
namespace {

using driver::EntryId;

class CaptureLifetimeTest : public testing::GraphTestBase {};

// Spins (yielding) until `ready` says so: a step of a schedule the test fixes.
template <class Ready>
void wait_until(Ready ready) {
  while (!ready()) std::this_thread::yield();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// ---- a stream destroyed while its capture runs ----

// A stream that joined the capture (a fork, joined back) is destroyed before the end: the
// end must not touch its handle (on a real driver it may name another thread's new stream
// by then), and the capture fails with an error that says what happened.
TEST_F(CaptureLifetimeTest, ASideStreamDestroyedDuringTheCaptureFailsTheEndWithoutUsingItsHandle) {
  expect_parked_errors();
  Stream s(dev());
  auto side = std::make_unique<Stream>(dev());
  DeviceBuffer<float> x(*side, 64, uninitialized);
  Capture scope(s);
  side->wait(s);  // a fork
  fill(x, *side, 2.0f);
  s.wait(*side);  // joined back
  side.reset();   // ~Stream parks why the capture fails

  std::string m = testing::message_of<CaptureError>([&] { scope.end(); });
  EXPECT_TRUE(contains(m, "a stream that joined the capture, was destroyed while the capture was in progress")) << m;
  auto parked = drain_parked_errors();
  ASSERT_EQ(parked.size(), 1u);
  EXPECT_EQ(parked[0].origin, "~Stream");
  EXPECT_TRUE(fake().failed_calls.empty());  // no driver call was given the dead handle
  expect_no_capture_left(s);
  DeviceBuffer<float> after(s, 64, uninitialized);  // the origin takes work again
  fill(after, s, 3.0f);
  s.synchronize();
  EXPECT_EQ(at(after, 63), 3.0f);
}

// The stream the capture began on is destroyed before the end: nothing is joined into it
// and its capture is not ended through its dead handle; the streams that joined leave the
// capture all the same.
TEST_F(CaptureLifetimeTest, TheOriginDestroyedDuringTheCaptureFailsTheEndWithoutUsingItsHandle) {
  expect_parked_errors();
  auto s = std::make_unique<Stream>(dev());
  Stream side(dev());
  DeviceBuffer<float> x(side, 64, uninitialized);
  auto scope = std::make_unique<Capture>(*s);
  side.wait(*s);
  fill(x, side, 2.0f);
  s->wait(side);
  StreamRef origin = *s;
  s.reset();

  std::string m = testing::message_of<CaptureError>([&] { scope->end(); });
  EXPECT_TRUE(contains(m, "the stream the capture began on, was destroyed while the capture was in progress")) << m;
  EXPECT_TRUE(origin.stale());
  drain_parked_errors();  // ~Stream's
  EXPECT_TRUE(fake().failed_calls.empty());
  EXPECT_EQ(detail::active_captures.load(), 0);
  EXPECT_EQ(StreamRef(side).state()->marks.capture(), nullptr);
  EXPECT_FALSE(is_capturing(side));
  fill(x, side, 4.0f);
  side.synchronize();
  EXPECT_EQ(at(x, 0), 4.0f);
}

// A failed capture's partial graph is destroyed; when that destroy fails, the failure is
// parked (DESIGN 2), not dropped, and the capture's own failure is what is raised.
TEST_F(CaptureLifetimeTest, AFailedDestroyOfAFailedCapturesGraphIsParked) {
  expect_parked_errors();
  Stream s(dev()), side(dev());
  DeviceBuffer<float> x(side, 64, uninitialized);
  Capture scope(s);
  side.wait(s);
  fill(x, side, 2.0f);
  s.wait(side);  // the user joined it: the end succeeds even when the capture's own join fails
  fake().fail(EntryId::StreamWaitEvent, waits() + 1, CUDA_ERROR_INVALID_VALUE);  // the capture's join
  fake().fail(EntryId::GraphDestroy, fake().calls(EntryId::GraphDestroy) + 1, CUDA_ERROR_INVALID_VALUE);
  EXPECT_THROW(scope.end(), DriverError);
  auto parked = drain_parked_errors();
  bool destroy_parked = false;
  for (const auto& p : parked) destroy_parked = destroy_parked || contains(p.message, "cuGraphDestroy");
  EXPECT_TRUE(destroy_parked) << "the failed cuGraphDestroy was dropped";
  // The fault left the graph behind in the fake: destroy it, so the ledger stays clean.
  fake().clear_faults();
  std::vector<const void*> graphs(fake().ledger["graph"].begin(), fake().ledger["graph"].end());
  for (const void* g : graphs)
    EXPECT_EQ(driver::cu.GraphDestroy(static_cast<CUgraph>(const_cast<void*>(g))), CUDA_SUCCESS);
  expect_no_capture_left(s);
}

// ---- two threads begin a capture on one stream ----

thread_local bool is_racing_thread = false;

// The main thread begins a capture on `s`; the fake holds it inside its capture fence's
// record until the racing thread has begun its own attempt on `s` (after the main thread's
// look at the stream, before its mark) and reached its own fence record, or given up. The
// racing thread is then held until the main thread's capture has begun. Exactly one
// capture takes the stream, and the loser's fence must not land in the winner's capture:
// a buffer last written on `s`, used on another stream, waits for `s`'s earlier work on
// that fence, and would join the capture if the fence had been recorded inside it.
TEST_F(CaptureLifetimeTest, OfTwoCapturesBegunOnOneStreamTheLoserRecordsNothingIntoTheWinners) {
  Stream s(dev()), t(dev());
  DeviceBuffer<float> x(s, 64, uninitialized);
  fill(x, s, 1.0f);
  DeviceBuffer<float> y(s, 64, uninitialized);

  std::atomic<bool> main_in_record{false}, racer_in_record{false}, racer_done{false}, main_begun{false};
  fake().on_call(EntryId::EventRecord, [&] {
    if (is_racing_thread) {
      racer_in_record = true;
      wait_until([&] { return main_begun.load(); });
    } else if (!main_begun) {
      main_in_record = true;
      wait_until([&] { return racer_in_record.load() || racer_done.load(); });
    }
  });
  std::string racer_error;
  std::thread racer([&] {
    is_racing_thread = true;
    wait_until([&] { return main_in_record.load(); });
    try {
      Capture other(s);
      racer_error = "the racing thread's capture began too";
    } catch (const CaptureError& e) {
      racer_error = e.what();
    }
    racer_done = true;
  });
  std::optional<Capture> scope;
  try {
    scope.emplace(s);
  } catch (...) {
    main_begun = true;
    racer.join();
    fake().on_call(EntryId::EventRecord, {});
    throw;
  }
  main_begun = true;
  racer.join();
  fake().on_call(EntryId::EventRecord, {});
  EXPECT_TRUE(contains(racer_error, "is already capturing")) << racer_error;

  fill(x, t, 2.0f);  // waits on s's capture fence: the work before the capture
  EXPECT_FALSE(is_capturing(t)) << "the fence was recorded inside the capture, and t joined it";
  fill(y, s, 3.0f);
  std::optional<Graph> g = scope->end();
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->node_count(), 1u);
  t.synchronize();
  EXPECT_EQ(at(x, 0), 2.0f);
  expect_no_capture_left(s);
}

// ---- a use from another thread as the capture ends ----

std::atomic<bool> hook_reached{false}, capture_ended{false};
void hold_after_capture_read() {
  if (!is_racing_thread) return;
  hook_reached = true;
  wait_until([] { return capture_ended.load(); });
}

// Another thread uses a buffer on `s` while the capture on `s` runs; it has read the
// stream's capture when the capture ends and its state is freed. It must not touch that
// state: the capture is over, so its use is a live one.
TEST_F(CaptureLifetimeTest, AUseFromAnotherThreadAsTheCaptureEndsNeverTouchesTheEndedCapture) {
  Stream s(dev());
  DeviceBuffer<float> x(s, 64, uninitialized), y(s, 64, uninitialized);
  auto scope = std::make_unique<Capture>(s);
  fill(y, s, 1.0f);
  hook_reached = false;
  capture_ended = false;
  detail::after_capture_read_hook = &hold_after_capture_read;
  std::string other_error;
  std::thread other([&] {
    is_racing_thread = true;
    try {
      fill(x, s, 5.0f);
    } catch (const std::exception& e) {
      other_error = e.what();
    }
  });
  wait_until([] { return hook_reached.load(); });
  std::optional<Graph> g = scope->end();
  scope.reset();
  capture_ended = true;
  other.join();
  detail::after_capture_read_hook = nullptr;
  EXPECT_EQ(other_error, "");
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->node_count(), 1u);
  s.synchronize();
  EXPECT_EQ(at(x, 17), 5.0f);  // ran live, after the capture
  expect_no_capture_left(s);
}

}  // namespace
}  // namespace cudakit
