// Launches against the fake driver: compile-time argument
// binding, argument packing, tracking of the buffers a launch reads and writes, untyped
// launches checked against parameter info, every validation error and its message, launch
// attributes, and the hot path's driver calls.
#include <gtest/gtest.h>

#include <thread>
#include <utility>

#include "cudakit/launch.hpp"
#include "cudakit/module.hpp"
#include "cudakit/occupancy.hpp"
#include "fake_fixture.hpp"
#include "fake_kernels.hpp"

namespace cudakit {
namespace {

using driver::EntryId;
using testing::message_of;

// ---- compile-time binding (DESIGN 5: constness of the parameter decides read or write) ----

static_assert(kernel_accepts_v<void(const float*), DeviceBuffer<float>&>);
static_assert(kernel_accepts_v<void(const float*), const DeviceBuffer<float>&>);
static_assert(kernel_accepts_v<void(float*), DeviceBuffer<float>&>);
static_assert(!kernel_accepts_v<void(float*), const DeviceBuffer<float>&>, "a const buffer is never written");
static_assert(kernel_accepts_v<void(float*), DeviceSpan<float>>);
static_assert(kernel_accepts_v<void(const float*), DeviceSpan<float>>);
static_assert(kernel_accepts_v<void(const float*), DeviceSpan<const float>>);
static_assert(!kernel_accepts_v<void(float*), DeviceSpan<const float>>, "a read-only view is never written");
static_assert(!kernel_accepts_v<void(float*), DeviceBuffer<int>&>, "element types must match");
static_assert(!kernel_accepts_v<void(const double*), DeviceSpan<float>>);
static_assert(kernel_accepts_v<void(float*), float*>);
static_assert(kernel_accepts_v<void(const float*), float*>);
static_assert(!kernel_accepts_v<void(float*), const float*>);
static_assert(!kernel_accepts_v<void(float*), int*>);
static_assert(kernel_accepts_v<void(float*), std::nullptr_t>);
static_assert(!kernel_accepts_v<void(int*), int>, "a value where a pointer goes");
static_assert(!kernel_accepts_v<void(int), DeviceBuffer<int>&>, "a buffer where a value goes");
// Values convert only without loss.
static_assert(kernel_accepts_v<void(float), float>);
static_assert(kernel_accepts_v<void(double), float>);
static_assert(kernel_accepts_v<void(long long), int>);
static_assert(kernel_accepts_v<void(int), short>);
static_assert(kernel_accepts_v<void(int), bool>);
static_assert(!kernel_accepts_v<void(float), double>, "no silent double -> float");
static_assert(!kernel_accepts_v<void(int), float>, "no silent float -> int");
static_assert(!kernel_accepts_v<void(float), int>, "int -> float can round");
static_assert(!kernel_accepts_v<void(int), long long>);
static_assert(!kernel_accepts_v<void(unsigned), int>);
static_assert(!kernel_accepts_v<void(int), std::size_t>);
static_assert(!kernel_accepts_v<void(bool), int>);
// The count must match.
static_assert(!kernel_accepts_v<void(int)>);
static_assert(!kernel_accepts_v<void(int), int, int>);
static_assert(kernel_accepts_v<void()>);

using testing::SaxpySig;
using testing::FillSig;
using SumSig = void(const float*, float*, int);

class LaunchTest : public testing::FakeDriverTest {
 protected:
  void SetUp() override {
    FakeDriverTest::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    image_ = testing::standard_image(extra_kernels());
    module_ = Module::load(Device::get(0), fake::fatbin_image(image_, {80, 90}, {}));
    stream_.emplace(Device::get(0));
  }
  void TearDown() override {
    module_ = {};
    stream_.reset();
    FakeDriverTest::TearDown();
  }
  virtual std::vector<fake::FakeKernel> extra_kernels() {
    fake::FakeKernel heavy{"heavy", fake::params<float*>(), {}};
    heavy.attributes[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK] = 256;
    heavy.attributes[CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES] = 1024;
    fake::FakeKernel clustered{"clustered", fake::params<float*>(), {}};
    clustered.attributes[CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH] = 2;
    fake::FakeKernel must_cluster{"must_cluster", fake::params<float*>(), {}};
    must_cluster.attributes[CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET] = 1;
    return {heavy, clustered, must_cluster, {"plain", fake::params<float*>(), {}}};
  }

  StreamRef stream() { return *stream_; }
  const Module& module() { return module_; }
  static std::vector<float> host(const DeviceBuffer<float>& b) {
    const float* p = b.data();  // fake device memory is host memory
    return {p, p + b.size()};
  }
  int launches_made() { return fake().calls(EntryId::LaunchKernel) + fake().calls(EntryId::LaunchKernelEx); }

  int image_ = -1;
  Module module_;
  std::optional<Stream> stream_;
};

TEST_F(LaunchTest, SaxpyComputesWithTheArgumentsItWasGiven) {
  auto saxpy = module().kernel<SaxpySig>("saxpy");
  auto fill = module().kernel<FillSig>("fill");
  const int n = 1000;
  DeviceBuffer<float> x(stream(), n, uninitialized), y(stream(), n, uninitialized);
  launch(stream(), fill, LaunchConfig{grid_for(n, 256), 256}, x, 3.0f, n);
  launch(stream(), fill, LaunchConfig{grid_for(n, 256), 256}, y, 1.0f, n);
  launch(stream(), saxpy, LaunchConfig{grid_for(n, 256), 256}, 2.0f, x, y, n);
  stream().synchronize();
  for (float v : host(y)) ASSERT_EQ(v, 7.0f);
  auto last = fake::launches().back();
  EXPECT_EQ(last.kernel, "saxpy");
  EXPECT_EQ(last.grid[0], 4u);
  EXPECT_EQ(last.block[0], 256u);
  EXPECT_FALSE(last.through_ex) << "a plain launch is one cuLaunchKernel";
}

TEST_F(LaunchTest, AMovedFromBufferIsRefusedBeforeTheDriverAndAnEmptyOnePassesNull) {
  auto fill = module().kernel<FillSig>("fill");
  DeviceBuffer<float> a(stream(), 8, zeroed);
  DeviceBuffer<float> b = std::move(a);
  const int before = launches_made();
  // NOLINTBEGIN(bugprone-use-after-move): the point
  auto m = message_of<EmptyHandle>([&] { launch(stream(), fill, LaunchConfig{1, 8}, a, 1.0f, 8); });
  EXPECT_NE(m.find("use of a moved-from DeviceBuffer"), std::string::npos) << m;
  EXPECT_THROW(launch(stream(), module().function("fill"), LaunchConfig{1, 8}, a, 1.0f, 8), EmptyHandle);
  EXPECT_THROW(KernelArgs().add(a), EmptyHandle);
  EXPECT_THROW(KernelArgs().add(std::as_const(a)), EmptyHandle);
  // NOLINTEND(bugprone-use-after-move)
  EXPECT_EQ(launches_made(), before);
  DeviceBuffer<float> none;
  launch(stream(), fill, LaunchConfig{1, 1}, none, 1.0f, 0);
  EXPECT_EQ(fake::launches().back().param<float*>(0), nullptr) << "an empty buffer is a null pointer";
  (void)b;
}

TEST_F(LaunchTest, KernelWithoutParameters) {
  launch(stream(), module().kernel<void()>("empty"), LaunchConfig{2, 64});
  auto l = fake::launches().back();
  EXPECT_EQ(l.kernel, "empty");
  EXPECT_TRUE(l.params.empty());
  EXPECT_EQ(l.grid[0], 2u);
  std::size_t n = 300;  // unsigned counts work as well
  EXPECT_EQ(grid_for(n, 128), Dim3(3));
}

TEST_F(LaunchTest, ArgumentsArePackedAtTheKernelsOffsets) {
  auto mixed = module().kernel<void(char, double, short, float*, int, long long)>("mixed");
  DeviceBuffer<float> y(stream(), 4, zeroed);
  // float -> double and int -> long long convert without loss.
  launch(stream(), mixed, LaunchConfig{1, 1}, 'c', 2.5f, short{-7}, y, 42, 1 << 30);
  auto l = fake::launches().back();
  ASSERT_EQ(l.offsets, (std::vector<std::size_t>{0, 8, 16, 24, 32, 40}));
  ASSERT_EQ(l.params.size(), 48u);
  EXPECT_EQ(l.param<char>(0), 'c');
  EXPECT_EQ(l.param<double>(1), 2.5);
  EXPECT_EQ(l.param<short>(2), -7);
  EXPECT_EQ(l.param<float*>(3), y.data());
  EXPECT_EQ(l.param<int>(4), 42);
  EXPECT_EQ(l.param<long long>(5), 1LL << 30);
}

TEST_F(LaunchTest, ViewsAndRawPointersPassTheirAddresses) {
  auto fill = module().kernel<FillSig>("fill");
  DeviceBuffer<float> y(stream(), 100, zeroed);
  launch(stream(), fill, LaunchConfig{1, 32}, y.subspan(10, 20), 5.0f, 20);
  EXPECT_EQ(fake::launches().back().param<float*>(0), y.data() + 10);
  launch(stream(), fill, LaunchConfig{1, 32}, y.data() + 50, 6.0f, 10);  // raw: untracked, passed as is
  EXPECT_EQ(fake::launches().back().param<float*>(0), y.data() + 50);
  auto v = host(y);
  EXPECT_EQ(v[9], 0.0f);
  EXPECT_EQ(v[10], 5.0f);
  EXPECT_EQ(v[29], 5.0f);
  EXPECT_EQ(v[30], 0.0f);
  EXPECT_EQ(v[55], 6.0f);
}

TEST_F(LaunchTest, ReadOnStreamBOfABufferWrittenOnStreamAIsOrdered) {
  auto fill = module().kernel<FillSig>("fill");
  auto sum = module().kernel<SumSig>("sum");
  Stream a(Device::get(0)), b(Device::get(0));
  DeviceBuffer<float> x(a, 256, uninitialized), out(b, 1, zeroed);
  launch(a, fill, LaunchConfig{1, 256}, x, 1.0f, 256);
  launch(b, sum, LaunchConfig{1, 256}, x, out, 256);  // x binds to const float*: a read
  b.synchronize();
  EXPECT_EQ(host(out)[0], 256.0f);
  EXPECT_EQ(fake().calls(EntryId::StreamWaitEvent), 1) << "B waited for A's write";
  // The fixture fails the test on any unordered pair of accesses (a hazard).
}

TEST_F(LaunchTest, WithoutTrackingTheSameLaunchesAreAHazard) {
  ignore_hazards();
  auto fill = module().kernel<FillSig>("fill");
  auto sum = module().kernel<SumSig>("sum");
  Stream a(Device::get(0)), b(Device::get(0));
  DeviceBuffer<float> x(a, 256, uninitialized), out(b, 1, zeroed);
  {
    ManualOrdering manual;
    launch(a, fill, LaunchConfig{1, 256}, x, 1.0f, 256);
    launch(b, sum, LaunchConfig{1, 256}, x, out, 256);
  }
  EXPECT_FALSE(fake().hazards().empty()) << "the ordering model sees the kernels' accesses";
  a.synchronize();
  b.synchronize();
}

TEST_F(LaunchTest, ConstPointerParametersAreTrackedAsReads) {
  auto fill = module().kernel<FillSig>("fill");
  auto sum = module().kernel<SumSig>("sum");
  Stream a(Device::get(0)), b(Device::get(0));
  DeviceBuffer<float> x(a, 64, uninitialized), out_a(a, 1, zeroed), out_b(b, 1, zeroed);
  launch(a, fill, LaunchConfig{1, 64}, x, 2.0f, 64);
  launch(b, sum, LaunchConfig{1, 64}, x, out_b, 64);  // B reads x
  int waits = fake().calls(EntryId::StreamWaitEvent);
  launch(a, sum, LaunchConfig{1, 64}, x, out_a, 64);  // A reads x again: no conflict with B's read
  EXPECT_EQ(fake().calls(EntryId::StreamWaitEvent), waits) << "had B's launch been a write, A would wait for it";
  launch(a, fill, LaunchConfig{1, 64}, x, 3.0f, 64);  // A writes: waits for B's read
  EXPECT_EQ(fake().calls(EntryId::StreamWaitEvent), waits + 1);
  a.synchronize();
  b.synchronize();
}

TEST_F(LaunchTest, UntypedLaunchIsCheckedAgainstParameterInfo) {
  Function saxpy = module().function("saxpy");
  const int n = 64;
  DeviceBuffer<float> x(stream(), n, zeroed), y(stream(), n, zeroed);
  launch(stream(), saxpy, LaunchConfig{1, 64}, 2.0f, std::as_const(x), y, n);
  EXPECT_EQ(launches_made(), 1);
  auto count = message_of<InvalidArgument>([&] { launch(stream(), saxpy, LaunchConfig{1, 64}, 2.0f, x, y); });
  EXPECT_NE(count.find("launch of kernel 'saxpy' on device 0 (Fake GPU, sm_90): the kernel takes 4 parameters (4, 8, "
                       "8, 4 bytes), the launch passes 3 (4, 8, 8 bytes)"),
            std::string::npos)
      << count;
  auto size = message_of<InvalidArgument>([&] { launch(stream(), saxpy, LaunchConfig{1, 64}, 2.0, x, y, n); });
  EXPECT_NE(size.find("argument #1 is 8 bytes, but the kernel's parameter #1 is 4 bytes"), std::string::npos) << size;
  EXPECT_EQ(launches_made(), 1) << "refused before the driver";
}

TEST_F(LaunchTest, RuntimeArgumentListLaunches) {
  Function saxpy = module().function("saxpy");
  const int n = 16;
  DeviceBuffer<float> x(stream(), n, zeroed), y(stream(), n, zeroed);
  launch(stream(), module().kernel<FillSig>("fill"), LaunchConfig{1, 16}, x, 1.5f, n);
  KernelArgs args;
  args.add(2.0f).add(std::as_const(x)).add(y).add(n);
  EXPECT_EQ(args.size(), 4u);
  launch(stream(), saxpy, LaunchConfig{1, 16}, args);
  EXPECT_EQ(host(y)[0], 3.0f);
  auto l = fake::launches().back();
  EXPECT_EQ(l.param<const float*>(1), x.data());
  EXPECT_EQ(l.param<int>(3), n);
  KernelArgs short_list;
  short_list.add(2.0f);
  auto m = message_of<InvalidArgument>([&] { launch(stream(), saxpy, LaunchConfig{1, 16}, short_list); });
  EXPECT_NE(m.find("the kernel takes 4 parameters"), std::string::npos) << m;
}

// ---- validation: every error names the kernel, the value and the limit; none reaches the driver ----

class LaunchValidationTest : public LaunchTest {
 protected:
  std::string refused(const Function& k, const LaunchConfig& c) {
    DeviceBuffer<float> y(stream(), 1, zeroed);
    int before = launches_made();
    std::string m = message_of<InvalidArgument>([&] { launch(stream(), k, c, y); });
    EXPECT_EQ(launches_made(), before) << "the driver saw a launch cudakit should have refused";
    return m;
  }
  Kernel<void(float*)> heavy() { return module().kernel<void(float*)>("heavy"); }
  Kernel<void(float*)> plain() { return module().kernel<void(float*)>("plain"); }
};

#define EXPECT_HAS(haystack, needle) EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

TEST_F(LaunchValidationTest, ZeroExtents) {
  Kernel<void(float*)> k = heavy();
  EXPECT_HAS(refused(k, {1, {0, 1, 1}}), "launch of kernel 'heavy' on device 0 (Fake GPU, sm_90): block (0, 1, 1) has a zero extent");
  EXPECT_HAS(refused(k, {{4, 0}, 32}), "grid (4, 0, 1) has a zero extent");
}

TEST_F(LaunchValidationTest, BlockDimensionsAndThreadsPerBlock) {
  auto k = module().kernel<SaxpySig>("saxpy");
  DeviceBuffer<float> x(stream(), 1, zeroed), y(stream(), 1, zeroed);
  auto m = message_of<InvalidArgument>([&] { launch(stream(), k, {1, 2048}, 1.0f, x, y, 1); });
  EXPECT_HAS(m, "block.x = 2048 exceeds the device's maximum block dimension x of 1024");
  m = message_of<InvalidArgument>([&] { launch(stream(), k, {1, {1, 1, 65}}, 1.0f, x, y, 1); });
  EXPECT_HAS(m, "block.z = 65 exceeds the device's maximum block dimension z of 64");
  m = message_of<InvalidArgument>([&] { launch(stream(), k, {1, {32, 64}}, 1.0f, x, y, 1); });
  EXPECT_HAS(m, "block (32, 64, 1) has 2048 threads, more than the device's limit of 1024 threads per block");
  EXPECT_EQ(launches_made(), 0);
}

TEST_F(LaunchValidationTest, TheKernelsOwnThreadLimit) {
  EXPECT_HAS(refused(heavy(), {1, 512}),
             "block (512, 1, 1) has 512 threads, more than the 256 this kernel can run per block (its register use "
             "limits it: CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)");
}

TEST_F(LaunchValidationTest, GridDimensions) {
  EXPECT_HAS(refused(heavy(), {{1, 70000}, 32}), "grid.y = 70000 exceeds the device's maximum grid dimension y of 65535");
  EXPECT_HAS(refused(heavy(), {{1, 1, 65536}, 32}), "grid.z = 65536 exceeds the device's maximum grid dimension z of 65535");
}

TEST_F(LaunchValidationTest, SharedMemoryAboveTheDefaultNeedsOptingIn) {
  EXPECT_HAS(refused(plain(), {.grid = 1, .block = 32, .shared_memory_bytes = 64 * 1024}),
             "asks for 65536 bytes (64 KiB) of dynamic shared memory, more than the kernel's current limit of 49152 "
             "bytes (48 KiB) (a block gets 49152 bytes (48 KiB) without opting in); set "
             "LaunchConfig::allow_large_shared_memory = true to raise the kernel's limit (up to 232448 bytes (227 KiB) "
             "here)");
  EXPECT_EQ(fake().calls(EntryId::FuncSetAttribute), 0);
}

TEST_F(LaunchValidationTest, SharedMemoryAboveTheOptInMaximumIsRefusedEvenWhenAllowed) {
  EXPECT_HAS(refused(heavy(), {.grid = 1, .block = 32, .shared_memory_bytes = 227 * 1024, .allow_large_shared_memory = true}),
             "asks for 232448 bytes (227 KiB) of dynamic shared memory, more than the 231424 bytes (226 KiB) a block "
             "of this kernel can have on this device (the kernel also uses 1024 bytes of static shared memory)");
}

TEST_F(LaunchValidationTest, AllowedLargeSharedMemoryRaisesTheKernelsLimitOnce) {
  auto k = plain();
  DeviceBuffer<float> y(stream(), 1, zeroed);
  LaunchConfig c{.grid = 1, .block = 32, .shared_memory_bytes = 100 * 1024, .allow_large_shared_memory = true};
  launch(stream(), k, c, y);
  launch(stream(), k, c, y);
  c.shared_memory_bytes = 64 * 1024;
  launch(stream(), k, c, y);
  EXPECT_EQ(fake().calls(EntryId::FuncSetAttribute), 1) << "raised once, to 100 KiB";
  c.shared_memory_bytes = 200 * 1024;
  launch(stream(), k, c, y);
  EXPECT_EQ(fake().calls(EntryId::FuncSetAttribute), 2);
  EXPECT_EQ(k.attribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES), 200 * 1024);
  EXPECT_EQ(fake::launches().back().shared_bytes, 200u * 1024);
}

TEST_F(LaunchValidationTest, StreamsMustBeOfTheKernelsDeviceAndNotEmpty) {
  DeviceBuffer<float> y(stream(), 1, zeroed);
  Stream empty;
  EXPECT_THROW(launch(empty, plain(), {1, 1}, y), EmptyHandle);
  EXPECT_EQ(launches_made(), 0);
}

TEST_F(LaunchValidationTest, CooperativeGridMustFitOnTheDeviceAtOnce) {
  // The fake: 2048 threads per multiprocessor, 132 multiprocessors.
  auto m = refused(plain(), {.grid = 265, .block = 1024, .cooperative = true});
  EXPECT_HAS(m, "a cooperative launch needs every block resident at once, but grid (265, 1, 1) has 265 blocks and at "
                "most 264 fit (2 per multiprocessor with blocks of 1024 threads and 0 bytes of dynamic shared memory, "
                "times 132 multiprocessors)");
  DeviceBuffer<float> y(stream(), 1, zeroed);
  launch(stream(), plain(), {.grid = 264, .block = 1024, .cooperative = true}, y);
  launch(stream(), plain(), {.grid = 264, .block = 1024, .cooperative = true}, y);
  EXPECT_EQ(fake().calls(EntryId::OccupancyMaxActiveBlocksPerMultiprocessor), 1)
      << "the answer for a block shape is cached";
}

TEST_F(LaunchValidationTest, PriorityOutsideTheRange) {
  EXPECT_HAS(refused(plain(), {.grid = 1, .block = 1, .priority = 3}),
             "priority 3 is outside the device's range [-5 (most urgent), 0 (least urgent)]");
}

TEST_F(LaunchValidationTest, NegativeExtentsAndGridForErrors) {
  EXPECT_HAS(message_of<InvalidArgument>([] { Dim3 d(-1); }), "a launch extent of -1 is negative");
  EXPECT_HAS(message_of<InvalidArgument>([] { Dim3 d(1ull << 33); }), "does not fit in 32 bits");
  EXPECT_EQ(grid_for(1000, 256), Dim3(4));
  EXPECT_EQ(grid_for(1024, 256), Dim3(4));
  EXPECT_EQ(grid_for(0, 256), Dim3(0u));
  EXPECT_EQ(grid_for(Dim3{100, 30}, Dim3{16, 16}), Dim3(7, 2));
  EXPECT_HAS(message_of<InvalidArgument>([] { grid_for(10, 0); }), "a block of 0 threads");
  EXPECT_HAS(message_of<InvalidArgument>([] { grid_for(-5, 32); }), "negative");
  EXPECT_HAS(message_of<InvalidArgument>([] { grid_for(1ull << 45, 32); }), "more than a grid dimension holds");
}

class ClusterLaunchTest : public LaunchTest {};

TEST_F(ClusterLaunchTest, ClusterDimensionsAreChecked) {
  auto k = module().kernel<void(float*)>("heavy");
  DeviceBuffer<float> y(stream(), 1, zeroed);
  auto m = message_of<InvalidArgument>([&] { launch(stream(), k, {.grid = 10, .block = 32, .cluster = Dim3{4}}, y); });
  EXPECT_HAS(m, "grid.x = 10 is not a multiple of cluster.x = 4");
  m = message_of<InvalidArgument>([&] { launch(stream(), k, {.grid = 16, .block = 32, .cluster = Dim3{16}}, y); });
  EXPECT_HAS(m, "cluster (16, 1, 1) has 16 blocks, more than the portable maximum of 8");
  m = message_of<InvalidArgument>([&] { launch(stream(), k, {.grid = 16, .block = 32, .cluster = Dim3{0u}}, y); });
  EXPECT_HAS(m, "cluster (0, 1, 1) has a zero extent");
  auto clustered = module().kernel<void(float*)>("clustered");
  m = message_of<InvalidArgument>(
      [&] { launch(stream(), clustered, {.grid = 16, .block = 32, .cluster = Dim3{4}}, y); });
  EXPECT_HAS(m, "cluster (4, 1, 1) differs from the (2, 1, 1) the kernel was compiled with (__cluster_dims__)");
  auto must = module().kernel<void(float*)>("must_cluster");
  m = message_of<InvalidArgument>([&] { launch(stream(), must, {16, 32}, y); });
  EXPECT_HAS(m, "the kernel must be launched with a thread-block cluster");
  EXPECT_EQ(launches_made(), 0);
}

TEST_F(ClusterLaunchTest, AttributesGoThroughLaunchKernelEx) {
  auto k = module().kernel<void(float*)>("heavy");
  DeviceBuffer<float> y(stream(), 1, zeroed);
  launch(stream(), k, {.grid = 8, .block = 128, .cluster = Dim3{2}}, y);
  auto l = fake::launches().back();
  EXPECT_TRUE(l.through_ex);
  ASSERT_NE(l.attribute(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION), nullptr);
  EXPECT_EQ(l.attribute(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)->value.clusterDim.x, 2u);
  EXPECT_EQ(l.attribute(CU_LAUNCH_ATTRIBUTE_COOPERATIVE), nullptr);

  launch(stream(), k, {.grid = 8, .block = 128, .cooperative = true, .priority = -3,
                       .programmatic_dependent_launch = true}, y);
  l = fake::launches().back();
  ASSERT_EQ(l.attributes.size(), 3u);
  EXPECT_EQ(l.attribute(CU_LAUNCH_ATTRIBUTE_COOPERATIVE)->value.cooperative, 1);
  EXPECT_EQ(l.attribute(CU_LAUNCH_ATTRIBUTE_PRIORITY)->value.priority, -3);
  EXPECT_EQ(l.attribute(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)->value.programmaticStreamSerializationAllowed, 1);
  EXPECT_EQ(fake().calls(EntryId::LaunchKernelEx), 2);
  EXPECT_EQ(fake().calls(EntryId::LaunchKernel), 0);
}

class OldGpuLaunchTest : public LaunchTest {
 protected:
  void configure(fake::Driver& d) override {
    d.devices[0].major = 8;
    d.devices[0].minor = 0;
    d.devices[0].attributes[CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH] = 0;
    d.devices[0].attributes[CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH] = 0;
  }
};

TEST_F(OldGpuLaunchTest, FeaturesTheGpuLacksAreRefused) {
  auto k = module().kernel<void(float*)>("heavy");
  DeviceBuffer<float> y(stream(), 1, zeroed);
  auto m = message_of<InvalidArgument>([&] { launch(stream(), k, {.grid = 8, .block = 32, .cluster = Dim3{2}}, y); });
  EXPECT_HAS(m, "thread-block clusters need compute capability 9.0 or newer; this device is sm_80");
  m = message_of<InvalidArgument>([&] { launch(stream(), k, {.grid = 8, .block = 32, .cooperative = true}, y); });
  EXPECT_HAS(m, "the device does not support cooperative launches");
  m = message_of<InvalidArgument>(
      [&] { launch(stream(), k, {.grid = 8, .block = 32, .programmatic_dependent_launch = true}, y); });
  EXPECT_HAS(m, "programmatic dependent launch needs compute capability 9.0 or newer");
  EXPECT_EQ(launches_made(), 0);
}

class TwoDeviceLaunchTest : public LaunchTest {
 protected:
  void configure(fake::Driver& d) override { d.devices.resize(2); }
};

TEST_F(TwoDeviceLaunchTest, StreamAndBuffersMustBeOnTheKernelsDevice) {
  auto fill = module().kernel<FillSig>("fill");
  Stream other(Device::get(1));
  DeviceBuffer<float> here(stream(), 4, zeroed), there(other, 4, zeroed);
  auto m = message_of<InvalidArgument>([&] { launch(other, fill, {1, 4}, there, 1.0f, 4); });
  EXPECT_HAS(m, "the stream is on device 1, the kernel was loaded on device 0");
  m = message_of<InvalidArgument>([&] { launch(stream(), fill, {1, 4}, there, 1.0f, 4); });
  EXPECT_HAS(m, "argument #1 is a buffer on device 1, but the launch runs on device 0");
  EXPECT_EQ(launches_made(), 0);
  other.synchronize();
}

class OldDriverLaunchTest : public LaunchTest {
 protected:
  void configure(fake::Driver& d) override {
    d.driver_version = 12020;
    d.missing = {EntryId::FuncGetParamInfo};
  }
};

TEST_F(OldDriverLaunchTest, UntypedLaunchesAreRefusedWithoutParameterInfo) {
  DeviceBuffer<float> x(stream(), 4, zeroed), y(stream(), 4, zeroed);
  auto m = message_of<FeatureUnavailable>(
      [&] { launch(stream(), module().function("saxpy"), {1, 4}, 2.0f, std::as_const(x), y, 4); });
  EXPECT_HAS(m, "an untyped kernel launch (checked against the kernel's parameter info) needs cuFuncGetParamInfo, which "
                "this driver (CUDA 12.2) does not have; it came with CUDA 12.4");
  launch(stream(), module().kernel<SaxpySig>("saxpy"), {1, 4}, 2.0f, x, y, 4);  // typed launches work
  EXPECT_EQ(launches_made(), 1);
}

// ---- the hot path ----

TEST_F(LaunchTest, AWarmLaunchIsOneDriverCall) {
  auto saxpy = module().kernel<SaxpySig>("saxpy");
  DeviceBuffer<float> x(stream(), 64, zeroed), y(stream(), 64, zeroed);
  launch(stream(), saxpy, {1, 64}, 2.0f, x, y, 64);
  fake().clear_log();
  for (int i = 0; i < 10; ++i) launch(stream(), saxpy, {1, 64}, 2.0f, x, y, 64);
  auto log = fake().log();
  EXPECT_EQ(log.size(), 10u);
  for (EntryId id : log) EXPECT_EQ(id, EntryId::LaunchKernel) << driver::entry_info(id).name;
}

TEST_F(LaunchTest, ContextIsMadeCurrentOnlyWhenItIsNot) {
  auto saxpy = module().kernel<SaxpySig>("saxpy");
  DeviceBuffer<float> x(stream(), 64, zeroed), y(stream(), 64, zeroed);
  std::thread([&] {
    forget_cached_current_context();
    fake().clear_log();
    launch(stream(), saxpy, {1, 64}, 2.0f, x, y, 64);
    launch(stream(), saxpy, {1, 64}, 2.0f, x, y, 64);
    EXPECT_EQ(fake().calls(EntryId::CtxSetCurrent), 1) << "a new thread sets the context once";
  }).join();
}

TEST_F(LaunchTest, StickyLaunchFailurePoisonsTheDevice) {
  expect_parked_errors();
  auto saxpy = module().kernel<SaxpySig>("saxpy");
  DeviceBuffer<float> x(stream(), 64, zeroed), y(stream(), 64, zeroed);
  fake().fail(EntryId::LaunchKernel, 1, CUDA_ERROR_ILLEGAL_ADDRESS);
  auto m = message_of<DriverError>([&] { launch(stream(), saxpy, {1, 64}, 2.0f, x, y, 64); });
  EXPECT_HAS(m, "cuLaunchKernel on kernel 'saxpy'");
  EXPECT_HAS(m, "CUDA_ERROR_ILLEGAL_ADDRESS");
  int calls = fake().calls(EntryId::LaunchKernel);
  EXPECT_THROW(launch(stream(), saxpy, {1, 64}, 2.0f, x, y, 64), ContextPoisoned);
  EXPECT_EQ(fake().calls(EntryId::LaunchKernel), calls) << "a poisoned device refuses at once";
  fake().clear_faults();
  fake().clear_sticky();
}

TEST_F(LaunchTest, ManyThreadsLaunchTheSameKernelOnTheirOwnStreams) {
  auto saxpy = module().kernel<SaxpySig>("saxpy");
  DeviceBuffer<float> x(stream(), 64, zeroed);
  stream().synchronize();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      Stream s(Device::get(0));
      DeviceBuffer<float> y(s, 64, zeroed);
      for (int i = 0; i < 50; ++i) launch(s, saxpy, {1, 64}, 1.0f, std::as_const(x), y, 64);
      s.synchronize();
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(launches_made(), 200);
}

TEST_F(LaunchTest, OccupancyHelpers) {
  auto saxpy = module().kernel<SaxpySig>("saxpy");
  EXPECT_EQ(max_active_blocks_per_multiprocessor(saxpy, 256), 8);
  auto s = suggested_block_size(saxpy);
  EXPECT_EQ(s.block_size, 1024);
  EXPECT_EQ(s.min_grid_size, 264);
  EXPECT_EQ(max_active_clusters(saxpy, {.grid = 64, .block = 256, .cluster = Dim3{2}}), 8 * 132 / 2);
  EXPECT_EQ(max_potential_cluster_size(saxpy, {.grid = 64, .block = 256}), 8);
  EXPECT_HAS(message_of<InvalidArgument>([&] { max_active_clusters(saxpy, {64, 256}); }), "names no cluster");
}

}  // namespace
}  // namespace cudakit
