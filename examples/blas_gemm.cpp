// A row-major GEMM through cuBLAS on a cudakit stream: y = x·W in bf16 with fp32
// accumulation (a linear layer's shape), and the same in float, each checked against the
// host on random data. The Blas declares what each GEMM reads and writes, so work on
// other streams orders itself against it like against any cudakit launch.
#include <cuda_bf16.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cudakit/blas.hpp"
#include "example_main.hpp"

namespace {

template <class T>
double value(T v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(v);
  else return v;
}

// y = x·W on the GPU, checked against the host; returns the number of wrong elements.
template <class T>
int multiply_and_check(cudakit::Gpu& gpu, cudakit::Blas& blas, int batch, int in, int out, double tolerance,
                       std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<T> hx(std::size_t(batch) * in), hw(std::size_t(in) * out);
  for (auto& v : hx) v = T(dist(rng));
  for (auto& v : hw) v = T(dist(rng));
  auto x = gpu.upload(hx);
  auto w = gpu.upload(hw);
  auto y = gpu.alloc<T>(std::size_t(batch) * out, cudakit::uninitialized);
  blas.gemm(x, w, y, {.m = batch, .n = out, .k = in});  // row-major: y[batch×out] = x[batch×in]·W[in×out]
  std::vector<T> got = gpu.download(y);

  int wrong = 0;
  for (int i = 0; i < batch; ++i)
    for (int j = 0; j < out; ++j) {
      double want = 0, magnitude = 0;
      for (int p = 0; p < in; ++p) {
        double term = value(hx[std::size_t(i) * in + p]) * value(hw[std::size_t(p) * out + j]);
        want += term;
        magnitude += std::fabs(term);
      }
      double g = value(got[std::size_t(i) * out + j]);
      if (!(std::fabs(g - want) <= tolerance * magnitude) && wrong++ < 5)
        std::printf("blas_gemm: y[%d][%d] is %.6g, the host says %.6g\n", i, j, g, want);
    }
  return wrong;
}

int run() {
  cudakit::Gpu gpu{0};
  std::string version;
  try {
    version = cudakit::blas_library().version;
  } catch (const cudakit::FeatureUnavailable&) {
    std::printf("blas_gemm: no cuBLAS: neither libcublas.so.13 nor .12 was found (set CUDAKIT_LIBCUBLAS)\n");
    return 2;
  }
  cudakit::Blas blas(gpu.stream());  // a cuBLAS handle bound to the Gpu's stream, with its workspace
  std::mt19937 rng(std::random_device{}());
  const int batch = 129, in = 1024, out = 1021;
  int wrong = multiply_and_check<__nv_bfloat16>(gpu, blas, batch, in, out, 1e-2, rng);
  wrong += multiply_and_check<float>(gpu, blas, batch, in, out, 2e-5, rng);
  if (wrong != 0) {
    std::printf("blas_gemm: FAILED: %d elements wrong\n", wrong);
    return 1;
  }
  std::printf("ok: cuBLAS %s row-major GEMMs y[%dx%d] = x[%dx%d]·W[%dx%d] in bf16 and float match the host\n",
              version.c_str(), batch, out, batch, in, in, out);
  return 0;
}

}  // namespace

int main() { return example::run("blas_gemm", run); }
