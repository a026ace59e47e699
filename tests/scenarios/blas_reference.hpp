// Host references for the cuBLAS tests, shared by the unit tests on the fake cuBLAS
// (tests/unit/blas_fixture.hpp) and the device tests (tests/device/blas_device_test.cpp):
// element conversions, fresh random matrices, a row-major GEMM in double and the Lt
// epilogues.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

#include "cudakit/blas.hpp"
#include "cudakit/blas_lt.hpp"

namespace cudakit::testing {

/// double from any element type the wrappers take, and back.
template <class T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(v);
  else return static_cast<double>(v);
}
template <class T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, __half>) return __float2half(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16(static_cast<float>(v));
  else return static_cast<T>(v);
}

/// n values in [-1, 1) from `rng`.
template <class T>
std::vector<T> random_values(std::mt19937& rng, std::size_t n) {
  std::uniform_real_distribution<double> d(-1.0, 1.0);
  std::vector<T> v(n);
  for (auto& x : v) x = from_double<T>(d(rng));
  return v;
}

/// A row-major GEMM on the host, in double: C = alpha·op(A)·op(B) + beta·C, with the
/// leading dimensions of `g` (0: packed); C is not read when beta is 0. `magnitude`, when
/// given, receives Σ|alpha·a·b| + |beta·c| for each element of C: the scale of its
/// rounding error on a device.
template <class T>
void host_gemm(const Gemm& g, const std::vector<T>& a, const std::vector<T>& b, std::vector<double>& c,
               std::vector<double>* magnitude = nullptr) {
  const std::int64_t lda = g.lda ? g.lda : (g.transpose_a ? g.m : g.k);
  const std::int64_t ldb = g.ldb ? g.ldb : (g.transpose_b ? g.k : g.n);
  const std::int64_t ldc = g.ldc ? g.ldc : g.n;
  if (magnitude != nullptr) magnitude->assign(c.size(), 0.0);
  for (std::int64_t i = 0; i < g.m; ++i)
    for (std::int64_t j = 0; j < g.n; ++j) {
      double sum = 0, size = 0;
      for (std::int64_t p = 0; p < g.k; ++p) {
        double x = to_double(a[g.transpose_a ? p * lda + i : i * lda + p]);
        double y = to_double(b[g.transpose_b ? j * ldb + p : p * ldb + j]);
        sum += x * y;
        size += std::fabs(x * y);
      }
      double& out = c[i * ldc + j];
      const double old = g.beta != 0 ? g.beta * out : 0.0;
      out = g.alpha * sum + old;
      if (magnitude != nullptr) (*magnitude)[i * ldc + j] = std::fabs(g.alpha) * size + std::fabs(old);
    }
}

/// cuBLASLt's GELU (the tanh approximation).
inline double gelu(double v) { return 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); }

/// What `epilogue`'s activation makes of v (the bias already added).
inline double activation(double v, Epilogue epilogue) {
  if (epilogue == Epilogue::relu || epilogue == Epilogue::relu_bias) return v < 0 ? 0 : v;
  if (epilogue == Epilogue::gelu || epilogue == Epilogue::gelu_bias) return gelu(v);
  return v;
}

}  // namespace cudakit::testing
