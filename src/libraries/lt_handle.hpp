// Internal: a pooled cuBLASLt handle (blas_lt.hpp's BlasLt holds one while it lives), with
// its workspace and its cache of planned matmuls.
#pragma once

#include <cublasLt.h>
#include <cuda.h>

#include <cstddef>
#include <memory>
#include <unordered_map>

#include "cudakit/device_buffer.hpp"
#include "cudakit/stream.hpp"
#include "libraries/cublas_api.hpp"
#include "libraries/exclusive_use.hpp"
#include "libraries/lt_plan.hpp"

namespace cudakit::detail {

/// One cuBLASLt handle with its workspace and plans. cuBLASLt takes the stream per call;
/// `stream` is the one it was last leased for, which the pool prefers to give it to again.
struct LtSlot {
  const cublas::Api* api = nullptr;
  cublasLtHandle_t handle = nullptr;
  int device = -1;
  CUstream stream = nullptr;
  DeviceBuffer<std::byte> workspace;
  std::unordered_map<LtPlanKey, std::unique_ptr<LtPlan>, LtPlanKeyHash> plans;
  // The plan of the last matmul, with its key: a matmul repeating the last one's shape
  // finds its plan with one comparison, without hashing.
  LtPlanKey last_key;
  LtPlan* last_plan = nullptr;
  ExclusiveUse use;
  LtSlot* next = nullptr;  // the pool's idle list

  LtSlot() = default;
  LtSlot(const LtSlot&) = delete;
  LtSlot& operator=(const LtSlot&) = delete;
  /// Destroys the plans, then the handle (failures are parked), then frees the workspace.
  ~LtSlot();
};

/// A cuBLASLt handle for `stream`'s device, from the pool or new. Throws EmptyHandle,
/// ContextPoisoned, FeatureUnavailable, BlasError or DriverError.
std::unique_ptr<LtSlot> lease_lt_slot(StreamRef stream, const char* operation);

/// Gives a leased handle back to the pool.
void return_lt_slot(std::unique_ptr<LtSlot> slot) noexcept;

}  // namespace cudakit::detail
