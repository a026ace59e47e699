// Internal: pooled events (timing disabled) for cross-stream ordering (DESIGN 5).
// An event may go back to the pool as soon as a wait on it has been enqueued: the wait
// captures the event's state when it is enqueued, so re-recording it later is safe.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace cudakit::detail {

/// An event of device `device`'s primary context, from the pool or newly created.
CUevent acquire_pooled_event(int device);
/// Returns an event to the pool. Never throws.
void release_pooled_event(int device, CUevent event) noexcept;
/// Records a pooled event on `from` and makes `to` wait for it: `to` waits for all work
/// submitted to `from` so far. Both streams belong to `device`.
void order_after(CUstream to, CUstream from, int device);
/// How many cross-stream waits cudakit's ordering has made on this thread so far (an
/// event recorded on one stream and waited on another: buffer tracking, capture joins).
/// A programmatic dependent launch compares it between its preparation and its
/// submission: a hand-off between streams must stay a full dependency (docs/launch.md).
std::uint64_t cross_stream_waits_on_this_thread() noexcept;
/// One more cross-stream wait made on this thread (cross_stream_waits_on_this_thread):
/// order_after counts its own; a wait for a capture's fence is counted by its maker.
void count_cross_stream_wait() noexcept;

}  // namespace cudakit::detail
