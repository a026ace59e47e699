// Internal: what cudakit knows about a stream beyond its handle, shared by the Stream
// owner, its refs and every buffer tracker that remembers the stream (DESIGN 5).
//
// Why it exists: a tracker remembers "the last writer was stream W" long after the
// user may have destroyed W, and a raw handle value may be reused by a new stream.
// The state outlives the stream (reference counted), says whether the stream is still
// alive, and a Stream whose state some tracker still holds synchronizes before it is
// destroyed, so "dead" always means "its work has completed".
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "cudakit/detail/ref.hpp"
#include "cudakit/detail/stream_marks.hpp"
#include "cudakit/export.hpp"

namespace cudakit::detail {

void release_capture_fence(int device, CUevent fence) noexcept;  // src/stream/capture_state.cpp

// Note [Stale stream refs]. A StreamRef is a view: it may outlive its Stream, and its
// state pointer then names a state that may be freed. So a state's memory is never given
// back to the general heap: states live in slots that are reused only for states, and a
// slot's header (before the state) holds a generation that the owner bumps when it
// destroys or releases the stream. A StreamRef carries the generation it was made at (in
// padding it had anyway); a ref whose generation differs from its slot's names a stream
// that is gone, and reading the header through it is always reading valid memory. The
// check is one plain load and a compare: the tracked slow paths make it in every build
// (stream_state_of), every StreamRef call makes it in builds with assertions on (and with
// CUDAKIT_CHECK_STREAM_REFS), and the launch and tracking fast paths never do in release.
struct StreamStateSlotHeader {
  std::atomic<std::uint32_t> generation{0};
  StreamStateSlotHeader* next_free = nullptr;  // while the slot is free (stream_state.cpp)
};
inline constexpr std::size_t stream_state_header_bytes = 32;  // the header, padded to the state's alignment
static_assert(sizeof(StreamStateSlotHeader) <= stream_state_header_bytes);

struct CUDAKIT_API StreamState {
  CUstream handle = nullptr;
  int device = -1;
  // Whether the stream is alive and which cudakit capture holds it, and the pins of the
  // threads that use it without owning it (Note [Pins and marks], stream_marks.hpp). A
  // capture marks the stream before the driver begins it; the capture's own state knows
  // the capturing thread (DESIGN 9).
  StreamMarks marks;
  // Two counts in one word, so that a tracker's start or stop is one atomic operation
  // (every buffer does both; DESIGN 5's single-stream case must cost next to nothing):
  //   low 32 bits:  references, the owning Stream (if any) plus one per tracker slot;
  //   high 32 bits: tracker slots naming this stream (Stream::reset synchronizes first
  //                 when there are any, so that "dead" means "done").
  static constexpr std::uint64_t one_ref = 1, one_tracker = (std::uint64_t{1} << 32) | 1;
  std::atomic<std::uint64_t> counts{one_ref};
  std::uint32_t trackers(std::memory_order order = std::memory_order_acquire) const noexcept {
    return static_cast<std::uint32_t>(counts.load(order) >> 32);
  }
  // Recorded on this stream just before it entered its latest capture: it stands for
  // the work submitted before the capture. A stream outside the capture that must wait
  // for that work waits on this event, since recording on a capturing stream would be
  // captured instead (DESIGN 6). Created at the stream's first capture.
  std::atomic<CUevent> capture_fence{nullptr};
  // What cudakit last launched on this stream ("kernel 'saxpy'", "a graph executable"):
  // a kernel that faults (a bad address) is reported by a later synchronize or query, and
  // that error names it. A launch stores it with one relaxed store (no cost to measure);
  // the string is never freed, so a module unloaded since cannot leave it dangling.
  // Launches captured into a graph store it too (the stream then waits for no work of theirs).
  std::atomic<const char*> last_launch{nullptr};

  StreamState() = default;
  StreamState(const StreamState&) = delete;
  StreamState& operator=(const StreamState&) = delete;
  ~StreamState() {
    if (CUevent fence = capture_fence.load(std::memory_order_relaxed)) release_capture_fence(device, fence);
  }

  // In slots that are reused only for states (Note [Stale stream refs]).
  static void* operator new(std::size_t size);
  static void operator delete(void* p, std::size_t size) noexcept;
};
static_assert(alignof(StreamState) <= stream_state_header_bytes);

/// The generation of `s`'s slot: valid to read through any pointer that ever named a state.
inline std::uint32_t generation_of(const StreamState* s) noexcept {
  const auto* header =
      reinterpret_cast<const StreamStateSlotHeader*>(reinterpret_cast<const char*>(s) - stream_state_header_bytes);
  return header->generation.load(std::memory_order_relaxed);
}
/// The owner destroys or releases the stream: every StreamRef made before is stale.
CUDAKIT_API void end_generation(StreamState* s) noexcept;

inline void retain(StreamState* s) noexcept { s->counts.fetch_add(StreamState::one_ref, std::memory_order_relaxed); }
inline void release(StreamState* s) noexcept {
  if ((s->counts.fetch_sub(StreamState::one_ref, std::memory_order_acq_rel) & 0xffffffffu) == 1) delete s;
}
/// A tracker starts or stops naming this stream (a reference and a tracker slot at once).
inline void tracker_retain(StreamState* s) noexcept {
  s->counts.fetch_add(StreamState::one_tracker, std::memory_order_relaxed);
}
inline void tracker_release(StreamState* s) noexcept {
  if ((s->counts.fetch_sub(StreamState::one_tracker, std::memory_order_acq_rel) & 0xffffffffu) == 1) delete s;
}

/// Ref<StreamState> holds a plain reference (retain, release); a TrackerRef holds a
/// tracker slot, which also makes the stream's owner synchronize before destroying it.
struct TrackerSlot {
  static void retain_one(StreamState* s) noexcept { tracker_retain(s); }
  static void release_one(StreamState* s) noexcept { tracker_release(s); }
};
using TrackerRef = Ref<StreamState, TrackerSlot>;

/// A stream's resource for an error its synchronize or query reports: it names the
/// stream's last launch, if cudakit knows one (read only when the call failed).
inline const char* last_launch_of(const StreamState* s) noexcept {
  return s != nullptr ? s->last_launch.load(std::memory_order_relaxed) : nullptr;
}

/// The state of a stream cudakit did not create (a StreamRef built from a raw handle):
/// found or made in a registry by handle. Such a state never learns that its stream
/// died; using buffers on borrowed streams is the borrower's lifetime contract.
CUDAKIT_API StreamState* borrowed_stream_state(CUstream handle, int device);

/// Keeps a stream's handle valid, and keeps captures off it, while a thread that does not
/// own the stream makes a few driver calls on it: a buffer's free or cross-stream wait
/// reaches streams that other threads own and may destroy or capture at the same moment
/// (Note [Pins and marks]). False when the stream is dead or being destroyed: its owner
/// synchronized it first (a tracker names it), so there is nothing left to wait for.
class CUDAKIT_API PinnedStream {
 public:
  explicit PinnedStream(StreamState* s) noexcept : s_(s != nullptr && s->marks.pin() ? s : nullptr) {}
  ~PinnedStream() {
    if (s_ != nullptr) s_->marks.unpin();
  }
  PinnedStream(PinnedStream&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  PinnedStream(const PinnedStream&) = delete;
  PinnedStream& operator=(const PinnedStream&) = delete;
  PinnedStream& operator=(PinnedStream&&) = delete;
  explicit operator bool() const noexcept { return s_ != nullptr; }

  /// Whether the pinned stream is in a capture now. False: no capture begins on the stream
  /// while this pin is held, so work submitted to it now runs live and does not land in
  /// somebody's graph. True: the stream's live work is what came before its capture, its
  /// capture fence (recorded before the mark).
  bool capturing() const noexcept { return s_->marks.capturing_while_pinned(); }

 private:
  StreamState* s_;
};

}  // namespace cudakit::detail
