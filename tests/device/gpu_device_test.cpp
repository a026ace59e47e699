// The Gpu facade on a real GPU: several threads launching on one shared Gpu's stream, each
// on its own buffers, and an NVRTC-compiled kernel loaded and launched through the facade.
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cudakit/gpu.hpp"
#include "gpu_fixture.hpp"

#ifdef CUDAKIT_HAVE_TEST_KERNELS
#include "test_kernels.hpp"
#endif

namespace cudakit {
namespace {

using SaxpySig = void(float, const float*, float*, int);

std::vector<float> random_floats(std::mt19937& rng, std::size_t n) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Runs saxpy through `gpu` on fresh random data; "" when every element matches the host.
std::string saxpy_through(const Gpu& gpu, const Kernel<SaxpySig>& saxpy, unsigned seed, int n) {
  std::mt19937 rng(seed);
  auto hx = random_floats(rng, n), hy = random_floats(rng, n);
  const float a = 1.5f + float(seed % 7);
  auto x = gpu.upload(hx);
  auto y = gpu.upload(hy);
  gpu.launch(saxpy, grid_for(n, 256), 256, a, x, y, n);
  auto out = gpu.download(y);
  if (out.size() != std::size_t(n)) return "downloaded " + std::to_string(out.size()) + " elements";
  for (int i = 0; i < n; ++i) {
    float want = std::fma(a, hx[i], hy[i]);
    if (std::fabs(out[i] - want) > 1e-5f)
      return "at " + std::to_string(i) + ": " + std::to_string(out[i]) + " instead of " + std::to_string(want);
  }
  return {};
}

class GpuDeviceTest : public testing::GpuTest {};

#ifdef CUDAKIT_HAVE_TEST_KERNELS
TEST_F(GpuDeviceTest, ThreadsSharingOneGpuStreamEachGetTheirOwnResults) {
  Gpu gpu{device()};
  Module m = gpu.load(cudakit_kernels::test_fatbin());
  auto saxpy = m.kernel<SaxpySig>("saxpy");
  const int threads = 8, rounds = 20;
  std::vector<std::string> errors(threads);
  std::vector<std::thread> pool;
  unsigned base = std::random_device{}();
  std::printf("[          ] random seed %u\n", base);
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      try {
        for (int r = 0; r < rounds && errors[t].empty(); ++r)
          errors[t] = saxpy_through(gpu, saxpy, base + unsigned(t * rounds + r), 100'000 + 997 * t + r);
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  for (auto& th : pool) th.join();
  for (int t = 0; t < threads; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
  gpu.synchronize();
}
#endif

TEST_F(GpuDeviceTest, NvrtcCompiledSaxpyThroughTheFacade) {
  try {
    nvrtc_version();
  } catch (const CompilerUnavailable& e) {
    GTEST_SKIP() << e.what();
  }
  Gpu gpu{device()};
  const char* source = R"(
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
})";
  Module m = gpu.load(Program(source, "saxpy.cu").compile(gpu.device(), {.use_cache = false}));
  EXPECT_FALSE(m.jit_compiled());
  EXPECT_EQ(saxpy_through(gpu, m.kernel<SaxpySig>("saxpy"), std::random_device{}(), (1 << 20) + 3), "");
}

}  // namespace
}  // namespace cudakit
