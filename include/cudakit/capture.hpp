// Stream capture (DESIGN 6 and 9).
//
//   std::optional<cudakit::Graph> g = cudakit::capture(stream, [&] { ...work on stream... });
//   cudakit::Graph g = cudakit::capture_nonempty(stream, [&] { ... });   // EmptyCapture if none
//
// The capture is a scope that ends on every exit path. When the work throws, the capture
// is ended, its partial graph destroyed, and the exception goes on; the stream is usable
// right after. A capture that recorded no node yields no graph (std::nullopt), or
// EmptyCapture from capture_nonempty.
//
// What a capture records:
// - Work on the stream, and on every stream that joins it: a stream joins by waiting for
//   a capturing stream (other.wait(captured_stream)) or for an event recorded on one.
//   At the end cudakit joins every such stream back into the capturing stream itself.
// - Every buffer the work uses (copies, fills, typed launches and raw launches that call
//   span.use(stream, access)): the graph keeps it alive, so the buffers may be dropped
//   right after the capture (DESIGN 4). Uses inside the capture do not change a buffer's
//   live tracking (its last writer stays the stream that really wrote it); a buffer
//   written on one captured stream and read on another gets an event record and wait
//   inside the capture, which the driver turns into a graph edge. Nothing recorded before
//   the capture is waited for inside it: ordering against earlier work on other streams
//   happens when the graph is launched (graph_exec.hpp).
// - Host callbacks (StreamRef::host_callback): the graph owns the callable and runs it at
//   every launch.
//
// What a capture refuses, with a CaptureError that says why (before the driver, so the
// capture stays valid where it can):
// - work submitted to a capturing stream from a thread other than the one that began the
//   capture (it would land in someone else's graph);
// - synchronizing or querying a capturing stream, synchronizing a context while any
//   capture is in progress, allocating a buffer on a capturing stream (an allocation would
//   happen once, not at each launch: allocate before the capture);
// - a capturing stream waiting for work outside its capture, and a buffer whose last use
//   was on a capturing stream being used on another stream that cannot wait for it;
// - driver capture errors (900 to 908) become CaptureErrors whose message says what went
//   wrong in words.
//
// Modes: CaptureMode::per_thread (the default; CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
// refuses unsafe calls on the capturing thread only; global refuses them on every
// thread; relaxed refuses none and lets another thread end the capture.
//
// Lazy set-up never breaks a capture: at its start a capture prepares what it may touch
// on the device (the library's context, the service stream, a warm event pool), and lazy
// set-up that still happens inside it runs in relaxed mode (capture_guard.hpp).
//
// Thread safety: a Capture scope belongs to the thread that began it.
#pragma once

#include <cuda.h>

#include <optional>
#include <type_traits>
#include <utility>

#include "cudakit/export.hpp"
#include "cudakit/graph.hpp"
#include "cudakit/stream.hpp"

namespace cudakit {

/// How a capture interacts with calls that are unsafe during capture.
enum class CaptureMode {
  /// CU_STREAM_CAPTURE_MODE_THREAD_LOCAL: unsafe calls on the capturing thread are refused.
  per_thread,
  /// CU_STREAM_CAPTURE_MODE_GLOBAL: unsafe calls on any thread (in the default interaction
  /// mode) are refused while the capture runs.
  global,
  /// CU_STREAM_CAPTURE_MODE_RELAXED: nothing is refused for being unsafe; the capture may
  /// be ended on another thread.
  relaxed,
};

namespace detail {
struct GraphCapture;
}

/// A capture in progress on one stream. Ends on every exit path: the destructor ends an
/// unfinished capture and discards its graph (never throwing).
class CUDAKIT_API Capture {
 public:
  /// Begins capturing `stream`. Throws CaptureError when the stream is already capturing.
  explicit Capture(StreamRef stream, CaptureMode mode = CaptureMode::per_thread);
  ~Capture();
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  /// Ends the capture: the graph, or none when nothing was captured. Throws CaptureError
  /// when the capture failed (the stream has left capture mode either way).
  std::optional<Graph> end();
  /// Ends the capture: the graph, or EmptyCapture when nothing was captured.
  Graph end_nonempty();

  /// Whether the capture is still running (not yet ended), the stream it captures, and
  /// its mode.
  bool active() const noexcept { return state_ != nullptr; }
  StreamRef stream() const noexcept { return stream_; }
  CaptureMode mode() const noexcept { return mode_; }

 private:
  StreamRef stream_;
  CaptureMode mode_;
  detail::GraphCapture* state_ = nullptr;
};

namespace detail {
template <class F>
void run_capture_work(F&& work, StreamRef stream) {
  if constexpr (std::is_invocable_v<F, StreamRef>) std::forward<F>(work)(stream);
  else std::forward<F>(work)();
}
}  // namespace detail

/// Captures what `work` submits to `stream` (`work()` or `work(stream)`). None when it
/// submitted nothing.
template <class F>
std::optional<Graph> capture(StreamRef stream, F&& work, CaptureMode mode = CaptureMode::per_thread) {
  Capture scope(stream, mode);
  detail::run_capture_work(std::forward<F>(work), stream);
  return scope.end();
}

/// Captures what `work` submits to `stream`; EmptyCapture when it submitted nothing.
template <class F>
Graph capture_nonempty(StreamRef stream, F&& work, CaptureMode mode = CaptureMode::per_thread) {
  Capture scope(stream, mode);
  detail::run_capture_work(std::forward<F>(work), stream);
  return scope.end_nonempty();
}

/// Whether the driver says `stream` is capturing now (any capture, cudakit's or not).
CUDAKIT_API bool is_capturing(StreamRef stream);

}  // namespace cudakit
