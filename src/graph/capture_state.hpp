// Internal: the state of one cudakit capture, the capture mark (StreamMarks) of every
// stream in it (DESIGN 6 and 9).
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cudakit/capture.hpp"
#include "cudakit/detail/allocation.hpp"
#include "cudakit/detail/function_state.hpp"
#include "cudakit/detail/ref.hpp"
#include "cudakit/detail/stream_state.hpp"
#include "graph/graph_resources.hpp"

namespace cudakit::detail {

struct CaptureState {
  std::thread::id owner;  // the thread that began the capture (DESIGN 9)
  CaptureMode mode = CaptureMode::per_thread;
  int device = -1;
  std::uint64_t id = 0;  // the driver's capture id
  // The owner thread's strict_captures_on_this_thread while this capture counts there
  // (guarded by the registry's mutex: the owner thread may end first, capture.cpp).
  std::atomic<int>* strict_count = nullptr;
  // The streams in the capture, the origin first; each marked with this capture.
  std::vector<Ref<StreamState>> members;
  Ref<GraphResources> resources;  // handed to the graph at the end
  // Ordering inside the capture (the buffers' live tracking is left alone): per buffer,
  // the captured stream that wrote it last and those that read it since.
  struct Order {
    StreamState* writer = nullptr;
    std::vector<StreamState*> readers;
  };
  std::unordered_map<Allocation*, Order> order;
  // The kernels launched in the capture (their state), each kept once by the graph.
  std::unordered_set<const FunctionState*> kernels;
};

/// The state cudakit keeps for `stream` (a borrowed stream's from the registry).
StreamState* stream_state_of(StreamRef stream);

/// `s` enters capture `c` in cudakit's books (capture.cpp says in which order). False,
/// changing nothing, when `s` is in a capture already.
bool join_capture(CaptureState* c, StreamState* s);
/// Undoes a join: the driver did not make `s` capture after all.
void leave_capture(CaptureState* c, StreamState* s) noexcept;

/// The capture hook: records a buffer use on a captured stream (tracking.cpp calls it).
void capture_use(CaptureState* capture, Allocation* allocation, StreamRef stream, Access access);

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
