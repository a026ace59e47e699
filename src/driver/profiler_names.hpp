// Internal: names in the profiler (Nsight Systems and any other NVTX tool), through the
// header-only NVTX 3 that ships with the CUDA toolkit.
//
// cudakit names what the user did, in its own NVTX domain "cudakit": its streams, each
// capture, the graph cache's captures, hits and updates, declared work, collectives and
// the bench's phases. A tool attaches itself the way NVTX defines: a library named by
// NVTX_INJECTION64_PATH, or one preloaded that exports the pre-injection entry point.
// Without one, every call below returns after one load of a flag read once, so the names
// stay on in release builds. CUDAKIT_NVTX=0 in the environment turns them off even with
// a tool.
//
// A range is pushed and popped on one thread (NVTX's push/pop ranges are per thread);
// every scope below ends on the thread that began it.
#pragma once

#include <cuda.h>

namespace cudakit::detail::profiler {

/// What cudakit marks. Each is one string registered once in the domain.
enum class Activity : unsigned char {
  capture,              // a Capture scope, begin to end
  graph_cache_capture,  // the graph cache captured a new graph for a key
  graph_cache_hit,      // the graph cache replayed an executable it had
  graph_cache_update,   // the graph cache updated an executable in place
  declared_work,        // outside code entered through declared work
  collective,           // an NCCL collective
  count_,
};

/// Whether cudakit emits names: a tool is attached and CUDAKIT_NVTX is not "0" (read once).
bool names_enabled() noexcept;

/// A range in the cudakit domain from construction to destruction, on this thread.
class Range {
 public:
  /// Opens the range of one activity.
  explicit Range(Activity activity) noexcept;
  /// Opens a range named by `text` (the bench's phases): the text is copied by NVTX.
  explicit Range(const char* text) noexcept;
  ~Range();
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;

 private:
  bool open_ = false;
};

/// Opens a range of `activity` on this thread, for a scope that a class of the public
/// headers holds (a Capture); `pop` closes the innermost one. Prefer Range.
void push(Activity activity) noexcept;
/// Closes the innermost range that `push` or a Range opened on this thread.
void pop() noexcept;

/// Gives a stream a name in the profiler ("cudakit stream 3 (device 0)").
void name_stream(CUstream stream, int device) noexcept;

}  // namespace cudakit::detail::profiler
