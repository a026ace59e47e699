// saxpy compiled at run time from a source string with NVRTC, loaded and launched through
// the Gpu facade, and checked against the host on random data.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "example_main.hpp"

namespace {

const char* const saxpy_source = R"(
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
)";

int run() {
  cudakit::Gpu gpu{0};
  cudakit::CompiledProgram compiled = cudakit::Program(saxpy_source, "saxpy.cu").compile(gpu.device(), {.use_cache = false});
  cudakit::Module module = gpu.load(compiled);
  auto saxpy = module.kernel<void(float, const float*, float*, int)>("saxpy");

  const int n = (1 << 24) + 7;
  const float a = 2.5f;
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> hx(n), hy(n);
  for (auto& v : hx) v = dist(rng);
  for (auto& v : hy) v = dist(rng);

  auto x = gpu.upload(hx);
  auto y = gpu.upload(hy);
  gpu.launch(saxpy, cudakit::grid_for(n, 256), 256, a, x, y, n);
  std::vector<float> out = gpu.download(y);

  if (out.size() != hy.size()) {
    std::printf("saxpy_nvrtc: FAILED: downloaded %zu elements instead of %d\n", out.size(), n);
    return 1;
  }
  int wrong = 0;
  for (int i = 0; i < n; ++i) {
    float want = std::fma(a, hx[i], hy[i]);
    if (!(std::fabs(out[i] - want) <= 1e-5f)) {
      if (wrong < 5) std::printf("saxpy_nvrtc: at %d: %.9g instead of %.9g\n", i, out[i], want);
      ++wrong;
    }
  }
  if (wrong != 0) {
    std::printf("saxpy_nvrtc: FAILED: %d of %d elements wrong\n", wrong, n);
    return 1;
  }
  std::printf("ok: NVRTC saxpy (%s, %s) matches the host on %d random elements\n", compiled.arch().c_str(),
              module.jit_compiled() ? "JIT" : "native", n);
  return 0;
}

}  // namespace

int main() { return example::run("saxpy_nvrtc", run); }
