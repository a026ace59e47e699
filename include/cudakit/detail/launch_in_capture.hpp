// Internal: what a kernel launch does while stream captures are in progress. A launch on a
// capturing stream is refused from any thread but the capture's (DESIGN 9), and the
// capture's graph keeps the kernel's module loaded for as long as the graph lives (DESIGN
// 4). Every launch pays one relaxed load of `active_captures` while no capture runs.
#pragma once

#include <atomic>

#include "cudakit/detail/capture_counts.hpp"
#include "cudakit/export.hpp"
#include "cudakit/stream.hpp"

namespace cudakit {
class Function;
}

namespace cudakit::detail {

/// A launch of `function` on `stream` while captures are in progress (see above).
CUDAKIT_API void note_launch_in_capture(StreamRef stream, const Function& function);

/// The cheap form, for every launch.
inline void note_launch(StreamRef stream, const Function& function) {
  if (active_captures.load(std::memory_order_relaxed) != 0) [[unlikely]]
    note_launch_in_capture(stream, function);
}

}  // namespace cudakit::detail
