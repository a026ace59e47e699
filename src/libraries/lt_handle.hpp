// Internal: a pooled cuBLASLt handle (blas_lt.hpp's BlasLt holds one while it lives), with
// its workspace and its cache of planned matmuls; leased with lease_handle<LtSlot> and
// given back with return_handle (handle_pool.hpp).
#pragma once

#include <cublasLt.h>

#include <memory>
#include <unordered_map>

#include "libraries/cublas_api.hpp"
#include "libraries/lt_plan.hpp"
#include "libraries/pooled_handle.hpp"

namespace cudakit::detail {

/// One cuBLASLt handle with its workspace and plans. cuBLASLt takes the stream per call;
/// `stream` is the one it was last leased for, which the pool prefers to give it to again.
struct LtSlot : PooledHandle<LtSlot, cublasLtHandle_t, cublas::Entry::LtCreate, cublas::Entry::LtDestroy> {
  // Destroyed before the handle (members go before the base's destructor runs).
  std::unordered_map<LtPlanKey, std::unique_ptr<LtPlan>, LtPlanKeyHash> plans;
  // The plan of the last matmul, with its key: a matmul repeating the last one's shape
  // finds its plan with one comparison, without hashing.
  LtPlanKey last_key;
  LtPlan* last_plan = nullptr;
  // The shape checked last: a matmul repeating it skips the checks, as a Blas GEMM does.
  LastCheckedGemm last_gemm;
};

}  // namespace cudakit::detail
