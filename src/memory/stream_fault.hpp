// Internal: the error of a stream-ordered call that failed with a sticky code.
//
// A sticky code (a kernel's bad access, CUDA_ERROR_ILLEGAL_ADDRESS, ...) is reported by
// whichever driver call comes next on the context, long after the kernel's launch
// returned: an allocation, a copy, a wait. The call and the buffer it was about are not
// at fault. So such an error names the stream and what cudakit last launched on it, as
// a synchronize does; any other failure names the resource the call was about.
#pragma once

#include <cuda.h>

#include "cudakit/detail/stream_state.hpp"
#include "cudakit/error.hpp"
#include "cudakit/stream.hpp"

namespace cudakit::detail {

/// Throws for a failed `call` on `stream` (see above); returns on CUDA_SUCCESS.
inline void check_on_stream(CUresult r, const char* call, const Resource& resource, StreamRef stream) {
  if (r == CUDA_SUCCESS) [[likely]]
    return;
  if (is_sticky(r) && stream) {
    Resource on = Resource::of(ResourceKind::stream, stream.handle(), stream.device_ordinal());
    on.last_launch = last_launch_of(stream.state());
    check(r, call, on);
  }
  check(r, call, resource);
}

}  // namespace cudakit::detail
