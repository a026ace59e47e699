// Internal: a library call that allocates (cublasCreate, cublasLtCreate), made so that a
// capture in progress on this thread survives it (Note [Capture and unsafe calls] in
// capture_guard.hpp).
#pragma once

#include <utility>

#include "cudakit/detail/capture_counts.hpp"
#include "device/capture_tolerant_scope.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"

namespace cudakit::detail {

/// Runs `call` in relaxed capture mode. When the driver refuses that mode while a capture
/// in a strict mode is in progress on this thread, throws the driver's error (naming
/// cuThreadExchangeStreamCaptureMode) instead: the allocation would invalidate the capture,
/// and the library would report it as a failed allocation.
template <class Call>
decltype(auto) capture_tolerant(int device, Call&& call) {
  CaptureTolerantScope tolerant(device);
  if (tolerant.refusal() != CUDA_SUCCESS && unsafe_calls_would_invalidate_a_capture())
    check(tolerant.refusal(), driver::cu.ThreadExchangeStreamCaptureMode.name(), Resource::of_device(device));
  return std::forward<Call>(call)();
}

}  // namespace cudakit::detail
