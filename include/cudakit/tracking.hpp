// Cross-stream ordering of buffers (DESIGN 5).
//
// Every device allocation carries a small tracker. Work that reads or writes the
// allocation tells it so before the work is submitted (copies and fills do; typed
// kernel launches do from their pointer parameters: `const T*` reads, `T*` writes).
//
//   - While an allocation is used on one stream only, nothing happens: stream order
//     suffices. The check is two loads and a compare.
//   - From its first use on a second stream it is tracked: a reader waits for the last
//     writer; a writer waits for the last writer and for every reader on every stream.
//     Each wait is one pooled event, recorded on the earlier stream at the moment of
//     the hand-off (not after every use), plus one cuStreamWaitEvent.
//   - A stream that already waited for the current write reads again for free, without
//     a lock: data uploaded once and read from many streams and threads (weights,
//     tables) costs one event per reading stream, not one per launch.
//   - After a write that waited for everything, the allocation is single-stream again.
//   - Freeing waits for every stream that used the allocation.
//
// ManualOrdering switches tracking off on the calling thread for a scope, for code that
// orders by hand (events, synchronizes). Inside it cudakit adds no event or wait.
#pragma once

#include <cstdint>

#include "cudakit/export.hpp"

namespace cudakit {

/// How a piece of work touches a buffer.
enum class Access : std::uint8_t {
  read,   ///< the work only reads: it waits for the last writer, and readers run side by side
  write,  ///< the work may write: it waits for the last writer and every reader since
};

namespace detail {
CUDAKIT_API extern thread_local int manual_ordering_depth;
}

/// While alive, cudakit does not order buffers across streams on this thread: the code
/// in the scope orders its work by hand. Nests. Graph capture still records the
/// buffers a capture touches (their lifetime is never manual).
class CUDAKIT_API ManualOrdering {
 public:
  /// Turns ordering off on this thread until the matching destructor (depth counted).
  ManualOrdering() noexcept { ++detail::manual_ordering_depth; }
  ~ManualOrdering() { --detail::manual_ordering_depth; }
  ManualOrdering(const ManualOrdering&) = delete;
  ManualOrdering& operator=(const ManualOrdering&) = delete;
};

/// Whether cudakit orders buffers across streams on this thread now.
inline bool tracking_enabled() noexcept { return detail::manual_ordering_depth == 0; }

}  // namespace cudakit
