// Internal: the trampolines the driver calls for cudakit's host functions (stream.cpp).
#pragma once

#include <cuda.h>

namespace cudakit::detail {

/// The trampoline of a host callback that something else owns and may run many times (a
/// graph: its host nodes, and the host callbacks captured into it): runs the callback,
/// does not free it, and parks what it throws.
void CUDA_CB run_kept_host_callback(void* callback) noexcept;

}  // namespace cudakit::detail
