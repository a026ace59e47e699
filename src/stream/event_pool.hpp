// Internal: pooled events (timing disabled) for cross-stream ordering (DESIGN 5).
// An event may go back to the pool as soon as a wait on it has been enqueued: the wait
// captures the event's state when it is enqueued, so re-recording it later is safe.
#pragma once

#include <cuda.h>

namespace cudakit::detail {

/// An event of device `device`'s primary context, from the pool or newly created.
CUevent acquire_pooled_event(int device);
/// Returns an event to the pool. Never throws.
void release_pooled_event(int device, CUevent event) noexcept;
/// Records a pooled event on `from` and makes `to` wait for it: `to` waits for all work
/// submitted to `from` so far. Both streams belong to `device`.
void order_after(CUstream to, CUstream from, int device);

}  // namespace cudakit::detail
