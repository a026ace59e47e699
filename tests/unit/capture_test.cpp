// Stream capture against the fake driver (DESIGN 6, 9):
// bookkeeping on every exit path, refusals that keep the capture valid, driver capture
// errors in words, other threads' submissions, lazy set-up, and tracking inside a capture.
#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>

#include "stream/capture_state.hpp"
#include "graph_fixture.hpp"
#include "stream/deferred.hpp"

namespace cudakit {
namespace {

using driver::EntryId;

class CaptureTest : public testing::GraphTestBase {};

TEST_F(CaptureTest, CapturedWorkIsRecordedNotRunAndEachLaunchRunsIt) {
  Stream s(dev());
  DeviceBuffer<float> x(s, 64, zeroed);
  Graph g = capture_nonempty(s, [&] { fill(x, s, 1.5f); });
  EXPECT_EQ(at(x, 0), 0.0f) << "captured work must not run at capture time";
  EXPECT_EQ(g.node_count(), 1u);
  GraphExec exec = g.instantiate();
  exec.launch(s);
  EXPECT_EQ(at(x, 63), 1.5f);
  expect_no_capture_left(s);
}

TEST_F(CaptureTest, EmptyCaptureYieldsNoGraphAndCaptureNonemptyThrows) {
  Stream s(dev());
  std::optional<Graph> none = capture(s, [] {});
  EXPECT_FALSE(none.has_value());
  expect_no_capture_left(s);
  std::string message = testing::message_of<EmptyCapture>([&] { (void)capture_nonempty(s, [] {}); });
  EXPECT_NE(message.find("recorded no work"), std::string::npos) << message;
  expect_no_capture_left(s);
  EXPECT_EQ(fake().live("graph"), 0u) << "the driver's zero-node graph is destroyed";
}

TEST_F(CaptureTest, ExceptionInsideTheCaptureEndsItDestroysThePartialGraphAndRethrows) {
  Stream s(dev());
  DeviceBuffer<float> x(s, 64, zeroed);
  EXPECT_THROW((void)capture(s, [&] {
                 fill(x, s, 2.0f);
                 throw std::runtime_error("user code failed");
               }),
               std::runtime_error);
  expect_no_capture_left(s);
  EXPECT_EQ(fake().live("graph"), 0u);
  fill(x, s, 3.0f);  // the stream works right after: this runs now
  s.synchronize();
  EXPECT_EQ(at(x, 0), 3.0f);
}

TEST_F(CaptureTest, ScopeEndsTheCaptureOnEarlyExitWithoutEnd) {
  Stream s(dev());
  DeviceBuffer<float> x(s, 64, zeroed);
  {
    Capture scope(s);
    EXPECT_TRUE(scope.active());
    EXPECT_TRUE(is_capturing(s));
    EXPECT_EQ(detail::active_captures.load(), 1);
    fill(x, s, 2.0f);
  }
  expect_no_capture_left(s);
  EXPECT_EQ(at(x, 0), 0.0f);
}

TEST_F(CaptureTest, SynchronizingACapturingStreamIsRefusedBeforeTheDriverAndTheCaptureStaysValid) {
  Stream s(dev());
  DeviceBuffer<float> x(s, 64, zeroed);
  Capture scope(s);
  fill(x, s, 1.0f);
  std::string message = testing::message_of<CaptureError>([&] { s.synchronize(); });
  EXPECT_NE(message.find("capturing"), std::string::npos) << message;
  EXPECT_THROW((void)s.query(), CaptureError);
  fill(x, s, 2.0f);
  std::optional<Graph> g = scope.end();  // not invalidated: the refusal came first
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->node_count(), 2u);
  expect_no_capture_left(s);
}

TEST_F(CaptureTest, ContextSynchronizeDuringACaptureIsRefused) {
  Stream s(dev());
  Context c = Context::primary(dev());
  Capture scope(s);
  EXPECT_THROW(c.synchronize(), CaptureError);
  EXPECT_FALSE(scope.end().has_value());
}

TEST_F(CaptureTest, AnInvalidatedCaptureEndsWithACaptureErrorInWordsAndTheStreamWorksAfter) {
  Stream s(dev());
  DeviceBuffer<float> x(s, 64, zeroed);
  Capture scope(s);
  fill(x, s, 1.0f);
  // A raw synchronous call the driver refuses: it invalidates the capture.
  EXPECT_EQ(driver::cu.StreamSynchronize(s.handle()), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  try {
    (void)scope.end();
    FAIL() << "an invalidated capture must not yield a graph";
  } catch (const CaptureError& e) {
    EXPECT_EQ(e.code(), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    EXPECT_NE(std::string(e.what()).find("cuStreamEndCapture"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("invalidated by an earlier error"), std::string::npos) << e.what();
  }
  expect_no_capture_left(s);
  fill(x, s, 4.0f);
  s.synchronize();
  EXPECT_EQ(at(x, 0), 4.0f);
}

TEST_F(CaptureTest, DriverErrorInsideTheWorkBecomesACaptureErrorAndTheScopeCleansUp) {
  Stream s(dev());
  Event e(dev());
  e.record(s);  // recorded outside any capture
  Stream other(dev());
  auto work = [&] { other.wait(e); };
  // `other` is not capturing: a plain wait. Now make `s` wait for it inside the capture:
  std::string message = testing::message_of<CaptureError>([&] {
    (void)capture(s, [&] {
      work();
      s.wait(e);  // a capturing stream waits for an event recorded before the capture
    });
  });
  EXPECT_NE(message.find("CUDA_ERROR_STREAM_CAPTURE_ISOLATION"), std::string::npos) << message;
  EXPECT_NE(message.find("outside its capture"), std::string::npos) << message;
  expect_no_capture_left(s);
}

// A stream that waits on an event recorded inside this thread's capture is marked as
// joining before the wait (design.md decision 14). The driver has the last word: an event
// recorded again since, outside the capture (here through the raw driver), joins nothing,
// and a wait that fails joins nothing either.
TEST_F(CaptureTest, AStreamMarkedBeforeAnEventWaitIsUnmarkedWhenTheDriverDidNotJoinIt) {
  Stream s(dev()), outside(dev()), waiting(dev());
  DeviceBuffer<float> x(s, 64, zeroed);
  Event e(dev());
  Capture scope(s);
  fill(x, s, 1.0f);
  e.record(s);  // inside the capture
  ASSERT_EQ(driver::cu.EventRecord(e.handle(), outside.handle()), CUDA_SUCCESS);  // and again outside it
  waiting.wait(e);
  EXPECT_EQ(StreamRef(waiting).state()->marks.capture(), nullptr);
  EXPECT_FALSE(is_capturing(waiting));

  e.record(s);  // inside again
  fake().fail(EntryId::StreamWaitEvent, waits() + 1, CUDA_ERROR_INVALID_VALUE);
  EXPECT_THROW(waiting.wait(e), DriverError);
  EXPECT_EQ(StreamRef(waiting).state()->marks.capture(), nullptr);
  EXPECT_FALSE(is_capturing(waiting));

  std::optional<Graph> g = scope.end();
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->node_count(), 1u);
  expect_no_capture_left(s);
}

TEST_F(CaptureTest, EveryDriverCaptureErrorHasAnExplanation) {
  for (int code = 900; code <= 908; ++code) {
    auto r = static_cast<CUresult>(code);
    EXPECT_TRUE(is_capture_error(r)) << code;
    EXPECT_FALSE(capture_error_explanation(r).empty()) << code;
    EXPECT_THROW(check(r, "cuTest", Resource::none()), CaptureError) << code;
  }
  EXPECT_FALSE(is_capture_error(CUDA_ERROR_INVALID_VALUE));
  EXPECT_THROW(check(CUDA_ERROR_INVALID_VALUE, "cuTest", Resource::none()), DriverError);
}

TEST_F(CaptureTest, UnjoinedForkMadeBehindCudakitsBackFailsTheCaptureInWords) {
  Stream s(dev()), side(dev());
  DeviceBuffer<float> x(side, 64, zeroed);
  Event fork(dev());
  std::string message = testing::message_of<CaptureError>([&] {
    (void)capture(s, [&] {
      // A raw fork cudakit does not see, never joined back.
      ASSERT_EQ(driver::cu.EventRecord(fork.handle(), s.handle()), CUDA_SUCCESS);
      ASSERT_EQ(driver::cu.StreamWaitEvent(side.handle(), fork.handle(), 0), CUDA_SUCCESS);
      ASSERT_EQ(driver::cu.MemsetD8Async(x.device_pointer(), 1, 4, side.handle()), CUDA_SUCCESS);
    });
  });
  EXPECT_NE(message.find("CUDA_ERROR_STREAM_CAPTURE_UNJOINED"), std::string::npos) << message;
  EXPECT_NE(message.find("not joined back"), std::string::npos) << message;
  expect_no_capture_left(s);
  EXPECT_FALSE(is_capturing(side)) << "ending the capture takes every stream out of it";
}

TEST_F(CaptureTest, ForkThroughCudakitIsJoinedBackAutomatically) {
  Stream s(dev()), side(dev());
  DeviceBuffer<float> a(s, 64, zeroed), b(side, 64, zeroed);
  Graph g = capture_nonempty(s, [&] {
    side.wait(s);  // fork: `side` joins the capture
    EXPECT_TRUE(is_capturing(side));
    fill(a, s, 1.0f);
    fill(b, side, 2.0f);
  });  // no join by hand
  EXPECT_FALSE(is_capturing(side));
  EXPECT_EQ(side.ref().state()->marks.capture(), nullptr);
  GraphExec exec = g.instantiate();
  exec.launch(s);
  EXPECT_EQ(at(a, 0), 1.0f);
  EXPECT_EQ(at(b, 0), 2.0f);
}

TEST_F(CaptureTest, AnotherThreadsSubmissionToACapturingStreamIsRefused) {
  Stream s(dev());
  DeviceBuffer<float> x(s, 64, zeroed);
  Event e(dev());
  Stream outside(dev());
  std::optional<Graph> g = capture(s, [&] {
    fill(x, s, 1.0f);
    std::string use, callback, record, wait;
    std::thread intruder([&] {
      use = testing::message_of<CaptureError>([&] { x.span().use(s, Access::write); });
      callback = testing::message_of<CaptureError>([&] { s.host_callback([] {}); });
      record = testing::message_of<CaptureError>([&] { e.record(s); });
      wait = testing::message_of<CaptureError>([&] { s.wait(outside); });
    });
    intruder.join();
    EXPECT_NE(use.find("being captured into a graph by thread"), std::string::npos) << use;
    EXPECT_NE(use.find("submit it from the capturing thread, or to another stream"), std::string::npos) << use;
    EXPECT_NE(callback.find("cuLaunchHostFunc"), std::string::npos) << callback;
    EXPECT_NE(record.find("cuEventRecord"), std::string::npos) << record;
    EXPECT_FALSE(wait.empty());
  });
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->node_count(), 1u) << "nothing from the other thread landed in the graph";
}

TEST_F(CaptureTest, ACapturingStreamCannotWaitForWorkOutsideItsCapture) {
  Stream s(dev()), outside(dev());
  Capture scope(s);
  std::string message = testing::message_of<CaptureError>([&] { s.wait(outside); });
  EXPECT_NE(message.find("cannot wait for work outside its capture"), std::string::npos) << message;
  EXPECT_FALSE(scope.end().has_value()) << "the capture stayed valid";
}

TEST_F(CaptureTest, AllocatingOnACapturingStreamIsRefusedAndTheCaptureStaysValid) {
  Stream s(dev()), other(dev());
  DeviceBuffer<float> x(s, 64, zeroed);
  Graph g = capture_nonempty(s, [&] {
    std::string message =
        testing::message_of<CaptureError>([&] { DeviceBuffer<float> tmp(s, 16, uninitialized); });
    EXPECT_NE(message.find("allocate it before the capture begins"), std::string::npos) << message;
    // On a stream outside the capture it is an ordinary allocation, plain ones included
    // (cuMemAlloc runs in relaxed mode so it does not invalidate the capture).
    DeviceBuffer<float> pooled(other, 16, zeroed);
    DeviceBuffer<float> plain(other, 16, zeroed, Allocator::plain);
    fill(x, s, 1.0f);
  });  // `plain` is freed inside the capture: deferred to the capture's end
  EXPECT_EQ(g.node_count(), 1u);
  EXPECT_EQ(fake().live("device memory"), 1u) << "the deferred frees ran when the capture ended";
}

TEST_F(CaptureTest, ThreadLocalModeRefusesUnsafeCallsOnTheCapturingThreadOnly) {
  Stream s(dev());
  Capture scope(s);  // per_thread by default
  CUresult other_thread = CUDA_ERROR_UNKNOWN;
  std::thread t([&] {
    CUdeviceptr p = 0;
    ContextRef(detail::library_context(0), 0).make_current();
    other_thread = driver::cu.MemAlloc(&p, 64);
    if (other_thread == CUDA_SUCCESS) driver::cu.MemFree(p);
  });
  t.join();
  EXPECT_EQ(other_thread, CUDA_SUCCESS) << "thread-local mode ignores other threads";
  CUdeviceptr p = 0;
  EXPECT_EQ(driver::cu.MemAlloc(&p, 64), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  EXPECT_THROW((void)scope.end(), CaptureError) << "the refused call invalidated the capture";
  expect_no_capture_left(s);
}

TEST_F(CaptureTest, GlobalModeRefusesUnsafeCallsOnOtherThreadsToo) {
  Stream s(dev());
  Capture scope(s, CaptureMode::global);
  EXPECT_EQ(detail::global_mode_captures.load(), 1);
  CUresult other_thread = CUDA_SUCCESS;
  std::thread t([&] {
    CUdeviceptr p = 0;
    ContextRef(detail::library_context(0), 0).make_current();
    other_thread = driver::cu.MemAlloc(&p, 64);
  });
  t.join();
  EXPECT_EQ(other_thread, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  EXPECT_THROW((void)scope.end(), CaptureError);
  expect_no_capture_left(s);
}

TEST_F(CaptureTest, RelaxedModeAllowsUnsafeCallsAndEndingOnAnotherThread) {
  Stream s(dev());
  DeviceBuffer<float> x(s, 64, zeroed);
  auto scope = std::make_unique<Capture>(s, CaptureMode::relaxed);
  fill(x, s, 1.0f);
  CUdeviceptr p = 0;
  ASSERT_EQ(driver::cu.MemAlloc(&p, 64), CUDA_SUCCESS);
  ASSERT_EQ(driver::cu.MemFree(p), CUDA_SUCCESS);
  std::optional<Graph> g;
  std::thread t([&] { g = scope->end(); });
  t.join();
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->node_count(), 1u);
  expect_no_capture_left(s);
}

TEST_F(CaptureTest, PerThreadCaptureMustEndOnItsThread) {
  Stream s(dev());
  Capture scope(s);
  std::string message;
  std::thread t([&] { message = testing::message_of<CaptureError>([&] { (void)scope.end(); }); });
  t.join();
  EXPECT_NE(message.find("must end there"), std::string::npos) << message;
  EXPECT_TRUE(scope.active());
  EXPECT_FALSE(scope.end().has_value());
}

// A scope of a strict capture destroyed on another thread cannot end the capture well
// (only its thread may: the driver refuses the end and drops the capture without a
// graph), and says so; it ends cudakit's books on the capture, every count included: the
// counts must not go on deferring frees (to a safe point that never comes on the
// capturing thread) after the capture is gone.
class CaptureScopeEndedElsewhereTest : public CaptureTest, public ::testing::WithParamInterface<CaptureMode> {};

TEST_P(CaptureScopeEndedElsewhereTest, LeavesNoCountBehindAndFreesRunAtOnce) {
  expect_parked_errors();
  Stream s(dev()), other(dev());
  auto freed_later = std::make_unique<DeviceBuffer<float>>(other, 64, zeroed);
  auto scope = std::make_unique<Capture>(s, GetParam());
  std::thread([&] { scope.reset(); }).join();

  EXPECT_EQ(detail::active_captures.load(), 0);
  EXPECT_EQ(detail::global_mode_captures.load(), 0);
  EXPECT_EQ(detail::strict_captures_on_this_thread.load(), 0);
  int frees = fake().calls(EntryId::MemFreeAsync);
  freed_later.reset();
  EXPECT_EQ(fake().calls(EntryId::MemFreeAsync), frees + 1) << "the free ran at once, it was not deferred";
  EXPECT_FALSE(detail::deferred_tasks_pending.load());

  auto parked = drain_parked_errors();
  ASSERT_EQ(parked.size(), 1u);
  EXPECT_NE(parked[0].message.find("must end there"), std::string::npos) << parked[0].message;
  // The driver no longer captures the stream, and the stream takes work again.
  EXPECT_FALSE(is_capturing(s));
  CUgraph g = nullptr;
  EXPECT_EQ(driver::cu.StreamEndCapture(s.handle(), &g), CUDA_ERROR_ILLEGAL_STATE);
  DeviceBuffer<float> after(s, 64, zeroed);
  s.synchronize();
}

INSTANTIATE_TEST_SUITE_P(StrictModes, CaptureScopeEndedElsewhereTest,
                         ::testing::Values(CaptureMode::global, CaptureMode::per_thread),
                         [](const auto& info) { return info.param == CaptureMode::global ? "Global" : "PerThread"; });

// Undoing a join removes the stream it names from the capture, whichever member it is,
// and only that stream's mark.
TEST_F(CaptureTest, LeavingACaptureRemovesTheStreamNamedNotTheLastToJoin) {
  Stream a(dev()), b(dev());
  detail::CaptureState capture;
  capture.owner = std::this_thread::get_id();
  detail::StreamState* sa = StreamRef(a).state();
  detail::StreamState* sb = StreamRef(b).state();
  ASSERT_TRUE(detail::join_capture(&capture, sa));
  ASSERT_TRUE(detail::join_capture(&capture, sb));
  detail::leave_capture(&capture, sa);
  EXPECT_EQ(sa->marks.capture(), nullptr);
  EXPECT_EQ(sb->marks.capture(), &capture);
  ASSERT_EQ(capture.members.size(), 1u);
  EXPECT_EQ(capture.members[0], sb);
  detail::leave_capture(&capture, sb);
  EXPECT_EQ(sb->marks.capture(), nullptr);
  EXPECT_TRUE(capture.members.empty());
}

TEST_F(CaptureTest, CapturesDoNotNest) {
  Stream s(dev());
  Capture outer(s);
  EXPECT_THROW(Capture inner(s), CaptureError);
  EXPECT_FALSE(outer.end().has_value());
}

TEST_F(CaptureTest, LazySetUpInsideACaptureDoesNotInvalidateIt) {
  // The fake refuses cuEventCreate, cuStreamCreate and cuDevicePrimaryCtxRetain during a
  // strict capture (stricter than the driver): lazy set-up must not reach the driver in
  // a mode that invalidates the capture.
  Stream s(dev());
  std::vector<Stream> sides;
  for (int i = 0; i < 8; ++i) sides.emplace_back(dev());
  DeviceBuffer<float> x(s, 64, zeroed);
  std::vector<DeviceBuffer<float>> parts;
  for (int i = 0; i < 8; ++i) parts.emplace_back(sides[i], 64, zeroed);
  int events_before = fake().calls(EntryId::EventCreate);
  Graph g = capture_nonempty(s, [&] {
    fill(x, s, 1.0f);
    for (int i = 0; i < 8; ++i) {
      sides[i].wait(s);                  // each fork takes a pooled event
      copy(parts[i], x, sides[i]);       // and each read after the write another
    }
    Stream made_inside(dev());          // creating a stream inside a capture is fine
    Event event_inside(dev());
  });
  EXPECT_GT(fake().calls(EntryId::EventCreate), events_before) << "the pool grew inside the capture";
  GraphExec exec = g.instantiate();
  exec.launch(s);
  s.synchronize();
  for (auto& p : parts) EXPECT_EQ(at(p, 0), 1.0f);
}

// ---- tracking inside a capture (Note [Tracking inside a capture]) ----

TEST_F(CaptureTest, UsesInsideACaptureDoNotReplaceTheBuffersRealLastWriter) {
  Stream a(dev()), c(dev());
  DeviceBuffer<float> x(a, 64, zeroed);
  fill(x, a, 1.0f);  // a really wrote it
  Graph g = capture_nonempty(c, [&] { fill(x, c, 2.0f); });
  int before = waits();
  fill(x, a, 3.0f);
  EXPECT_EQ(waits(), before) << "a is still the owner: the capture's stream did no real work";
  EXPECT_FALSE(x.allocation()->is_shared_across_streams());
  a.synchronize();
}

TEST_F(CaptureTest, NothingRecordedBeforeTheCaptureIsWaitedInsideIt) {
  Stream w(dev()), c(dev()), l(dev());
  DeviceBuffer<float> x(w, 64, zeroed), y(c, 64, zeroed);
  fill(x, w, 5.0f);  // written on w, outside
  int waits_before = waits();
  Graph g = capture_nonempty(c, [&] { copy(y, x, c); });  // reads x inside: no wait for w here
  EXPECT_EQ(waits(), waits_before);
  GraphExec exec = g.instantiate();
  exec.launch(l);  // the launch waits for w (and for c, which allocated y)
  EXPECT_GT(waits(), waits_before);
  l.synchronize();
  EXPECT_EQ(at(y, 0), 5.0f);
}

TEST_F(CaptureTest, WriteOnOneCapturedStreamThenReadOnAnotherBecomesAGraphEdge) {
  Stream a(dev()), b(dev()), launch_on(dev());
  DeviceBuffer<float> x(a, 64, zeroed), y(b, 64, zeroed);
  int records_before = records();
  Graph g = capture_nonempty(a, [&] {
    b.wait(a);          // fork
    fill(x, a, 7.0f);   // write on a
    copy(y, x, b);      // read on b: an event record on a and a wait on b, inside the capture
  });
  EXPECT_GE(records() - records_before, 2) << "the fork and the write-to-read hand-off";
  auto nodes = g.nodes();
  ASSERT_EQ(nodes.size(), 2u);
  std::string dot = g.dot();
  EXPECT_NE(dot.find("n0 -> n1"), std::string::npos) << "the copy depends on the fill:\n" << dot;
  GraphExec exec = g.instantiate();
  exec.launch(launch_on);
  launch_on.synchronize();
  EXPECT_EQ(at(y, 0), 7.0f);
}

TEST_F(CaptureTest, ABufferLastWrittenOnACapturingStreamIsWaitedForThroughItsFence) {
  Stream c(dev()), d(dev());
  DeviceBuffer<float> x(c, 64, zeroed), scratch(d, 64, zeroed);
  fill(x, c, 9.0f);  // c's work before the capture
  Capture scope(c);
  copy(scratch, x, d);  // d is not capturing: it must wait for c's earlier work, not record on c
  EXPECT_FALSE(is_capturing(d));
  EXPECT_FALSE(scope.end().has_value()) << "the capture recorded nothing and stayed valid";
  d.synchronize();
  EXPECT_EQ(at(scratch, 0), 9.0f);  // and the ordering model saw d wait for c (no hazard)
}

TEST_F(CaptureTest, HostCallbackInsideACaptureIsOwnedByTheGraphAndRunsAtEveryLaunch) {
  Stream s(dev());
  auto counter = std::make_shared<int>(0);
  Graph g = capture_nonempty(s, [&] { s.host_callback([counter] { ++*counter; }); });
  EXPECT_EQ(*counter, 0);
  EXPECT_EQ(counter.use_count(), 2) << "the graph holds the callable";
  {
    GraphExec exec = g.instantiate();
    for (int i = 0; i < 3; ++i) exec.launch(s);
    EXPECT_EQ(*counter, 3);
  }
  g = Graph();
  run_deferred_releases();
  EXPECT_EQ(counter.use_count(), 1) << "released with the graph";
}

TEST_F(CaptureTest, ConcurrentCapturesOnTwoThreadsShareAReadOnlyBuffer) {
  Stream upload(dev());
  DeviceBuffer<float> weights(upload, 64, zeroed);
  fill(weights, upload, 2.0f);
  constexpr int workers = 4;
  std::vector<Stream> streams;
  std::vector<DeviceBuffer<float>> outputs;
  for (int t = 0; t < workers; ++t) {
    streams.emplace_back(dev());
    outputs.emplace_back(streams.back(), 64, zeroed);
  }
  std::vector<std::optional<Graph>> graphs(workers);
  std::vector<std::thread> pool;
  for (int t = 0; t < workers; ++t)
    pool.emplace_back([&, t] {
      graphs[t] = capture(streams[t], [&] {
        for (int k = 0; k < 20; ++k) copy(outputs[t], weights, streams[t]);
      });
    });
  for (auto& th : pool) th.join();
  for (int t = 0; t < workers; ++t) {
    ASSERT_TRUE(graphs[t].has_value());
    EXPECT_EQ(graphs[t]->node_count(), 20u);
    GraphExec exec = graphs[t]->instantiate();
    exec.launch(streams[t]);
    streams[t].synchronize();
    EXPECT_EQ(at(outputs[t], 0), 2.0f);
  }
  EXPECT_EQ(detail::active_captures.load(), 0);
}

TEST_F(CaptureTest, ManualOrderingInsideACaptureStillKeepsBuffersAlive) {
  Stream s(dev());
  auto x = std::make_unique<DeviceBuffer<float>>(s, 64, zeroed);
  std::optional<Graph> g;
  {
    ManualOrdering manual;
    g = capture(s, [&] { fill(*x, s, 1.0f); });
  }
  x.reset();
  EXPECT_EQ(fake().live("device memory"), 1u) << "lifetimes are never manual";
  g.reset();
  run_deferred_releases();
  EXPECT_EQ(fake().live("device memory"), 0u);
}

TEST_F(CaptureTest, HostCallbackOnAStreamCapturedOutsideCudakitIsRefused) {
  Stream s(dev());
  ASSERT_EQ(driver::cu.StreamBeginCapture(s.handle(), CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  EXPECT_THROW(s.host_callback([] {}), CaptureError);
  CUgraph g = nullptr;
  ASSERT_EQ(driver::cu.StreamEndCapture(s.handle(), &g), CUDA_SUCCESS);
  ASSERT_EQ(driver::cu.GraphDestroy(g), CUDA_SUCCESS);
}

}  // namespace
}  // namespace cudakit
