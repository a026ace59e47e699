// Internal: the state cudakit keeps for any stream a caller names.
#pragma once

#include "cudakit/detail/stream_state.hpp"
#include "cudakit/stream.hpp"

namespace cudakit::detail {

/// The state cudakit keeps for `stream`: its own for a stream cudakit made, a borrowed
/// stream's from the registry (borrowed_stream_state). EmptyHandle on an empty ref.
/// Inline: a buffer's allocation and every tracked use on a second stream ask for it.
inline StreamState* stream_state_of(StreamRef stream) {
  stream.require_handle("buffer use");
  if (StreamState* s = stream.state()) return s;
  return borrowed_stream_state(stream.handle(), stream.device_ordinal());
}

}  // namespace cudakit::detail
