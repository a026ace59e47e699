// Internal: a scope that lets lazy set-up run beside a capture (DESIGN 6, Note [Capture
// and unsafe calls] in cudakit/detail/capture_guard.hpp).
#pragma once

#include <cuda.h>

#include "cudakit/detail/capture_counts.hpp"

namespace cudakit::detail {

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
class CaptureTolerantScope {
 public:
  // Inline: a library call wraps itself in this scope on every call, while no capture
  // runs, and out-of-line code would be one more cold call after the library's own.
  explicit CaptureTolerantScope(int device = -1) : device_(device) {
    if (active_captures.load(std::memory_order_relaxed) != 0) [[unlikely]]
      relax();
  }
  ~CaptureTolerantScope() {
    if (exchanged_) [[unlikely]]
      restore();
  }
  CaptureTolerantScope(const CaptureTolerantScope&) = delete;
  CaptureTolerantScope& operator=(const CaptureTolerantScope&) = delete;

  /// The driver's code when it refused the switch to relaxed mode (the work then runs in
  /// the thread's own mode); CUDA_SUCCESS otherwise. Set-up that would certainly invalidate
  /// a capture in a strict mode (a library allocating) throws it instead of going on.
  CUresult refusal() const noexcept { return refusal_; }

 private:
  void relax();    // this thread's mode becomes relaxed (or refusal_ says why not)
  void restore() noexcept;  // the mode from before relax()

  CUresult refusal_ = CUDA_SUCCESS;
  bool exchanged_ = false;
  CUstreamCaptureMode previous_ = CU_STREAM_CAPTURE_MODE_GLOBAL;
  int device_ = -1;
};

}  // namespace cudakit::detail
