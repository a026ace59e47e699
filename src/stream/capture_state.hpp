// Internal: the books cudakit keeps on a capture in progress, the part that streams and
// buffers read and write (DESIGN 6 and 9): the thread that owns the capture, the streams in
// it (each marked with it, Note [Pins and marks] in cudakit/detail/stream_marks.hpp), and
// per buffer the captured streams that wrote and read it, by which later uses inside the
// capture are ordered (Note [Tracking inside a capture] in src/memory/allocation.cpp).
//
// What a capture hands to its graph (the buffers and callables the graph keeps alive, the
// kernels it launched) belongs to the layer that makes graphs, which extends these books
// (src/graph/capture.cpp). Streams and buffers hand things to the graph through hooks that
// layer installs: a host callback here, a buffer in cudakit/detail/allocation.hpp.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cudakit/detail/capture_guard.hpp"
#include "cudakit/detail/ref.hpp"
#include "cudakit/detail/stream_state.hpp"
#include "cudakit/stream.hpp"

namespace cudakit::detail {

// A buffer's allocation (memory layer): the order books only key by its address.
struct Allocation;

struct CaptureState {
  std::thread::id owner;  // the thread that began the capture (DESIGN 9)
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
  int device = -1;
  std::uint64_t id = 0;  // the driver's capture id
  // The owner thread's strict_captures_on_this_thread while this capture counts there
  // (guarded by the registry's mutex: the owner thread may end first, capture_state.cpp).
  std::atomic<int>* strict_count = nullptr;
  // The streams in the capture, the origin first; each marked with this capture.
  std::vector<Ref<StreamState>> members;
  // Ordering inside the capture (the buffers' live tracking is left alone): per buffer,
  // the captured stream that wrote it last and those that read it since.
  struct Order {
    StreamState* writer = nullptr;
    std::vector<StreamState*> readers;
  };
  std::unordered_map<const Allocation*, Order> order;
};

/// For the unit tests only: called, when set, by capture_owned_here between its read of a
/// stream's capture and its read of that capture's owner (a test ends the capture there).
extern void (*after_capture_read_hook)();

/// The capture `s` is in, when this thread owns it; null when `s` is in no capture, or in
/// one that ended since it was looked at (the work then runs live, as the capture is over).
/// Throws the refusal of DESIGN 9 when another thread's capture holds `s` (`what()` names
/// the submission, made only then). A capture returned here stays valid while this thread
/// uses it: only its owner ends it, and that is this thread. Another thread's capture is
/// never touched: it may end, and be freed, at any moment.
template <class Words>
CaptureState* capture_owned_here(StreamState* s, Words&& what) {
  CaptureState* c = s->marks.capture();
  if (c == nullptr) return nullptr;
  if (after_capture_read_hook != nullptr) [[unlikely]]
    after_capture_read_hook();
  if (s->marks.capture_owner() == std::this_thread::get_id()) return c;
  refuse_submission_from_other_thread(s, what().c_str());
  return nullptr;  // the capture ended since: nothing to refuse
}

/// Hands `callback`, submitted to a stream of `capture`, to the capture's graph, which owns
/// it and runs it at every launch; returns the pointer the host function is given.
/// Installed by the layer that makes graphs (the only one that begins captures).
using CapturedCallbackHook = HostCallback* (*)(CaptureState* capture, std::unique_ptr<HostCallback> callback);
extern CapturedCallbackHook keep_callback_for_capture;

/// `s` enters capture `c` in cudakit's books, its capture fence (the work submitted to it
/// so far) recorded first (capture_state.cpp says in which order). False, having recorded
/// and changed nothing, when `s` is in a capture already or another capture claimed it.
bool join_capture(CaptureState* c, StreamState* s);
/// Undoes a join: the driver did not make `s` capture after all.
void leave_capture(CaptureState* c, StreamState* s) noexcept;
/// The CaptureError for a stream that is in a capture already (captures do not nest).
[[noreturn]] void throw_already_capturing(const StreamState* s);

/// Capture `c`, which the driver has begun (its id known), is found by its id from now on
/// (a stream that joins it through a raw event wait), and counts in the capture counts
/// (cudakit/detail/capture_counts.hpp) until forget_capture.
void register_capture(CaptureState* c);
/// Capture `c` has ended, or failed to begin: every member stream is unmarked, and `c` is
/// out of the registry and the counts, on whichever thread this runs. The caller frees `c`.
void forget_capture(CaptureState* c);

/// `to` waits for the work submitted to `from` so far (StreamRef::wait between two
/// streams while captures are in progress): joins `to` into `from`'s capture when `from`
/// is capturing, refuses what cannot be captured.
void wait_while_capturing(StreamRef to, StreamState* to_state, StreamRef from, StreamState* from_state);

/// An event was just recorded on `stream` while captures are in progress: when that was
/// inside this thread's capture, remembers it (a stream that waits on it then joins that
/// capture, and before_event_wait marks it first).
void note_event_record(StreamState* stream, CUevent event);

/// Before a stream that is not capturing waits for `event` while captures are in
/// progress: records its capture fence, in case the wait makes it join a capture. When
/// `event` was recorded inside this thread's capture, the stream joins it now, before the
/// driver's wait (decision 14: marked, then other threads' pins waited for), and that
/// capture is returned; else null.
CaptureState* before_event_wait(StreamRef stream, StreamState* state, CUevent event);
/// The wait failed: undoes before_event_wait's join, if it made one.
void undo_event_wait_join(StreamState* state, CaptureState* joined) noexcept;
/// After the wait: checks a join made before it against the driver (an event handle
/// reused since, or recorded again through the raw driver, joins nothing); otherwise, if
/// the driver now says the stream is in a cudakit capture, joins it.
void after_event_wait(StreamRef stream, StreamState* state, CaptureState* joined);

/// `to` waits for what `from` has submitted that it can wait for: nothing when `from` is
/// dead (its work completed), the capture fence when `from` is capturing (the work before
/// its capture; work inside it runs only when the graph is launched), otherwise all of it.
void wait_for_stream_work(CUstream to, int device, StreamState* from);

}  // namespace cudakit::detail
