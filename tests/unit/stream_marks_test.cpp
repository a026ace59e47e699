// The pins and marks between a stream's owner and the threads that use the stream without
// owning it (Note [Pins and marks]): a pin holds off the owner's destroy and a capture's
// start, and a pin taken after a mark sees it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "cudakit/detail/stream_marks.hpp"
#include "stream/capture_state.hpp"

namespace cudakit::detail {
namespace {

// Long enough for a marker that does not wait to get past its wait.
constexpr auto a_while = std::chrono::milliseconds(20);

TEST(StreamMarks, APinOnALiveStreamSucceeds) {
  StreamMarks marks;
  ASSERT_TRUE(marks.pin());
  EXPECT_FALSE(marks.capturing_while_pinned());
  marks.unpin();
  EXPECT_TRUE(marks.alive());
}

TEST(StreamMarks, APinOnADeadStreamFails) {
  StreamMarks marks;
  marks.mark_dead();
  EXPECT_FALSE(marks.alive());
  EXPECT_FALSE(marks.pin());
  EXPECT_FALSE(marks.pin()) << "a failed pin must leave no pin behind";
}

TEST(StreamMarks, MarkingDeadWaitsForEveryPin) {
  StreamMarks marks;
  ASSERT_TRUE(marks.pin());
  ASSERT_TRUE(marks.pin());
  std::atomic<bool> marked{false};
  std::thread owner([&] {
    marks.mark_dead();
    marked = true;
  });
  std::this_thread::sleep_for(a_while);
  EXPECT_FALSE(marked.load()) << "the stream was marked dead while two pins were held";
  marks.unpin();
  std::this_thread::sleep_for(a_while);
  EXPECT_FALSE(marked.load()) << "the stream was marked dead while a pin was held";
  marks.unpin();
  owner.join();
  EXPECT_TRUE(marked.load());
  EXPECT_FALSE(marks.alive());
}

TEST(StreamMarks, MarkingCapturingWaitsForEveryPin) {
  StreamMarks marks;
  CaptureState capture;
  ASSERT_TRUE(marks.pin());
  std::atomic<bool> marked{false};
  std::thread owner([&] {
    EXPECT_TRUE(marks.mark_capturing(&capture, std::this_thread::get_id()));
    marked = true;
  });
  std::this_thread::sleep_for(a_while);
  EXPECT_FALSE(marked.load()) << "the capture began while a pin was held";
  marks.unpin();
  owner.join();
  EXPECT_TRUE(marked.load());
  EXPECT_EQ(marks.capture(), &capture);
}

TEST(StreamMarks, APinTakenAfterACaptureMarkSeesIt) {
  StreamMarks marks;
  CaptureState capture;
  ASSERT_TRUE(marks.mark_capturing(&capture, std::this_thread::get_id()));
  ASSERT_TRUE(marks.pin()) << "a capturing stream is alive";
  EXPECT_TRUE(marks.capturing_while_pinned());
  marks.unpin();
}

TEST(StreamMarks, ASecondCaptureCannotMarkAMarkedStream) {
  StreamMarks marks;
  CaptureState first, second;
  std::thread::id first_owner = std::this_thread::get_id();
  std::thread::id second_owner;
  std::thread([&] { second_owner = std::this_thread::get_id(); }).join();
  ASSERT_TRUE(marks.mark_capturing(&first, first_owner));
  EXPECT_FALSE(marks.mark_capturing(&second, second_owner));
  EXPECT_EQ(marks.capture(), &first);
  EXPECT_EQ(marks.capture_owner(), first_owner) << "a refused mark must change nothing";
}

// A capture claims the stream before it records the stream's capture fence: no other
// capture can claim or mark it meanwhile, and the claim is not a mark (other threads still
// submit live). A dropped claim leaves the stream free.
TEST(StreamMarks, AClaimedStreamCannotBeClaimedOrMarkedByAnotherCapture) {
  StreamMarks marks;
  CaptureState first, second;
  ASSERT_TRUE(marks.claim_for_capture());
  EXPECT_EQ(marks.capture(), nullptr) << "a claim is not a mark";
  EXPECT_FALSE(marks.claim_for_capture());
  EXPECT_FALSE(marks.mark_capturing(&second, std::this_thread::get_id()));
  marks.mark_claimed_capturing(&first, std::this_thread::get_id());
  EXPECT_EQ(marks.capture(), &first);
  EXPECT_FALSE(marks.claim_for_capture());
  marks.unmark_capturing(&first);
  ASSERT_TRUE(marks.claim_for_capture());
  marks.drop_claim();
  EXPECT_TRUE(marks.mark_capturing(&second, std::this_thread::get_id())) << "a dropped claim leaves the stream free";
}

TEST(StreamMarks, UnmarkingClearsOnlyTheCaptureThatMarked) {
  StreamMarks marks;
  CaptureState marking, other;
  ASSERT_TRUE(marks.mark_capturing(&marking, std::this_thread::get_id()));
  marks.unmark_capturing(&other);
  EXPECT_EQ(marks.capture(), &marking);
  EXPECT_EQ(marks.capture_owner(), std::this_thread::get_id());
  marks.unmark_capturing(&marking);
  EXPECT_EQ(marks.capture(), nullptr);
  EXPECT_EQ(marks.capture_owner(), std::thread::id{});
  EXPECT_TRUE(marks.mark_capturing(&other, std::this_thread::get_id())) << "an unmarked stream can be captured again";
}

TEST(StreamMarks, OfTwoCapturesMarkingAtOnceExactlyOneWins) {
  for (int round = 0; round < 50; ++round) {
    StreamMarks marks;
    CaptureState a, b;
    std::atomic<int> go{0};
    bool a_won = false, b_won = false;
    std::thread ta([&] {
      ++go;
      while (go.load() < 2) std::this_thread::yield();
      a_won = marks.mark_capturing(&a, std::this_thread::get_id());
    });
    std::thread tb([&] {
      ++go;
      while (go.load() < 2) std::this_thread::yield();
      b_won = marks.mark_capturing(&b, std::this_thread::get_id());
    });
    ta.join();
    tb.join();
    ASSERT_NE(a_won, b_won) << "round " << round;
    EXPECT_EQ(marks.capture(), a_won ? &a : &b);
  }
}

// Threads pin and, seeing no mark, "submit work" (write a plain value the owner's side
// reads after its mark). A pin that saw no mark must be over before the owner's side goes
// on: else the owner's read races with the write (ThreadSanitizer reports it) and may see
// a half-done submission (counted here).
template <class Mark, class Marked>
void pinned_work_finishes_before_the_mark_returns(Mark mark, Marked seen_marked, StreamMarks& marks) {
  constexpr int threads = 4;
  std::atomic<bool> marked{false};
  std::atomic<int> started{0}, late{0};
  std::vector<long> submitted(threads, 0);  // each written by one thread while it holds a pin
  std::vector<std::thread> others;
  for (int t = 0; t < threads; ++t)
    others.emplace_back([&, t] {
      while (true) {
        if (!marks.pin()) return;
        if (seen_marked()) {
          marks.unpin();
          return;
        }
        if (++submitted[t] == 1) ++started;
        if (marked.load(std::memory_order_relaxed)) ++late;
        marks.unpin();
      }
    });
  while (started.load() < threads) std::this_thread::yield();  // every thread is submitting
  mark();
  marked = true;
  long total = 0;
  for (long n : submitted) total += n;  // safe only if every unmarked pin is over
  for (auto& t : others) t.join();
  EXPECT_EQ(late.load(), 0) << "work was submitted after the owner's side went on";
  EXPECT_GE(total, threads);
}

TEST(StreamMarks, WorkUnderAPinThatSawNoDeathMarkIsOverBeforeTheOwnerGoesOn) {
  StreamMarks marks;
  pinned_work_finishes_before_the_mark_returns([&] { marks.mark_dead(); }, [] { return false; }, marks);
}

TEST(StreamMarks, WorkUnderAPinThatSawNoCaptureMarkIsOverBeforeTheCaptureBegins) {
  StreamMarks marks;
  CaptureState capture;
  pinned_work_finishes_before_the_mark_returns(
      [&] { ASSERT_TRUE(marks.mark_capturing(&capture, std::this_thread::get_id())); },
      [&] { return marks.capturing_while_pinned(); }, marks);
}

}  // namespace
}  // namespace cudakit::detail
