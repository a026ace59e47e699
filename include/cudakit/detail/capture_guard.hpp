// Internal: what cudakit's submission paths check while stream captures are in progress
// (DESIGN 6 and 9). Every check starts with one relaxed load of `active_captures`
// (capture_counts.hpp), so a program that never captures pays one compare per checked call.
//
// Note [Capture and unsafe calls]. A capture in thread-local or global mode makes the
// driver refuse "potentially unsafe" calls (cuMemAlloc, cuMemFree, module loads, context
// synchronization, ...) on the capturing thread (global: on every thread) and invalidate
// the capture. cudakit therefore
//   - refuses what cannot work inside a capture before the driver sees it (synchronizing a
//     capturing stream, allocating on a capturing stream), with a CaptureError that says
//     why, so the capture stays valid;
//   - defers frees that would be unsafe now (a buffer released inside the capture) to the
//     next safe point (deferred.hpp: the capture's end, the next launch or allocation);
//   - runs lazy set-up that may happen inside a capture (the event pool growing, the
//     service stream, the library's context retain, module loads) in a
//     CaptureTolerantScope (src/device/capture_tolerant_scope.hpp), which switches this
//     thread to relaxed mode for the call.
#pragma once

#include <cuda.h>

#include <atomic>

#include "cudakit/detail/capture_counts.hpp"
#include "cudakit/export.hpp"
#include "cudakit/detail/stream_state.hpp"
#include "cudakit/stream.hpp"

namespace cudakit::detail {

/// DESIGN 9: throws CaptureError naming both threads when `state`'s stream is being
/// captured by a cudakit capture scope that another thread owns. `what` names the
/// submission ("cuLaunchHostFunc", "a use of buffer 0x...").
CUDAKIT_API void refuse_submission_from_other_thread(StreamState* state, const char* what);

/// The cheap form of the check above, for every cudakit submission path.
inline void check_capturing_thread(StreamState* state, const char* what) {
  if (active_captures.load(std::memory_order_relaxed) == 0 || state == nullptr) [[likely]]
    return;
  if (state->marks.capture() != nullptr) refuse_submission_from_other_thread(state, what);
}

}  // namespace cudakit::detail
