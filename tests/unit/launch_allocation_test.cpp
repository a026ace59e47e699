// DESIGN 8: a launch does not allocate. Counted, not assumed, with the unit test binary's
// counting operator new (allocation_counter.hpp).
#include <gtest/gtest.h>

#include <new>

#include "allocation_counter.hpp"
#include "cudakit/launch.hpp"
#include "cudakit/module.hpp"
#include "fake_fixture.hpp"
#include "fake_kernels.hpp"

namespace cudakit {
namespace {

using testing::CountAllocations;

class LaunchAllocationTest : public testing::FakeDriverTest {
 protected:
  void SetUp() override {
    FakeDriverTest::SetUp();
    module_ = Module::load(Device::get(0), fake::cubin_image(testing::standard_image()));
  }
  void TearDown() override {
    module_ = {};
    FakeDriverTest::TearDown();
  }
  // The fake logs every call; room for the log up front keeps its growth out of the count.
  void reserve_call_log() { fake().call_log.reserve(fake().call_log.size() + 100000); }
  Module module_;
};

TEST_F(LaunchAllocationTest, TheCounterCounts) {
  CountAllocations c;
  void* p = ::operator new(16);  // a call, not a new-expression: the compiler may not elide it
  ::operator delete(p);
  EXPECT_EQ(c.count(), 1);
}

TEST_F(LaunchAllocationTest, TypedLaunchesAllocateNothing) {
  Stream s(Device::get(0));
  auto saxpy = module_.kernel<void(float, const float*, float*, int)>("saxpy");
  auto mixed = module_.kernel<void(char, double, short, float*, int, long long)>("mixed");
  DeviceBuffer<float> x(s, 256, zeroed), y(s, 256, zeroed);
  launch(s, saxpy, {1, 256}, 2.0f, x, y, 256);  // warm: the first launch may cache
  launch(s, saxpy, {.grid = 2, .block = 128, .cluster = Dim3{2}, .cooperative = true, .priority = -1}, 2.0f, x, y, 256);
  reserve_call_log();
  long counted = 0;
  {
    CountAllocations c;
    for (int i = 0; i < 100; ++i) {
      launch(s, saxpy, {grid_for(256, 128), 128}, 2.0f, x, y, 256);
      launch(s, saxpy, {.grid = 2, .block = 128, .cluster = Dim3{2}, .cooperative = true, .priority = -1}, 2.0f,
             x.span(), y.subspan(0, 256), 256);
      launch(s, mixed, {1, 1}, 'a', 1.0, short{2}, y, 3, 4LL);
    }
    counted = c.count();
  }
  EXPECT_EQ(counted, 0) << "heap allocations in 300 launches";
  EXPECT_EQ(fake().calls(driver::EntryId::LaunchKernel) + fake().calls(driver::EntryId::LaunchKernelEx), 302);
}

TEST_F(LaunchAllocationTest, UntypedLaunchesAllocateNothing) {
  Stream s(Device::get(0));
  Function saxpy = module_.function("saxpy");
  DeviceBuffer<float> x(s, 256, zeroed), y(s, 256, zeroed);
  KernelArgs args;
  args.add(2.0f).add(std::as_const(x)).add(y).add(256);
  launch(s, saxpy, {1, 256}, 2.0f, std::as_const(x), y, 256);
  launch(s, saxpy, {1, 256}, args);
  reserve_call_log();
  long counted = 0;
  {
    CountAllocations c;
    for (int i = 0; i < 100; ++i) {
      launch(s, saxpy, {1, 256}, 2.0f, std::as_const(x), y, 256);
      launch(s, saxpy, {1, 256}, args);
    }
    counted = c.count();
  }
  EXPECT_EQ(counted, 0) << "heap allocations in 200 untyped launches";
}

}  // namespace
}  // namespace cudakit
