// Modules, programs and launches on a real GPU: the embedded kernels
// against host references on fresh random data, every validation error on the real device,
// cluster and cooperative launches, NVRTC, template kernels through name expressions, a
// module from each format with its native/JIT report, cross-stream ordering of kernels,
// and the cost of a launch through cudakit beside the raw driver calls.
#include <algorithm>
#include <cmath>
#include <optional>
#include <cstdio>
#include <random>
#include <vector>

#include "gpu_fixture.hpp"

#ifdef CUDAKIT_HAVE_TEST_KERNELS
#include "test_kernels.hpp"

namespace cudakit {
namespace {

using testing::GpuTest;

template <class E, class F>
std::string message_of(F&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw the wrong exception type: " << e.what();
    return {};
  }
  ADD_FAILURE() << "threw nothing";
  return {};
}

// ---- helpers: stream-ordered copies through the driver, tracked like cudakit's own ----

template <class T>
void upload(StreamRef s, DeviceBuffer<T>& b, const std::vector<T>& host) {
  ASSERT_EQ(host.size(), b.size());
  b.span().use(s, Access::write);
  ASSERT_EQ(driver::cu.MemcpyHtoDAsync(b.device_pointer(), host.data(), b.size_bytes(), s.handle()), CUDA_SUCCESS);
}

template <class T>
std::vector<T> download(StreamRef s, const DeviceBuffer<T>& b) {
  std::vector<T> host(b.size());
  b.span().use(s, Access::read);
  EXPECT_EQ(driver::cu.MemcpyDtoHAsync(host.data(), b.device_pointer(), b.size_bytes(), s.handle()), CUDA_SUCCESS);
  s.synchronize();
  return host;
}

// NaN in every float: a kernel that skips an element leaves it visible.
template <class T>
void poison(StreamRef s, DeviceBuffer<T>& b) {
  b.span().use(s, Access::write);
  ASSERT_EQ(driver::cu.MemsetD8Async(b.device_pointer(), 0xff, b.size_bytes(), s.handle()), CUDA_SUCCESS);
}

std::mt19937 seeded_rng() {
  unsigned seed = std::random_device{}();
  std::printf("[          ] random seed %u\n", seed);
  return std::mt19937(seed);
}

std::vector<float> random_floats(std::mt19937& rng, std::size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

using SaxpySig = void(float, const float*, float*, int);

class LaunchDeviceTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    module_ = Module::load(device(), cudakit_kernels::test_fatbin());
    stream_.emplace(device());
  }
  void TearDown() override {
    stream_.reset();
    module_ = {};
    GpuTest::TearDown();
  }
  StreamRef stream() { return *stream_; }
  const Module& module() { return module_; }
  bool is_sm90() { return device().compute_capability() == ComputeCapability{9, 0}; }

  // Runs saxpy from `m` on fresh data and checks it against the host.
  void check_saxpy(const Module& m) {
    auto rng = seeded_rng();
    const int n = (1 << 20) + 3;
    auto hx = random_floats(rng, n), hy = random_floats(rng, n);
    const float a = 1.75f;
    DeviceBuffer<float> x(stream(), n, uninitialized), y(stream(), n, uninitialized);
    upload(stream(), x, hx);
    upload(stream(), y, hy);
    launch(stream(), m.kernel<SaxpySig>("saxpy"), LaunchConfig{grid_for(n, 256), 256}, a, x, y, n);
    auto out = download(stream(), y);
    for (int i = 0; i < n; ++i) ASSERT_NEAR(out[i], std::fma(a, hx[i], hy[i]), 1e-6f) << "at " << i;
  }

  Module module_;
  std::optional<Stream> stream_;
};

TEST_F(LaunchDeviceTest, SaxpyMatchesTheHostReference) { check_saxpy(module()); }

TEST_F(LaunchDeviceTest, ReduceSumMatchesTheHostReference) {
  auto rng = seeded_rng();
  const int n = 3 * (1 << 20) + 17;
  auto hin = random_floats(rng, n, 0.0f, 1.0f);
  DeviceBuffer<float> in(stream(), n, uninitialized), out(stream(), 1, uninitialized);
  upload(stream(), in, hin);
  poison(stream(), out);
  out.span().use(stream(), Access::write);
  ASSERT_EQ(driver::cu.MemsetD32Async(out.device_pointer(), 0, 1, stream().handle()), CUDA_SUCCESS);  // atomics add to it
  auto reduce = module().kernel<void(const float*, float*, int)>("reduce_sum");
  const unsigned block = 256;
  LaunchConfig c{.grid = static_cast<unsigned>(4 * device().multiprocessor_count()), .block = block,
                 .shared_memory_bytes = block * sizeof(float)};
  launch(stream(), reduce, c, in, out, n);
  double expected = 0;
  for (float v : hin) expected += v;
  float got = download(stream(), out)[0];
  EXPECT_NEAR(got, expected, expected * 1e-5) << "n = " << n;
}

TEST_F(LaunchDeviceTest, Stencil2dMatchesTheHostReference) {
  auto rng = seeded_rng();
  const int nx = 1000, ny = 701;
  auto hin = random_floats(rng, std::size_t(nx) * ny);
  DeviceBuffer<float> in(stream(), hin.size(), uninitialized), out(stream(), hin.size(), uninitialized);
  upload(stream(), in, hin);
  poison(stream(), out);
  auto stencil = module().kernel<void(const float*, float*, int, int)>("stencil_2d");
  launch(stream(), stencil, LaunchConfig{grid_for({nx, ny}, {16, 16}), {16, 16}}, in, out, nx, ny);
  auto h = download(stream(), out);
  for (int y = 0; y < ny; ++y)
    for (int x = 0; x < nx; ++x) {
      int i = y * nx + x;
      float e = (x == 0 || y == 0 || x == nx - 1 || y == ny - 1)
                    ? hin[i]
                    : 0.2f * (hin[i] + hin[i - 1] + hin[i + 1] + hin[i - nx] + hin[i + nx]);
      ASSERT_NEAR(h[i], e, 1e-6f) << "at (" << x << ", " << y << ")";
    }
}

TEST_F(LaunchDeviceTest, TemplateKernelsByTheirMangledNames) {
  const int n = 5000;
  DeviceBuffer<float> f(stream(), n, uninitialized);
  DeviceBuffer<int> i(stream(), n, uninitialized);
  poison(stream(), f);
  poison(stream(), i);
  launch(stream(), module().kernel<void(float*, float, int)>("_Z10fill_valueIfEvPT_S0_i"), {grid_for(n, 128), 128}, f,
         2.5f, n);
  launch(stream(), module().kernel<void(int*, int, int)>("_Z10fill_valueIiEvPT_S0_i"), {grid_for(n, 128), 128}, i, -7, n);
  for (float v : download(stream(), f)) ASSERT_EQ(v, 2.5f);
  for (int v : download(stream(), i)) ASSERT_EQ(v, -7);
  auto m = message_of<InvalidArgument>([&] { module().function("fill_value"); });
  EXPECT_NE(m.find("'fill_value' is a C++ kernel"), std::string::npos) << m;
}

TEST_F(LaunchDeviceTest, ModuleFromEachFormatWithItsJitReport) {
  Module fat = Module::load(device(), cudakit_kernels::test_fatbin(), {.jit_policy = JitPolicy::allow});
  Module cubin = Module::load(device(), cudakit_kernels::test_cubin());
  Module ptx = Module::load(device(), cudakit_kernels::test_ptx());
  std::printf("[          ] fatbin: %s\n[          ] cubin: %s\n[          ] PTX: %s\n", fat.report().describe().c_str(),
              cubin.report().describe().c_str(), ptx.report().describe().c_str());
  if (!ptx.report().jit_log.empty()) std::printf("[          ] PTX JIT log:\n%s\n", ptx.report().jit_log.c_str());
  EXPECT_EQ(fat.report().contents.format, ImageFormat::fatbin);
  EXPECT_EQ(cubin.report().contents.format, ImageFormat::cubin);
  EXPECT_EQ(ptx.report().contents.format, ImageFormat::ptx);
  EXPECT_TRUE(ptx.jit_compiled()) << "PTX is always JIT-compiled";
  if (is_sm90()) {
    EXPECT_EQ(fat.report().code, CodeKind::native) << "the fatbin has sm_90 machine code";
    EXPECT_EQ(fat.report().arch, 90);
    EXPECT_FALSE(cubin.jit_compiled());
    EXPECT_NO_THROW(Module::load(device(), cudakit_kernels::test_fatbin(), {.jit_policy = JitPolicy::refuse}));
  } else {
    std::printf("[          ] not sm_90 (%s): the fatbin runs %s\n", device().compute_capability().arch().c_str(),
                to_string(fat.report().code));
  }
  EXPECT_THROW(Module::load(device(), cudakit_kernels::test_ptx(), {.jit_policy = JitPolicy::refuse}), InvalidArgument);
  check_saxpy(fat);
  check_saxpy(ptx);
  if (is_sm90()) check_saxpy(cubin);
  if (driver::has(driver::EntryId::ModuleEnumerateFunctions)) EXPECT_GE(fat.kernel_names().size(), 15u);
}

TEST_F(LaunchDeviceTest, LibraryLoadsOnceForEveryDevice) {
  Library lib = Library::load(cudakit_kernels::test_fatbin());
  EXPECT_EQ(lib.code_for(device()).kind, is_sm90() ? CodeKind::native : CodeKind::jit);
  auto saxpy = lib.kernel<SaxpySig>(device(), "saxpy");
  const int n = 1000;
  DeviceBuffer<float> x(stream(), n, uninitialized), y(stream(), n, uninitialized);
  upload(stream(), x, std::vector<float>(n, 2.0f));
  upload(stream(), y, std::vector<float>(n, 1.0f));
  launch(stream(), saxpy, {grid_for(n, 256), 256}, 3.0f, x, y, n);
  for (float v : download(stream(), y)) ASSERT_EQ(v, 7.0f);
  if (driver::has(driver::EntryId::LibraryEnumerateKernels)) {
    auto names = lib.kernel_names();
    EXPECT_NE(std::find(names.begin(), names.end(), "saxpy"), names.end());
  }
}

// ---- validation on the real device: refused before the driver, with the limit named ----

#define EXPECT_REFUSED(statement, needle)                                              \
  do {                                                                                 \
    auto message_ = message_of<InvalidArgument>([&] { statement; });          \
    EXPECT_NE(message_.find(needle), std::string::npos) << message_;                   \
  } while (0)

TEST_F(LaunchDeviceTest, EveryValidationErrorOnTheRealDevice) {
  auto saxpy = module().kernel<SaxpySig>("saxpy");
  auto reduce = module().kernel<void(const float*, float*, int)>("reduce_sum");
  DeviceBuffer<float> x(stream(), 1024, zeroed), y(stream(), 1024, zeroed);
  auto max_threads = device().max_threads_per_block();
  auto max_block = device().max_block_dims();
  auto max_grid = device().max_grid_dims();

  EXPECT_REFUSED(launch(stream(), saxpy, {1, {0u}}, 1.0f, x, y, 1), "block (0, 1, 1) has a zero extent");
  EXPECT_REFUSED(launch(stream(), saxpy, {{0u}, 32}, 1.0f, x, y, 1), "grid (0, 1, 1) has a zero extent");
  EXPECT_REFUSED(launch(stream(), saxpy, {1, unsigned(max_block[0] + 1)}, 1.0f, x, y, 1),
                 "exceeds the device's maximum block dimension x of " + std::to_string(max_block[0]));
  EXPECT_REFUSED(launch(stream(), saxpy, {1, {1, 1, unsigned(max_block[2] + 1)}}, 1.0f, x, y, 1),
                 "exceeds the device's maximum block dimension z of " + std::to_string(max_block[2]));
  EXPECT_REFUSED(launch(stream(), saxpy, {1, {32, unsigned(max_threads / 16)}}, 1.0f, x, y, 1),
                 "more than the device's limit of " + std::to_string(max_threads) + " threads per block");
  EXPECT_REFUSED(launch(stream(), saxpy, {{1, unsigned(max_grid[1]) + 1}, 32}, 1.0f, x, y, 1),
                 "exceeds the device's maximum grid dimension y of " + std::to_string(max_grid[1]));
  EXPECT_REFUSED(launch(stream(), reduce, {.grid = 1, .block = 256, .shared_memory_bytes = 64 * 1024}, x, y, 1024),
                 "set LaunchConfig::allow_large_shared_memory = true");
  EXPECT_REFUSED(launch(stream(), reduce,
                        {.grid = 1, .block = 256,
                         .shared_memory_bytes = std::size_t(device().max_shared_memory_per_block_optin()) + 1,
                         .allow_large_shared_memory = true},
                        x, y, 1024),
                 "the device's opt-in maximum is");
  EXPECT_REFUSED(launch(stream(), saxpy, {.grid = 1, .block = 32, .priority = 1000}, 1.0f, x, y, 1),
                 "priority 1000 is outside the device's range");
  if (device().supports_clusters()) {
    EXPECT_REFUSED(launch(stream(), saxpy, {.grid = 10, .block = 32, .cluster = Dim3{4}}, 1.0f, x, y, 1),
                   "grid.x = 10 is not a multiple of cluster.x = 4");
    EXPECT_REFUSED(launch(stream(), saxpy, {.grid = 32, .block = 32, .cluster = Dim3{16}}, 1.0f, x, y, 1),
                   "more than the portable maximum of 8");
  }
  if (device().supports_cooperative_launch()) {
    int per_sm = max_active_blocks_per_multiprocessor(saxpy, 1024);
    unsigned too_many = unsigned(per_sm * device().multiprocessor_count() + 1);
    EXPECT_REFUSED(launch(stream(), saxpy, {.grid = too_many, .block = 1024, .cooperative = true}, 1.0f, x, y, 1),
                   "a cooperative launch needs every block resident at once");
  }
  // Signatures are checked against the driver's parameter info (CUDA 12.4+).
  if (driver::has(driver::EntryId::FuncGetParamInfo)) {
    EXPECT_REFUSED(module().kernel<void(float, const float*, float*)>("saxpy"), "the kernel takes 4 parameters");
    EXPECT_REFUSED(module().kernel<void(double, const float*, float*, int)>("saxpy"),
                   "parameter #1 is 4 bytes in the kernel, 8 in the signature");
    EXPECT_REFUSED(launch(stream(), module().function("saxpy"), {1, 32}, 1.0f, x, y), "the launch passes 3");
  }
  // Nothing reached the driver: the stream is healthy and a good launch works.
  launch(stream(), saxpy, {1, 32}, 1.0f, x, y, 32);
  stream().synchronize();
}

TEST_F(LaunchDeviceTest, LargeSharedMemoryWhenAllowed) {
  auto reduce = module().kernel<void(const float*, float*, int)>("reduce_sum");
  const int n = 1 << 16;
  DeviceBuffer<float> in(stream(), n, uninitialized), out(stream(), 1, zeroed);
  upload(stream(), in, std::vector<float>(n, 1.0f));
  std::size_t shared = std::min<std::size_t>(100 * 1024, device().max_shared_memory_per_block_optin());
  launch(stream(), reduce,
         {.grid = 8, .block = 256, .shared_memory_bytes = shared, .allow_large_shared_memory = true}, in, out, n);
  EXPECT_EQ(download(stream(), out)[0], float(n));
  EXPECT_GE(reduce.attribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES), int(shared));
}

TEST_F(LaunchDeviceTest, ClusterLaunchGivesEachBlockItsRankInTheCluster) {
  if (!device().supports_clusters()) GTEST_SKIP() << "no thread-block clusters on " << device().compute_capability().arch();
  auto ids = module().kernel<void(unsigned*)>("cluster_ids");
  for (unsigned cluster : {2u, 4u}) {
    const unsigned blocks = 64;
    DeviceBuffer<unsigned> out(stream(), blocks, uninitialized);
    poison(stream(), out);
    launch(stream(), ids, {.grid = blocks, .block = 32, .cluster = Dim3{cluster}}, out);
    auto h = download(stream(), out);
    for (unsigned b = 0; b < blocks; ++b) ASSERT_EQ(h[b], b % cluster) << "block " << b << ", cluster " << cluster;
    EXPECT_GT(max_active_clusters(ids, {.grid = blocks, .block = 32, .cluster = Dim3{cluster}}), 0);
  }
  EXPECT_GE(max_potential_cluster_size(ids, {.grid = 64, .block = 32}), 8);
}

TEST_F(LaunchDeviceTest, CooperativeLaunchOfAFullyResidentGrid) {
  if (!device().supports_cooperative_launch()) GTEST_SKIP() << "no cooperative launch";
  auto saxpy = module().kernel<SaxpySig>("saxpy");
  const unsigned block = 256;
  int per_sm = max_active_blocks_per_multiprocessor(saxpy, block);
  ASSERT_GT(per_sm, 0);
  const unsigned grid = unsigned(per_sm * device().multiprocessor_count());
  const int n = int(grid * block);
  DeviceBuffer<float> x(stream(), n, uninitialized), y(stream(), n, uninitialized);
  upload(stream(), x, std::vector<float>(n, 1.0f));
  upload(stream(), y, std::vector<float>(n, 2.0f));
  launch(stream(), saxpy, {.grid = grid, .block = block, .cooperative = true, .priority = 0}, 3.0f, x, y, n);
  for (float v : download(stream(), y)) ASSERT_EQ(v, 5.0f);
  auto s = suggested_block_size(saxpy);
  EXPECT_GT(s.block_size, 0);
  EXPECT_GT(s.min_grid_size, 0);
}

TEST_F(LaunchDeviceTest, ReadOnAnotherStreamWaitsForTheSlowWriter) {
  // A writes x slowly; B reads x. Tracking (DESIGN 5) makes B wait; without it B would read
  // the poison.
  auto slow_copy = module().kernel<void(const float*, float*, int, long long)>("slow_copy");
  auto saxpy = module().kernel<SaxpySig>("saxpy");
  Stream a(device()), b(device());
  const int n = 4096;
  DeviceBuffer<float> src(a, n, uninitialized), x(a, n, uninitialized), y(b, n, zeroed);
  upload(a, src, std::vector<float>(n, 3.0f));
  poison(a, x);
  launch(a, slow_copy, {grid_for(n, 256), 256}, src, x, n, 20'000'000LL);
  launch(b, saxpy, {grid_for(n, 256), 256}, 2.0f, x, y, n);
  for (float v : download(b, y)) ASSERT_EQ(v, 6.0f);
  a.synchronize();
}

// ---- NVRTC on the device ----

class NvrtcDeviceTest : public LaunchDeviceTest {
 protected:
  void SetUp() override {
    LaunchDeviceTest::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    try {
      nvrtc_version();
    } catch (const CompilerUnavailable& e) {
      GTEST_SKIP() << e.what();
    }
  }
};

TEST_F(NvrtcDeviceTest, CompiledProgramRunsAndFailuresCarryTheLog) {
  const char* source = R"(
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
})";
  CompiledProgram cubin = Program(source, "saxpy.cu").compile(device(), {.use_cache = false});
  EXPECT_EQ(cubin.arch(), device().compute_capability().arch());
  Module m = Module::load(device(), cubin);
  EXPECT_FALSE(m.jit_compiled());
  check_saxpy(m);
  CompiledProgram ptx = Program(source, "saxpy.cu").compile(device(), {.output = ProgramOutput::ptx, .use_cache = false});
  Module from_ptx = Module::load(device(), ptx);
  EXPECT_TRUE(from_ptx.jit_compiled());
  check_saxpy(from_ptx);
  try {
    Program("extern \"C\" __global__ void k() { undefined_call(); }", "bad.cu").compile(device(), {.use_cache = false});
    FAIL() << "compiled";
  } catch (const CompileError& e) {
    EXPECT_NE(e.log().find("undefined_call"), std::string::npos) << e.log();
  }
}

TEST_F(NvrtcDeviceTest, TemplateKernelsThroughNameExpressions) {
  Program p(R"(
template <typename T>
__global__ void fill_value(T* out, T value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
})",
            "fill.cu");
  p.name_expression("fill_value<float>").name_expression("fill_value<int>");
  Module m = Module::load(device(), p.compile(device(), {.use_cache = false}));
  const int n = 3000;
  DeviceBuffer<float> f(stream(), n, uninitialized);
  DeviceBuffer<int> i(stream(), n, uninitialized);
  poison(stream(), f);
  poison(stream(), i);
  launch(stream(), m.kernel<void(float*, float, int)>("fill_value<float>"), {grid_for(n, 128), 128}, f, -1.25f, n);
  launch(stream(), m.kernel<void(int*, int, int)>("fill_value<int>"), {grid_for(n, 128), 128}, i, 99, n);
  for (float v : download(stream(), f)) ASSERT_EQ(v, -1.25f);
  for (int v : download(stream(), i)) ASSERT_EQ(v, 99);
}

}  // namespace
}  // namespace cudakit

#endif  // CUDAKIT_HAVE_TEST_KERNELS
