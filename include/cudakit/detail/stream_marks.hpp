// Internal: the marks a stream carries for the threads that use it without owning it
// (dead, capturing), and the pins those threads hold while they do.
//
// Note [Pins and marks]. A stream belongs to one thread, but buffers reach it from
// others: a buffer dropped on any thread is freed on a stream that used it, and a use on
// one stream waits for work recorded on another. Two things the owner's side does would
// make that work wrong: destroying the stream (the handle is then invalid, or another
// stream's) and beginning a capture on it (the work would land in that graph). So:
//
//   owner's side:  mark (dead, or capturing)  ->  wait until no pin is held  ->  act
//   other thread:  pin  ->  read the marks  ->  neither: submit the work  ->  unpin
//
// The mark, the pin and the two reads are sequentially consistent, so of the two sides at
// least one sees the other's write (a store followed by a load, on each side). Either the
// other thread sees the mark and stays off the stream (a dead stream's work completed; a
// capturing one is waited for through its capture fence), or the owner's side sees the
// pin and waits, and the work is submitted before the stream is destroyed or captured.
// The unpin releases what the pinned thread did to the stream; the wait acquires it. Pins
// are held for a few driver calls, so the wait is short; pinning never blocks.
//
// Captures mark under one mutex, so that of two captures begun on a stream at once one
// wins, whole. A capture first claims the stream (under that mutex), then records the
// stream's capture fence, then marks it: a second capture that finds the claim gives up
// before it records anything, so its fence cannot land in the winner's capture. A claim
// is not a mark: other threads still submit to the stream live meanwhile, as they may,
// since the driver has not begun capturing it. Readers that do not pin (the capturing thread itself, checks that refuse
// work on a capturing stream) read the marks with acquire loads.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

#include "cudakit/export.hpp"

namespace cudakit::detail {

struct CaptureState;

class CUDAKIT_API StreamMarks {
 public:
  StreamMarks() = default;
  StreamMarks(const StreamMarks&) = delete;
  StreamMarks& operator=(const StreamMarks&) = delete;

  // ---- read by any thread ----

  /// False once the owner destroys the stream (its work completed first).
  bool alive() const noexcept { return alive_.load(std::memory_order_acquire); }
  /// The cudakit capture the stream is in, or null.
  CaptureState* capture() const noexcept { return capture_.load(std::memory_order_acquire); }
  /// The thread that owns that capture (the capture's state may be freed the moment it
  /// ends; this stays readable).
  std::thread::id capture_owner() const noexcept { return capture_owner_.load(std::memory_order_acquire); }

  // ---- a thread that does not own the stream (PinnedStream) ----

  /// Pins the stream: true while it is alive, and then it stays alive until unpin().
  bool pin() noexcept {
    pins_.fetch_add(1, std::memory_order_seq_cst);
    if (alive_.load(std::memory_order_seq_cst)) return true;
    unpin();
    return false;
  }
  /// Whether a capture holds the stream, read while pinned: false means that no capture
  /// begins on it until unpin().
  bool capturing_while_pinned() const noexcept { return capture_.load(std::memory_order_seq_cst) != nullptr; }
  void unpin() noexcept { pins_.fetch_sub(1, std::memory_order_release); }

  // ---- the owner's side ----

  /// The owner is about to destroy the stream: marks it dead, then waits for the pins.
  void mark_dead() noexcept;
  /// Capture `c`, owned by thread `owner`, is about to capture the stream: marks it, then
  /// waits for the pins. False, changing nothing, when a capture holds or claims the
  /// stream already.
  bool mark_capturing(CaptureState* c, std::thread::id owner) noexcept;
  /// A capture is about to take the stream and must record something on it first (its
  /// capture fence): claims it, so that no other capture can take it meanwhile. False,
  /// changing nothing, when a capture holds or claims it already.
  bool claim_for_capture() noexcept;
  /// The claim becomes capture `c`'s mark (owned by thread `owner`); then waits for the pins.
  void mark_claimed_capturing(CaptureState* c, std::thread::id owner) noexcept;
  /// Drops a claim: the capture did not take the stream after all.
  void drop_claim() noexcept;
  /// Capture `c` lets go of the stream; nothing when another capture (or none) holds it.
  void unmark_capturing(const CaptureState* c) noexcept;

 private:
  void wait_for_pins() const noexcept;

  std::atomic<bool> alive_{true};
  std::atomic<std::int32_t> pins_{0};
  std::atomic<CaptureState*> capture_{nullptr};
  bool claimed_ = false;  // under the capture marks' mutex (claim_for_capture)
  std::atomic<std::thread::id> capture_owner_{};
};

}  // namespace cudakit::detail
