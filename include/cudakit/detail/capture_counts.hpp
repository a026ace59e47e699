// Internal: how many cudakit captures are in progress, and of which modes (DESIGN 6).
//
// Every layer reads these: the device layer refuses a context synchronize while any
// capture runs and wraps its lazy set-up (CaptureTolerantScope), the stream and memory
// layers skip every capture check while no capture runs, and the deferred queue waits
// while this thread's captures forbid unsafe calls. So they are kept at the lowest layer
// that reads them. A capture counts itself in when the driver began it and out when it
// ended. Each hot-path check is one relaxed load, so a program that never captures pays
// one compare.
#pragma once

#include <atomic>

#include "cudakit/export.hpp"

namespace cudakit::detail {

/// cudakit capture scopes in progress on any thread. While zero, the tracker's fast path
/// and every submission check need no capture check.
CUDAKIT_API extern std::atomic<int> active_captures;
/// cudakit captures begun on this thread whose mode forbids unsafe calls here (per_thread
/// and global mode). Atomic because a capture's end may run on another thread (a relaxed
/// capture, or a scope destroyed elsewhere), which then takes the count down here.
CUDAKIT_API extern thread_local constinit std::atomic<int> strict_captures_on_this_thread;
/// cudakit captures in global mode, on any thread.
CUDAKIT_API extern std::atomic<int> global_mode_captures;

/// Whether a potentially unsafe driver call made by this thread now would invalidate a
/// cudakit capture (Note [Capture and unsafe calls] in capture_guard.hpp). A capture begun
/// outside cudakit is not known here.
inline bool unsafe_calls_would_invalidate_a_capture() noexcept {
  return strict_captures_on_this_thread.load(std::memory_order_relaxed) != 0 ||
         global_mode_captures.load(std::memory_order_relaxed) != 0;
}

}  // namespace cudakit::detail
