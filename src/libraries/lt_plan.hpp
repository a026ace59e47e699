// Internal: a cuBLASLt matmul planned once per shape: its descriptors and the algorithm
// cublasLtMatmulAlgoGetHeuristic chose, kept in the handle's cache (blas_lt.hpp).
#pragma once

#include <cublasLt.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "cudakit/error.hpp"
#include "libraries/blas_error.hpp"
#include "libraries/blas_shapes.hpp"
#include "libraries/cublas_api.hpp"

namespace cudakit::detail {

/// Everything the algorithm choice depends on.
struct LtPlanKey {
  int m = 0, n = 0, k = 0, ld_first = 0, ld_second = 0, ldc = 0;  // cuBLAS's column-major form
  std::int32_t type = 0;                                         // cudaDataType
  std::int32_t compute = 0;                                      // cublasComputeType_t
  std::uint8_t op_first = 0, op_second = 0, epilogue = 0;
  // Each pointer's alignment in bytes (a power of two, at most 256): algorithms that need
  // more are left out for it.
  std::uint16_t align_first = 0, align_second = 0, align_c = 0, align_bias = 0;
  bool operator==(const LtPlanKey&) const = default;

  /// The key of the matmul `g` on `type` with `epilogue` (an Epilogue) and these pointers
  /// (cuBLAS's first and second operands, C, the bias or null).
  static LtPlanKey of(const ColumnMajorGemm& g, cudaDataType type, std::uint8_t epilogue, const void* first,
                      const void* second, const void* c, const void* bias) noexcept;
};

struct LtPlanKeyHash {
  std::size_t operator()(const LtPlanKey& key) const noexcept;
};

/// The alignment of a device address: the largest power of two dividing it, at most 256.
std::uint16_t alignment_of(const void* pointer) noexcept;

/// A matmul's descriptors and algorithm. Move-only; destroying it destroys the
/// descriptors (a failure is parked).
class LtPlan {
 public:
  /// Builds the descriptors for `key` and asks the heuristic for the best algorithm within
  /// `workspace_bytes`. `bias` (null without one) is set on the descriptor first: the
  /// heuristic reads its alignment. Throws BlasError naming the failed call and `operation`.
  LtPlan(const cublas::Api& api, cublasLtHandle_t handle, const LtPlanKey& key, std::size_t workspace_bytes,
         const void* bias, const Resource& resource, const std::function<std::string()>& operation);
  ~LtPlan();
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;

  cublasLtMatmulDesc_t desc() const noexcept { return desc_; }
  cublasLtMatrixLayout_t first() const noexcept { return first_; }    // our B (or A of cuBLAS)
  cublasLtMatrixLayout_t second() const noexcept { return second_; }  // our A
  cublasLtMatrixLayout_t c() const noexcept { return c_; }
  const cublasLtMatmulAlgo_t& algorithm() const noexcept { return algorithm_; }

  /// Points the descriptor at `bias` for the next matmul. Only a new pointer costs a
  /// library call (cublasLtMatmulDescSetAttribute): a matmul repeated on the same buffers
  /// leaves the descriptor as the heuristic saw it. Throws BlasError naming `operation`.
  template <class Describe>
  void use_bias(const void* bias, const Resource& resource, Describe&& operation) {
    if (bias == bias_) [[likely]]
      return;
    check_blas(api_.LtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
               cublas::Entry::LtMatmulDescSetAttribute, resource, std::forward<Describe>(operation));
    bias_ = bias;
  }

 private:
  void release() noexcept;
  const cublas::Api& api_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t first_ = nullptr, second_ = nullptr, c_ = nullptr;
  cublasLtMatmulAlgo_t algorithm_{};
  const void* bias_ = nullptr;  // the bias pointer the descriptor holds (null: none set)
};

}  // namespace cudakit::detail
