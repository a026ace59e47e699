// Devices, contexts, streams, events and host callbacks on a real GPU.
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "gpu_fixture.hpp"

namespace cudakit {
namespace {

using namespace std::chrono_literals;
using testing::GpuTest;

TEST_F(GpuTest, DeviceReportsPlausibleProperties) {
  const Device& d = device();
  EXPECT_FALSE(d.name().empty());
  EXPECT_GE(d.compute_capability().major, 5);
  EXPECT_GT(d.multiprocessor_count(), 0);
  EXPECT_EQ(d.warp_size(), 32);
  EXPECT_EQ(d.uuid_string().rfind("GPU-", 0), 0u);
  EXPECT_EQ(d.uuid_string().size(), 40u);
  EXPECT_EQ(d.pci_bus_id().size(), 12u) << d.pci_bus_id();
  auto mem = d.memory_info();
  EXPECT_GT(mem.total_bytes, 1ull << 30);
  EXPECT_LE(mem.free_bytes, mem.total_bytes);
  EXPECT_EQ(mem.total_bytes, d.total_memory());
  EXPECT_GE(driver::version(), driver::minimum_driver_version);
}

TEST_F(GpuTest, PrimaryContextIsTheRuntimesContextAndSurvivesItsOwners) {
  CUcontext first;
  {
    Context c = Context::primary(device());
    first = c.handle();
    c.make_current();
    c.synchronize();
  }
  Context again = Context::primary(device());
  EXPECT_EQ(again.handle(), first);
}

TEST_F(GpuTest, StreamIsNonBlockingAndPriorityIsKept) {
  Context c = Context::primary(device());
  auto [least, greatest] = c.ref().stream_priority_range();
  Stream s(device(), greatest);
  unsigned flags = 0;
  ASSERT_EQ(driver::cu.StreamGetFlags(s.handle(), &flags), CUDA_SUCCESS);
  EXPECT_EQ(flags & CU_STREAM_NON_BLOCKING, unsigned(CU_STREAM_NON_BLOCKING));
  EXPECT_EQ(s.priority(), greatest);
  EXPECT_THROW(Stream(device(), greatest - 1), InvalidArgument);
  EXPECT_THROW(Stream(device(), least + 1), InvalidArgument);
}

// A host callback that blocks stream A until the test releases it: deterministic
// ordering without a kernel. The state is shared with the callback, so a test that
// fails early never leaves the callback pointing at a dead object. Note: the driver
// runs host callbacks on one thread, so while a gate holds, no other stream's host
// callback runs either; tests of independence use events, not callbacks.
struct Gate {
  std::shared_ptr<std::atomic<bool>> open = std::make_shared<std::atomic<bool>>(false);
  void hold(StreamRef s) {
    s.host_callback([open = open] {
      auto deadline = std::chrono::steady_clock::now() + 10s;
      while (!open->load() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(100us);
    });
  }
  void release() { *open = true; }
  ~Gate() { release(); }
};

TEST_F(GpuTest, StreamWaitsForAnotherStreamsEarlierWork) {
  Stream a(device()), b(device());
  Gate gate;
  gate.hold(a);
  std::atomic<int> order{0};
  int a_done = 0, b_done = 0;
  a.host_callback([&] { a_done = ++order; });
  b.wait(a);
  b.host_callback([&] { b_done = ++order; });
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(a.query());
  EXPECT_FALSE(b.query()) << "b must wait for a";
  gate.release();
  b.synchronize();
  EXPECT_EQ(a_done, 1);
  EXPECT_EQ(b_done, 2);
  EXPECT_TRUE(a.query());
}

TEST_F(GpuTest, StreamWaitsForEvent) {
  Stream a(device()), b(device());
  Event e(device());
  Gate gate;
  gate.hold(a);
  e.record(a);
  b.wait(e);
  std::atomic<bool> b_ran{false};
  b.host_callback([&] { b_ran = true; });
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(e.query()) << "not ready is false, not an error";
  EXPECT_FALSE(b_ran.load());
  gate.release();
  e.synchronize();
  b.synchronize();
  EXPECT_TRUE(e.query());
  EXPECT_TRUE(b_ran.load());
}

TEST_F(GpuTest, UnrelatedStreamsDoNotWaitForEachOther) {
  Stream a(device()), b(device());
  Gate gate;
  gate.hold(a);
  Event b_done(device());
  b_done.record(b);
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!b_done.query() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(100us);
  EXPECT_TRUE(b_done.query()) << "non-blocking streams are independent";
  EXPECT_FALSE(a.query());
  gate.release();
  a.synchronize();
}

TEST_F(GpuTest, TimingEventsMeasureElapsedTime) {
  Stream s(device());
  Event start(device(), EventTiming::enabled), stop(device(), EventTiming::enabled);
  start.record(s);
  s.host_callback([] { std::this_thread::sleep_for(5ms); });
  stop.record(s);
  stop.synchronize();
  float ms = elapsed_time(start, stop).count();
  EXPECT_GE(ms, 4.0f);
  EXPECT_LT(ms, 1000.0f);
  Event untimed(device());
  untimed.record(s);
  s.synchronize();
  EXPECT_THROW(elapsed_time(start, untimed), DriverError);
}

TEST_F(GpuTest, HostCallbackExceptionIsParkedAndLaterCallbacksStillRun) {
  Stream s(device());
  std::atomic<int> ran{0};
  s.host_callback([] { throw std::runtime_error("boom in callback"); });
  s.host_callback([&] { ++ran; });
  s.synchronize();
  EXPECT_EQ(ran.load(), 1);
  auto parked = drain_parked_errors();
  ASSERT_EQ(parked.size(), 1u);
  EXPECT_NE(parked[0].message.find("boom in callback"), std::string::npos);
}

TEST_F(GpuTest, ErrorMessageNamesCallResourceDeviceAndCode) {
  Stream s(device());
  Event timed(device(), EventTiming::enabled), untimed(device());
  timed.record(s);
  untimed.record(s);
  s.synchronize();
  try {
    elapsed_time(timed, untimed);
    FAIL() << "the driver timed an event created without timing";
  } catch (const DriverError& e) {
    std::string m = e.what();
    EXPECT_EQ(m.rfind("cuEventElapsedTime on event 0x", 0), 0u) << m;
    EXPECT_NE(m.find("on device 0 (" + device().name() + "): CUDA_ERROR_INVALID_HANDLE: "), std::string::npos) << m;
  }
}

TEST_F(GpuTest, ManyThreadsCreateStreamsAndWaitAcrossThem) {
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      try {
        for (int i = 0; i < 50; ++i) {
          Stream a(device()), b(device());
          b.wait(a);
          b.synchronize();
        }
      } catch (...) {
        ++failures;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace cudakit
