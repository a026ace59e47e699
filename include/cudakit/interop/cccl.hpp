// Interop with libcu++'s cuda::stream_ref (CUDA 13 ships it under include/cccl; add
// that directory to the include path). Not included by cudakit.hpp: it pulls in the
// runtime API headers, and calling cuda::stream_ref::wait()/ready() needs cudart.
#pragma once

#include <cuda/stream_ref>

#include "cudakit/interop/runtime.hpp"

namespace cudakit {

/// A libcu++ view of the same stream.
inline cuda::stream_ref to_cccl(StreamRef stream) { return cuda::stream_ref(runtime_stream(stream)); }

/// A cudakit view of a libcu++ stream of device `device` (the legacy stream refused).
inline StreamRef from_cccl(cuda::stream_ref stream, int device) {
  return borrow_runtime_stream(reinterpret_cast<CUstream>(stream.get()), device);
}

}  // namespace cudakit
