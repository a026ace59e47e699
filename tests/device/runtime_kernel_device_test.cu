// `__global__` functions compiled into this test program by nvcc, launched through
// cudakit's typed launch (interop/runtime_kernel.hpp): results against the host on fresh
// random data, their buffers ordered across streams and kept by graphs like a module
// kernel's.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <memory>
#include <random>
#include <vector>

#include "cudakit/cudakit.hpp"
#include "cudakit/interop/runtime_kernel.hpp"
#include "gpu_fixture.hpp"
#include "runtime_helpers.cuh"

namespace cudakit {
namespace {

using testing::fresh_values;
using testing::expect_held;
using testing::GpuTest;

// out = scale * in + offset, rounded after each operation (no fused multiply-add), so the
// host's result is the same to the bit.
__global__ void scale_offset(const float* in, float* out, float scale, float offset, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __fadd_rn(__fmul_rn(scale, in[i]), offset);
}

template <class T>
__global__ void fill_with(T* out, T value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}

// A host function: the runtime knows no kernel at its address.
void not_a_kernel(int) {}

float fresh_scalar() {
  std::mt19937 rng(std::random_device{}());
  return std::uniform_real_distribution<float>(0.5f, 4.0f)(rng);
}

class RuntimeKernelTest : public GpuTest {
 protected:
  static constexpr int n = (1 << 16) + 7;
};

TEST_F(RuntimeKernelTest, ATypedLaunchOfTheProgramsOwnKernelMatchesTheHost) {
  auto kernel = runtime_kernel(scale_offset, device());
  static_assert(std::is_same_v<decltype(kernel), Kernel<void(const float*, float*, float, float, int)>>);
  Stream s(device());
  auto in_values = fresh_values(n);
  const float scale = fresh_scalar(), offset = fresh_scalar();
  DeviceBuffer<float> in = upload(s, in_values), out(s, n, uninitialized);
  fill_pattern8(s, out, 0xBD);
  launch(s, kernel, LaunchConfig{grid_for(n, 256), 256}, in, out, scale, offset, n);
  auto got = download(s, out);
  for (int i = 0; i < n; ++i) ASSERT_EQ(got[i], scale * in_values[i] + offset) << "element " << i;
}

TEST_F(RuntimeKernelTest, ATemplateInstanceIsNamedByItsSignature) {
  auto fill_int = runtime_kernel<void(int*, int, int)>(fill_with<int>, device());
  Stream s(device());
  DeviceBuffer<int> out(s, n, uninitialized);
  const int value = static_cast<int>(std::random_device{}() % 1000) + 1;
  launch(s, fill_int, LaunchConfig{grid_for(n, 256), 256}, out, value, n);
  EXPECT_EQ(download(s, out), std::vector<int>(n, value));
  EXPECT_NE(fill_int.name().find("fill_with"), std::string::npos) << fill_int.name();
}

TEST_F(RuntimeKernelTest, ItsPointerArgumentsAreOrderedAcrossStreamsLikeAModuleKernels) {
  auto kernel = runtime_kernel(scale_offset, device());
  Stream a(device()), b(device());
  auto values = fresh_values(n);
  DeviceBuffer<float> source = upload(a, values), middle(a, n, uninitialized), out(b, n, uninitialized);
  fill_pattern8(a, middle, 0xBD);
  fill_pattern8(b, out, 0xBD);
  a.synchronize();
  b.synchronize();
  testing::StreamGate gate = testing::hold(a, device());
  launch(a, kernel, LaunchConfig{grid_for(n, 256), 256}, source, middle, 2.0f, 0.0f, n);  // writes middle on a
  launch(b, kernel, LaunchConfig{grid_for(n, 256), 256}, middle, out, 0.5f, 0.0f, n);     // reads it on b
  expect_held(a, "the gate holds a");
  gate.open();
  EXPECT_EQ(download(b, out), values);
}

TEST_F(RuntimeKernelTest, ACapturedLaunchKeepsItsBuffersAndReplays) {
  auto kernel = runtime_kernel(scale_offset, device());
  Stream s(device());
  auto values = fresh_values(n);
  auto in = std::make_unique<DeviceBuffer<float>>(upload(s, values));
  DeviceBuffer<float> out(s, n, uninitialized);
  fill_pattern8(s, out, 0xBD);
  Graph g = capture_nonempty(s, [&] { launch(s, kernel, LaunchConfig{grid_for(n, 256), 256}, *in, out, -1.0f, 3.0f, n); });
  in.reset();
  GraphExec exec = g.instantiate();
  for (int i = 0; i < 10; ++i) exec.launch(s);
  auto got = download(s, out);
  for (int i = 0; i < n; ++i) ASSERT_EQ(got[i], -values[i] + 3.0f) << "element " << i;
}

TEST_F(RuntimeKernelTest, AnAddressThatIsNoKernelIsRefusedClearly) {
  try {
    (void)runtime_kernel(not_a_kernel, device());
    ADD_FAILURE() << "a host function was taken for a kernel";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("knows no kernel at this address"), std::string::npos) << e.what();
  }
  (void)cudaGetLastError();  // the runtime's record of the refused call
}

}  // namespace
}  // namespace cudakit
