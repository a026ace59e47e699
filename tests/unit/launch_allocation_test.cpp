// DESIGN 8: a launch does not allocate. Counted, not assumed: this file replaces the global
// operator new of the unit test binary with one that counts, on the calling thread, while a
// test asks it to. What the fake driver itself allocates inside its launch entry (its launch
// log, the host kernels) is not cudakit's and is not counted.
#include <gtest/gtest.h>

#include <cstdlib>
#include <new>

#include "cudakit/launch.hpp"
#include "cudakit/module.hpp"
#include "fake_fixture.hpp"
#include "fake_kernels.hpp"

namespace {
thread_local bool counting = false;
thread_local long allocations = 0;
thread_local long every_allocation = 0;

void* counted_allocation(std::size_t n) {
  ++every_allocation;
  if (counting && cudakit::fake::inside_fake_launch == 0) ++allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
}  // namespace

// The command's launch benchmarks, linked into this binary, read this thread's count
// here (the command itself has tools/cudakit/bench_allocation_counter.cpp).
namespace cudakit::tool::bench {
long heap_allocations_on_this_thread() noexcept { return every_allocation; }
}  // namespace cudakit::tool::bench

void* operator new(std::size_t n) { return counted_allocation(n); }
void* operator new[](std::size_t n) { return counted_allocation(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace cudakit {
namespace {

struct CountAllocations {
  CountAllocations() {
    allocations = 0;
    counting = true;
  }
  ~CountAllocations() { counting = false; }
  long count() const { return allocations; }
};

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
