// Internal: a row-major GEMM (blas.hpp) checked against its views and turned into the
// column-major call cuBLAS and cuBLASLt take.
//
// cuBLAS reads a row-major r×c matrix with row stride ld as the column-major c×r matrix
// with leading dimension ld: its transpose. So C = op(A)·op(B) in row-major is
// Cᵀ = op(B)ᵀ·op(A)ᵀ in column-major: cuBLAS's first operand is our B (transposed by cuBLAS
// exactly when ours is), its second our A, and its m and n are our n and m.
#pragma once

#include <cublas_api.h>
#include <library_types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "cudakit/blas.hpp"
#include "cudakit/device_span.hpp"

namespace cudakit::detail {

/// The element type's cuBLAS names.
template <class T>
struct BlasType;
template <>
struct BlasType<float> {
  static constexpr cudaDataType data = CUDA_R_32F;
  static constexpr const char* name = "float";
};
template <>
struct BlasType<double> {
  static constexpr cudaDataType data = CUDA_R_64F;
  static constexpr const char* name = "double";
};
template <>
struct BlasType<__half> {
  static constexpr cudaDataType data = CUDA_R_16F;
  static constexpr const char* name = "__half";
};
template <>
struct BlasType<__nv_bfloat16> {
  static constexpr cudaDataType data = CUDA_R_16BF;
  static constexpr const char* name = "__nv_bfloat16";
};

/// The sizes of the views a call got, in elements, and their devices.
struct ViewSizes {
  std::size_t a = 0, b = 0, c = 0;
  int a_device = -1, b_device = -1, c_device = -1;
  bool operator==(const ViewSizes&) const = default;
};

/// The ViewSizes of a call's three views (A, B, C; or A, x, y of a GEMV).
template <class T, class Out>
ViewSizes views_of(DeviceSpan<const T> a, DeviceSpan<const T> b, DeviceSpan<Out> c) noexcept {
  return {a.size(), b.size(), c.size(), a.device_ordinal(), b.device_ordinal(), c.device_ordinal()};
}

/// The column-major form of a row-major GEMM, in cuBLAS's argument order.
struct ColumnMajorGemm {
  cublasOperation_t op_first = CUBLAS_OP_N, op_second = CUBLAS_OP_N;  // on our B, on our A
  int m = 0, n = 0, k = 0;           // cuBLAS's: our n, m and k
  int ld_first = 1, ld_second = 1;   // our ldb and lda
  int ldc = 1;
  long long stride_first = 0, stride_second = 0, stride_c = 0;  // our B's, A's and C's
  int count = 1;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;  // compute_type() of the call
  bool empty = false;  // nothing to compute (m, n or the batch count is 0)
};

/// Checks `shape` (and `batch`, when given) on elements of `type` against the views: every
/// dimension at least 0 and within cuBLAS's 32-bit arguments, leading dimensions and strides
/// that fit, views that hold their matrices and lie on `device`, TF32 only on float. Throws
/// InvalidArgument naming each dimension; `operation` ("Blas::gemm") starts the message.
/// Allocates nothing unless it throws.
ColumnMajorGemm column_major_gemm(const char* operation, const Gemm& shape, const StridedBatch* batch,
                                  const ViewSizes& views, cudaDataType type, int device);

/// The GEMM a cuBLAS handle checked last, kept so that a call repeating it skips the
/// checks.
///
/// A GEMM costs a few microseconds of host time in cuBLAS, which evicts cudakit's code and
/// data between calls: the checks of column_major_gemm then cost about 100 ns a call on an
/// H200's host, more than a percent of a small GEMM. Most programs call one shape in a loop.
/// Equal inputs (shape, batch, view sizes and devices, types, device) give the same
/// ColumnMajorGemm, so a repeat reuses the one saved; anything else is checked afresh, and
/// a call that fails its checks leaves nothing saved. The handle's ExclusiveUse guard makes
/// the use single-threaded.
class LastCheckedGemm {
 public:
  /// column_major_gemm's result for these inputs: the saved one when they repeat the last
  /// call that passed, else checked now (throwing what column_major_gemm throws).
  const ColumnMajorGemm& check(const char* operation, const Gemm& shape, const StridedBatch* batch,
                               const ViewSizes& views, cudaDataType type, cudaDataType out_type, int device) {
    const Key key = key_of(shape, batch, views, type, out_type, device);
    if (!saved_ || !(key == key_)) [[unlikely]]
      check_afresh(operation, key, shape, batch, views, type, device);
    return gemm_;
  }

 private:
  // Every input the checks read (alpha and beta are not checked).
  struct Key {
    std::int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
    std::int64_t count = 0, stride_a = 0, stride_b = 0, stride_c = 0;
    ViewSizes views;
    cudaDataType type = CUDA_R_32F, out_type = CUDA_R_32F;
    int device = -1;
    bool transpose_a = false, transpose_b = false, tf32 = false, batched = false;
    bool operator==(const Key&) const = default;
  };
  static Key key_of(const Gemm& g, const StridedBatch* batch, const ViewSizes& views, cudaDataType type,
                    cudaDataType out_type, int device) noexcept {
    Key key{g.m, g.n, g.k, g.lda, g.ldb, g.ldc, 0, 0, 0, 0, views, type, out_type, device,
            g.transpose_a, g.transpose_b, g.tf32, batch != nullptr};
    if (batch != nullptr) {
      key.count = batch->count;
      key.stride_a = batch->stride_a;
      key.stride_b = batch->stride_b;
      key.stride_c = batch->stride_c;
    }
    return key;
  }
  void check_afresh(const char* operation, const Key& key, const Gemm& shape, const StridedBatch* batch,
                    const ViewSizes& views, cudaDataType type, int device);

  Key key_;
  ColumnMajorGemm gemm_;
  bool saved_ = false;
};

/// The same for a GEMV, as a GEMM with one column (x is our B, y our C).
ColumnMajorGemm column_major_gemv(const char* operation, const Gemv& shape, const ViewSizes& views, cudaDataType type,
                                  int device);

/// "gemm of float, C[m×n] = A[m×k]·Bᵀ[k×n] with m = 127, n = 65, k = 33, row-major, ..."
/// for error messages.
std::string describe_gemm(const char* what, const char* type, const Gemm& shape, const StridedBatch* batch);
std::string describe_gemv(const char* type, const Gemv& shape);

/// The compute type of a GEMM on T (fp32 accumulation, fp64 for double, TF32 on request).
/// Throws InvalidArgument for tf32 on another type than float.
cublasComputeType_t compute_type(cudaDataType type, bool tf32, const char* operation);

}  // namespace cudakit::detail
