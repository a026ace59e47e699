// A capture's start against other threads' work on its stream (docs/design.md decision
// 14): a buffer last used on a stream may be freed, or handed to another stream,
// by a thread that does not own the stream, at the very moment its owner begins a capture
// there. That free or hand-off event must run live, before the capture or beside it, and
// never land in the owner's graph.
//
// The window is a few instructions wide: between the other thread's look at the stream
// ("not capturing") and its driver call. The fake sleeps inside those calls (Driver::delay)
// so that, without the capture's mark-then-wait-for-pins, nearly every run fails; the
// owner meanwhile captures one memset at a time, as fast as it can, and every graph must
// hold that one node and nothing else.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "cudakit/event.hpp"
#include "graph_fixture.hpp"

namespace cudakit {
namespace {

using driver::EntryId;

constexpr int buffer_count = 300;  // the other thread's frees or hand-offs
constexpr int at_least = 20;       // captures, however fast the other thread is done
constexpr auto call_delay = std::chrono::microseconds(100);

class CaptureRaceTest : public testing::GraphTestBase {
 protected:
  // Buffers written on `s` (so `s` is their owner and last writer), for another thread.
  std::vector<DeviceBuffer<float>> buffers_used_on(StreamRef s) {
    std::vector<DeviceBuffer<float>> v;
    for (int i = 0; i < buffer_count; ++i) {
      v.emplace_back(s, 16, uninitialized);
      fill(v.back(), s, static_cast<float>(i));
    }
    return v;
  }

  // Runs `other_thread()` on another thread, with the fake sleeping `call_delay` inside
  // every call of `delayed`, while this thread captures `capture_work(i)` on `s` again and
  // again until the other thread is done. Every graph must hold `nodes` nodes: one more
  // is another thread's work that landed in it. Expects no failure on either side.
  template <class OtherThread, class CaptureWork>
  void race(EntryId delayed, OtherThread other_thread, StreamRef s, std::size_t nodes, CaptureWork capture_work) {
    fake().delay(delayed, call_delay);
    std::atomic<bool> done{false};
    std::string other_failure, capture_failure;
    std::thread other([&] {
      try {
        other_thread();
      } catch (const std::exception& e) {
        other_failure = e.what();
      }
      done = true;
    });
    try {
      for (int i = 0; i < at_least || !done.load(); ++i) {
        Graph g = capture_nonempty(s, [&] { capture_work(i); });
        if (g.node_count() != nodes) {
          capture_failure = "capture " + std::to_string(i) + " holds " + std::to_string(g.node_count()) +
                            " nodes: another thread's work landed in it";
          break;
        }
      }
    } catch (const std::exception& e) {
      capture_failure = std::string("the capturing thread: ") + e.what();
    }
    other.join();
    fake().delay(delayed, {});
    EXPECT_EQ(capture_failure, "");
    EXPECT_EQ(other_failure, "");
    expect_no_capture_left(s);
  }
};

TEST_F(CaptureRaceTest, FreesFromAnotherThreadStayOutOfACaptureBegunMeanwhile) {
  Stream s(dev());
  DeviceBuffer<float> mine(s, 16, zeroed);
  auto theirs = buffers_used_on(s);
  race(
      EntryId::MemFreeAsync, [&] { while (!theirs.empty()) theirs.pop_back(); },  // each free names `s`
      s, 1, [&](int i) { fill(mine, s, static_cast<float>(i)); });
  s.synchronize();
}

TEST_F(CaptureRaceTest, HandOffsFromAnotherThreadStayOutOfACaptureBegunMeanwhile) {
  Stream s(dev());
  DeviceBuffer<float> mine(s, 16, zeroed);
  auto theirs = buffers_used_on(s);
  race(
      EntryId::EventRecord,
      [&] {
        Stream t(dev());
        // A write on t after the write on s: t waits for s (an event recorded on s).
        for (auto& b : theirs) fill(b, t, -1.0f);
        t.synchronize();
        theirs.clear();
      },
      s, 1, [&](int i) { fill(mine, s, static_cast<float>(i)); });
  s.synchronize();
}

// A stream that joins the capture by waiting on an event recorded inside it (a fork) is
// marked before the driver's wait makes it capture, like the capture's own stream.
TEST_F(CaptureRaceTest, FreesFromAnotherThreadStayOutOfAStreamJoiningTheCaptureThroughAnEvent) {
  Stream s(dev()), joining(dev());
  DeviceBuffer<float> mine(s, 16, zeroed), side(joining, 16, zeroed);
  Event forked(dev());
  auto theirs = buffers_used_on(joining);
  race(
      EntryId::MemFreeAsync, [&] { while (!theirs.empty()) theirs.pop_back(); },  // each free names `joining`
      s, 2, [&](int i) {
        fill(mine, s, static_cast<float>(i));
        forked.record(s);
        joining.wait(forked);  // joins the capture
        fill(side, joining, static_cast<float>(i));
        s.wait(joining);  // and back
      });
  EXPECT_EQ(StreamRef(joining).state()->marks.capture(), nullptr);
  s.synchronize();
  joining.synchronize();
}

}  // namespace
}  // namespace cudakit
