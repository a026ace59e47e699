// The doctor's cuBLAS check: a bf16 GEMM through Blas and a GELU+bias matmul through
// BlasLt at odd sizes, each checked against the host on random data. Where cuBLAS is not
// installed it says "skipped, library not found", not "failed": cudakit works without it.
#include <cuda_bf16.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "command.hpp"
#include "cudakit/blas.hpp"
#include "cudakit/blas_lt.hpp"
#include "cudakit/cudakit.hpp"

namespace cudakit::tool {
namespace {

using bf16 = __nv_bfloat16;

// The first element of `got` that is off the host's x·w (+ bias, then GELU, when asked)
// by more than bf16's rounding allows; empty when none is.
std::string compare(const char* what, const std::vector<bf16>& got, const std::vector<bf16>& x,
                    const std::vector<bf16>& w, const std::vector<bf16>* bias, int m, int n, int k) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double sum = bias ? double(__bfloat162float((*bias)[j])) : 0.0, magnitude = std::fabs(sum);
      for (int p = 0; p < k; ++p) {
        double term = double(__bfloat162float(x[i * k + p])) * __bfloat162float(w[p * n + j]);
        sum += term;
        magnitude += std::fabs(term);
      }
      if (bias) sum = 0.5 * sum * (1.0 + std::tanh(0.7978845608028654 * (sum + 0.044715 * sum * sum * sum)));
      double g = __bfloat162float(got[i * n + j]);
      if (!(std::fabs(g - sum) <= 1.5e-2 * magnitude + 1e-3))
        return std::string(what) + " element (" + std::to_string(i) + ", " + std::to_string(j) + ") is " +
               std::to_string(g) + ", the host says " + std::to_string(sum);
    }
  return {};
}

CUDAKIT_DOCTOR_CHECK("cuBLAS", 85, true, [](const Device* d) -> std::string {
  BlasLibrary library;
  try {
    library = blas_library();
  } catch (const FeatureUnavailable&) {
    throw CheckSkipped("skipped, library not found (libcublas.so.13 or .12; CUDAKIT_LIBCUBLAS names one)");
  }
  Gpu gpu{*d};
  constexpr int m = 129, n = 65, k = 33;
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<bf16> hx(m * k), hw(k * n), hbias(n);
  for (auto* v : {&hx, &hw, &hbias})
    for (auto& e : *v) e = bf16(dist(rng));
  auto x = gpu.upload(hx), w = gpu.upload(hw), bias = gpu.upload(hbias);
  auto y = gpu.alloc<bf16>(m * n, uninitialized), h = gpu.alloc<bf16>(m * n, uninitialized);
  try {
    Blas blas(gpu.stream());
    blas.gemm(x, w, y, {.m = m, .n = n, .k = k});
    BlasLt lt(gpu.stream());
    lt.matmul(x, w, bias, h, {.m = m, .n = n, .k = k}, Epilogue::gelu_bias);
  } catch (const BlasError& e) {
    // cuBLAS's own kernels, not cudakit's: under a forced PTX JIT it cannot make a handle
    // (CUBLAS_STATUS_INTERNAL_ERROR from cublasCreate on an H200 with cuBLAS 13.1).
    const char* forced = std::getenv("CUDA_FORCE_PTX_JIT");
    if (forced != nullptr && std::string(forced) == "1")
      throw CheckSkipped(std::string("skipped under CUDA_FORCE_PTX_JIT=1, which cuBLAS itself does not run under: ") +
                         e.what());
    throw;
  }
  if (std::string why = compare("gemm", gpu.download(y), hx, hw, nullptr, m, n, k); !why.empty())
    return why + " (cuBLAS " + library.version + ", " + library.path + ")";
  if (std::string why = compare("GELU+bias matmul", gpu.download(h), hx, hw, &hbias, m, n, k); !why.empty())
    return why + " (cuBLASLt " + library.version + ", " + library.lt_path + ")";
  return {};
});

}  // namespace
}  // namespace cudakit::tool
