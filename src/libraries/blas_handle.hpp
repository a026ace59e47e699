// Internal: a pooled cuBLAS handle (blas.hpp's Blas holds one while it lives).
#pragma once

#include <cublas_api.h>
#include <cuda.h>

#include <cstddef>
#include <memory>

#include "cudakit/device_buffer.hpp"
#include "cudakit/stream.hpp"
#include "libraries/cublas_api.hpp"
#include "libraries/exclusive_use.hpp"

namespace cudakit::detail {

/// One cuBLAS handle with its workspace, bound to one stream at a time.
struct BlasSlot {
  const cublas::Api* api = nullptr;
  cublasHandle_t handle = nullptr;
  int device = -1;
  CUstream stream = nullptr;  // bound with cublasSetStream and the workspace set; null: not bound
  DeviceBuffer<std::byte> workspace;
  ExclusiveUse use;
  BlasSlot* next = nullptr;  // the pool's idle list

  BlasSlot() = default;
  BlasSlot(const BlasSlot&) = delete;
  BlasSlot& operator=(const BlasSlot&) = delete;
  /// Destroys the handle (a failure is parked), then frees the workspace.
  ~BlasSlot();
};

/// A handle for `stream`'s device, from the pool or new, bound to `stream` with its
/// workspace set. Throws EmptyHandle, ContextPoisoned, FeatureUnavailable, BlasError or
/// DriverError; `operation` names the caller in messages.
std::unique_ptr<BlasSlot> lease_blas_slot(StreamRef stream, const char* operation);

/// Gives a leased handle back to the pool (it stays bound to its stream).
void return_blas_slot(std::unique_ptr<BlasSlot> slot) noexcept;

}  // namespace cudakit::detail
