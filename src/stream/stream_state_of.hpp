// Internal: the state cudakit keeps for any stream a caller names.
#pragma once

#include "cudakit/detail/stream_state.hpp"
#include "cudakit/error.hpp"
#include "cudakit/stream.hpp"

namespace cudakit::detail {

/// The state cudakit keeps for `stream`: its own for a stream cudakit made, a borrowed
/// stream's from the registry (borrowed_stream_state). EmptyHandle on an empty ref, and
/// on a ref whose Stream was destroyed (Note [Stale stream refs]).
/// Inline: a buffer's allocation and every tracked use on a second stream ask for it.
inline StreamState* stream_state_of(StreamRef stream) {
  stream.require_handle("buffer use");
  if (StreamState* s = stream.state()) {
    stream.require_live("buffer use");  // off the fast paths: checked in every build
    return s;
  }
  return borrowed_stream_state(stream.handle(), stream.device_ordinal());
}

/// The stream `s` is the state of, as errors name it.
inline Resource stream_resource_of(const StreamState* s) {
  return Resource::of(ResourceKind::stream, s->handle, s->device);
}

}  // namespace cudakit::detail
