// Internal: the memory a repeated library call reads, requested at the call's start.
//
// A cuBLAS or cuBLASLt call runs about 10 µs of the library's own host code, which evicts
// cudakit's few lines of per-call state from the nearer caches between calls. Read in
// program order, those lines miss one after another (a handle's slot, then its plan; a
// view, then its allocation's tracking; the stream's state); prefetched together at the
// call's start, their misses overlap. A prefetch is a hint: it never faults, and it costs
// a cycle where the line is already near.
#pragma once

#include <cstddef>

#include "cudakit/detail/allocation.hpp"
#include "cudakit/detail/stream_state.hpp"
#include "cudakit/stream.hpp"

namespace cudakit::detail {

/// Requests the cache lines of `bytes` bytes at `object` (nothing for null).
inline void prefetch_object(const void* object, std::size_t bytes) noexcept {
  const char* p = static_cast<const char*>(object);
  if (p == nullptr) return;
  for (std::size_t offset = 0; offset < bytes; offset += 64) __builtin_prefetch(p + offset);
}

/// Requests what ordering a call's buffers on `stream` reads: each view's allocation (its
/// tracking) and the stream's state.
template <class... Views>
inline void prefetch_tracking(const StreamRef& stream, const Views&... views) noexcept {
  prefetch_object(stream.state(), sizeof(StreamState));
  (prefetch_object(views.allocation(), sizeof(Allocation)), ...);
}

}  // namespace cudakit::detail
