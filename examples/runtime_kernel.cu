// A `__global__` function compiled into this program by nvcc, launched through cudakit's
// typed launch: its `const float*` parameter is read and its `float*` written, so cudakit
// orders the buffers across streams as for any cudakit kernel. Checked against the host
// on fresh random data.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "cudakit/interop/runtime_kernel.hpp"
#include "example_main.hpp"

namespace {

// y = a * x + b, rounded after each operation, so the host computes the same bits.
__global__ void affine(const float* x, float* y, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __fadd_rn(__fmul_rn(a, x[i]), b);
}

int run() {
  cudakit::Gpu gpu{0};
  auto kernel = cudakit::runtime_kernel(affine, gpu.device());  // Kernel<void(const float*, float*, float, float, int)>

  const int n = (1 << 22) + 3;
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> hx(n);
  for (auto& v : hx) v = dist(rng);
  const float a = dist(rng) + 2.0f, b = dist(rng);

  // The first launch writes y on the Gpu's stream; the second reads y on another stream,
  // which cudakit makes wait for the first (one event, one wait).
  cudakit::Stream other = gpu.new_stream();
  auto x = gpu.upload(hx);
  auto y = gpu.alloc<float>(n, cudakit::uninitialized);
  auto z = cudakit::DeviceBuffer<float>(other, n, cudakit::uninitialized);
  gpu.launch(kernel, cudakit::grid_for(n, 256), 256, x, y, a, b, n);
  cudakit::launch(other, kernel, cudakit::LaunchConfig{cudakit::grid_for(n, 256), 256}, y, z, 1.0f, 0.0f, n);
  std::vector<float> out = cudakit::download(other, z);

  int wrong = 0;
  for (int i = 0; i < n; ++i) {
    float ax = a * hx[i];
    float want = ax + b;
    if (out[i] != want) {
      if (wrong < 5) std::printf("runtime_kernel: at %d: %.9g instead of %.9g\n", i, out[i], want);
      ++wrong;
    }
  }
  if (wrong != 0) {
    std::printf("runtime_kernel: FAILED: %d of %d elements wrong\n", wrong, n);
    return 1;
  }
  std::printf("ok: the program's own kernel '%s', launched typed on two streams, matches the host on %d random "
              "elements\n",
              kernel.name().c_str(), n);
  return 0;
}

}  // namespace

int main() { return example::run("runtime_kernel", run); }
