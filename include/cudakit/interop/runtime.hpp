// Interop with the CUDA runtime API and the libraries built on it (cuBLAS, CUB/Thrust,
// PyTorch): they all take a cudaStream_t, which is the driver's CUstream under another
// name (driver_types.h: `typedef struct CUstream_st* cudaStream_t`).
//
// cudakit uses the primary context, the one the runtime API uses, so memory and
// streams pass both ways without a context switch. After the runtime API changes the
// current device or context behind cudakit's back, call forget_cached_current_context().
#pragma once

#include <cuda.h>

#include "cudakit/error.hpp"
#include "cudakit/stream.hpp"

namespace cudakit {

/// The stream as the runtime API and its libraries take it: pass the result wherever a
/// cudaStream_t is expected (cublasSetStream, cub::DeviceReduce::Sum, thrust::cuda::par.on).
/// Throws EmptyHandle for an empty ref rather than handing out the legacy stream.
inline CUstream runtime_stream(StreamRef stream) {
  stream.require_handle("runtime_stream");
  return stream.handle();
}

/// Borrows a stream the runtime API (or PyTorch: torch.cuda.current_stream().cuda_stream)
/// created. Refuses the legacy and per-thread default streams (0, 1, 2), which cudakit
/// never uses (DESIGN 1). cudakit does not destroy a borrowed stream.
inline StreamRef borrow_runtime_stream(CUstream stream, int device) {
  if (stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD)
    throw InvalidArgument("borrow_runtime_stream: the legacy or per-thread default stream cannot be used by cudakit; "
                          "create a non-blocking stream (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking))");
  return StreamRef(stream, device);
}

}  // namespace cudakit
