// The owner's side of Note [Pins and marks] (cudakit/detail/stream_marks.hpp).
#include "cudakit/detail/stream_marks.hpp"

#include <mutex>

namespace cudakit::detail {

namespace {
std::mutex capture_marks_mutex;  // every capture mark is made and cleared under it
}  // namespace

void StreamMarks::wait_for_pins() const noexcept {
  while (pins_.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
}

void StreamMarks::mark_dead() noexcept {
  alive_.store(false, std::memory_order_seq_cst);
  wait_for_pins();
}

bool StreamMarks::mark_capturing(CaptureState* c, std::thread::id owner) noexcept {
  if (!claim_for_capture()) return false;
  mark_claimed_capturing(c, owner);
  return true;
}

bool StreamMarks::claim_for_capture() noexcept {
  std::lock_guard lock(capture_marks_mutex);
  if (claimed_ || capture_.load(std::memory_order_relaxed) != nullptr) return false;
  claimed_ = true;
  return true;
}

void StreamMarks::mark_claimed_capturing(CaptureState* c, std::thread::id owner) noexcept {
  {
    std::lock_guard lock(capture_marks_mutex);
    claimed_ = false;
    capture_owner_.store(owner, std::memory_order_release);
    capture_.store(c, std::memory_order_seq_cst);
  }
  wait_for_pins();
}

void StreamMarks::drop_claim() noexcept {
  std::lock_guard lock(capture_marks_mutex);
  claimed_ = false;
}

void StreamMarks::unmark_capturing(const CaptureState* c) noexcept {
  std::lock_guard lock(capture_marks_mutex);
  if (capture_.load(std::memory_order_relaxed) != c) return;
  capture_owner_.store(std::thread::id{}, std::memory_order_release);
  capture_.store(nullptr, std::memory_order_release);
}

}  // namespace cudakit::detail
