// Internal: what cudakit's submission paths check while stream captures are in progress
// (DESIGN 6 and 9). Every check starts with one relaxed load of `active_captures`, so a
// program that never captures pays one compare per checked call.
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
//     CaptureTolerantScope, which switches this thread to relaxed mode for the call.
#pragma once

#include <cuda.h>

#include <atomic>

#include "cudakit/export.hpp"
#include "cudakit/detail/stream_state.hpp"
#include "cudakit/stream.hpp"

namespace cudakit {
class Function;
}

namespace cudakit::detail {

/// cudakit capture scopes in progress on any thread (also declared in allocation.hpp).
CUDAKIT_API extern std::atomic<int> active_captures;
/// cudakit captures begun on this thread whose mode forbids unsafe calls here (per_thread
/// and global mode). Atomic because a capture's end may run on another thread (a relaxed
/// capture, or a scope destroyed elsewhere), which then takes the count down here.
CUDAKIT_API extern thread_local constinit std::atomic<int> strict_captures_on_this_thread;
/// cudakit captures in global mode, on any thread.
CUDAKIT_API extern std::atomic<int> global_mode_captures;

/// Whether a potentially unsafe driver call made by this thread now would invalidate a
/// cudakit capture. (A capture begun outside cudakit is not known here.)
inline bool unsafe_calls_would_invalidate_a_capture() noexcept {
  return strict_captures_on_this_thread.load(std::memory_order_relaxed) != 0 ||
         global_mode_captures.load(std::memory_order_relaxed) != 0;
}

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

/// A kernel launch on `stream` while captures are in progress: refuses it from another
/// thread than the capture's (DESIGN 9), and makes the capture's graph keep the kernel's
/// module loaded (DESIGN 4).
CUDAKIT_API void note_launch_in_capture(StreamRef stream, const Function& function);

/// The cheap form, for every launch: one relaxed load while no capture is in progress.
inline void note_launch(StreamRef stream, const Function& function) {
  if (active_captures.load(std::memory_order_relaxed) != 0) [[unlikely]]
    note_launch_in_capture(stream, function);
}

/// While alive, this thread's capture interaction mode is relaxed (when a cudakit capture
/// is in progress anywhere; otherwise it does nothing and costs one load). Wrap lazy
/// set-up that may first run inside a capture: creating pooled events, the service
/// stream, retaining the primary context, loading a module. Never wrap cudakit's own work
/// submitted to a capturing stream: relaxed mode only lets calls that are not
/// stream-ordered through. (A library call is the exception: cuBLAS may set itself up on a
/// handle's first call, which relaxed mode keeps out of the graph; its kernels are captured
/// as always.)
///
/// If the driver refuses the mode change, the work runs in the thread's own mode (a call
/// that mode forbids then invalidates the capture, which its end reports); a sticky error
/// is thrown instead (DriverError, poisoning `device` when one is given), since nothing
/// after it can work. A sticky error restoring the mode at the end is parked (a
/// destructor cannot throw), which poisons `device` for the calls after it.
class CUDAKIT_API CaptureTolerantScope {
 public:
  explicit CaptureTolerantScope(int device = -1);
  ~CaptureTolerantScope();
  CaptureTolerantScope(const CaptureTolerantScope&) = delete;
  CaptureTolerantScope& operator=(const CaptureTolerantScope&) = delete;

  /// The driver's code when it refused the switch to relaxed mode (the work then runs in
  /// the thread's own mode); CUDA_SUCCESS otherwise. Set-up that would certainly invalidate
  /// a capture in a strict mode (a library allocating) throws it instead of going on.
  CUresult refusal() const noexcept { return refusal_; }

 private:
  CUresult refusal_ = CUDA_SUCCESS;
  bool exchanged_ = false;
  CUstreamCaptureMode previous_ = CU_STREAM_CAPTURE_MODE_GLOBAL;
  int device_ = -1;
};

}  // namespace cudakit::detail
