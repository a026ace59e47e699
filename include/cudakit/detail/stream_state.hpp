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
#include <cstdint>

namespace cudakit::detail {

struct StreamState {
  CUstream handle = nullptr;
  int device = -1;
  std::atomic<bool> alive{true};
  // References: the owning Stream (if any) plus one per tracker slot naming this stream.
  std::atomic<std::int32_t> refs{1};
  std::atomic<std::int32_t> tracker_refs{0};
  // Set while a cudakit capture scope captures this stream (graph.hpp).
  std::atomic<void*> capture{nullptr};
};

inline void retain(StreamState* s) noexcept { s->refs.fetch_add(1, std::memory_order_relaxed); }
inline void release(StreamState* s) noexcept {
  if (s->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete s;
}
/// A tracker starts or stops naming this stream.
inline void tracker_retain(StreamState* s) noexcept {
  retain(s);
  s->tracker_refs.fetch_add(1, std::memory_order_relaxed);
}
inline void tracker_release(StreamState* s) noexcept {
  s->tracker_refs.fetch_sub(1, std::memory_order_relaxed);
  release(s);
}

/// The state of a stream cudakit did not create (a StreamRef built from a raw handle):
/// found or made in a registry by handle. Such a state never learns that its stream
/// died; using buffers on borrowed streams is the borrower's lifetime contract.
StreamState* borrowed_stream_state(CUstream handle, int device);

}  // namespace cudakit::detail
