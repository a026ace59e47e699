// Internal: the workspace a pooled cuBLAS or cuBLASLt handle owns (pooled_handle.hpp makes
// the handle itself).
//
// cuBLAS allocates a workspace of its own when none is set, and inside a capture that
// allocation would become part of the graph (or fail). cudakit gives every handle one from
// cudakit memory up front: cublasSetWorkspace for cuBLAS, the matmul's workspace argument
// for cuBLASLt. It is allocated on the device's service stream (never on the user's stream,
// which may be capturing), and every call declares it written, so a handle that moves to
// another stream orders its next call after its last one.
#pragma once

#include <cstddef>

#include "cudakit/device_buffer.hpp"

namespace cudakit::detail {

/// The workspace size cuBLAS recommends for the device: 32 MiB from compute capability 9.0
/// (Hopper) on, 4 MiB before.
std::size_t blas_workspace_bytes(int device);

/// A workspace for a handle on `device`, allocated on its service stream; safe to call
/// while a stream of this thread is capturing.
DeviceBuffer<std::byte> make_blas_workspace(int device);

}  // namespace cudakit::detail
