// The graph cache against the fake driver (graph_cache.hpp, device_value.hpp): hits,
// in-place updates, recaptures, least-recently-used eviction and the eager fallback;
// lifetimes of buffers that cached graphs outlive, ordering after replays, values that
// change every step, the one-thread rule, and no heap allocation on the hit path.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "allocation_counter.hpp"
#include "cudakit/copy.hpp"
#include "cudakit/device_value.hpp"
#include "cudakit/graph_cache.hpp"
#include "cudakit/launch.hpp"
#include "cudakit/module.hpp"
#include "fake_kernels.hpp"
#include "graph_fixture.hpp"

namespace cudakit {
namespace {

using driver::EntryId;
using testing::CountAllocations;
using testing::FillSig;
using testing::SaxpySig;
using namespace std::chrono_literals;

constexpr int n = 64;
const LaunchConfig one_block{.grid = 1, .block = n};
using PositionsSig = void(const int*, float*, int);

// out[i] = *position + i: a kernel that reads a value the caller sets before each replay.
fake::FakeKernel positions_kernel() {
  return {"positions", fake::params<const int*, float*, int>(), [](const fake::FakeLaunch& l) {
            auto* position = l.param<const int*>(0);
            auto* out = l.param<float*>(1);
            auto count = l.param<int>(2);
            l.read(position, sizeof(int));
            l.write(out, count * sizeof(float));
            for (int i = 0; i < count; ++i) out[i] = static_cast<float>(*position + i);
          },
          {}};
}

class GraphCacheTest : public testing::GraphTestBase {
 protected:
  void SetUp() override {
    GraphTestBase::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    module_ = Module::load(dev(), fake::fatbin_image(testing::standard_image({positions_kernel()}), {90}, {}));
    saxpy_ = module_.kernel<SaxpySig>("saxpy");
    fill_ = module_.kernel<FillSig>("fill");
    positions_ = module_.kernel<PositionsSig>("positions");
    unsigned seed = std::random_device{}();
    rng_.seed(seed);
    seed_trace_ = std::make_unique<::testing::ScopedTrace>(__FILE__, __LINE__, "random seed " + std::to_string(seed));
  }
  void TearDown() override {
    seed_trace_.reset();
    saxpy_ = {};
    fill_ = {};
    positions_ = {};
    module_ = {};
    GraphTestBase::TearDown();
  }

  std::vector<float> random_values(std::size_t count = n) {
    std::uniform_real_distribution<float> values(0.5f, 4.0f);
    std::vector<float> v(count);
    for (float& f : v) f = values(rng_);
    return v;
  }
  float random_scalar() { return std::uniform_real_distribution<float>(0.5f, 4.0f)(rng_); }
  // The operands of a saxpy step, random, on the device and on the host.
  struct Operands {
    std::vector<float> hx, hy;
    DeviceBuffer<float> x, y;
    float a = 0;
  };
  Operands operands(StreamRef s) {
    Operands o;
    o.hx = random_values();
    o.hy = random_values();
    o.x = upload(s, o.hx);
    o.y = upload(s, o.hy);
    o.a = random_scalar();
    return o;
  }
  DeviceBuffer<float> random_buffer(StreamRef s, std::vector<float>* host = nullptr) {
    std::vector<float> v = random_values();
    if (host != nullptr) *host = v;
    return upload(s, v);
  }
  // One step of work: y = a * x + y.
  auto saxpy_step(float a, const DeviceBuffer<float>& x, DeviceBuffer<float>& y) {
    return [this, a, &x, &y](StreamRef s) { launch(s, saxpy_, one_block, a, x, y, n); };
  }
  static std::vector<float> saxpy_on_host(float a, const std::vector<float>& x, std::vector<float> y, int times = 1) {
    for (int t = 0; t < times; ++t)
      for (std::size_t i = 0; i < y.size(); ++i) y[i] = a * x[i] + y[i];
    return y;
  }
  int instantiations() { return fake().calls(EntryId::GraphInstantiateWithParams); }
  int updates() { return fake().calls(EntryId::GraphExecUpdate); }
  int replays() { return fake().calls(EntryId::GraphLaunch); }
  std::size_t live_memory() { return fake().live("device memory"); }

  Module module_;
  Kernel<SaxpySig> saxpy_;
  Kernel<FillSig> fill_;
  Kernel<PositionsSig> positions_;
  std::mt19937 rng_;
  std::unique_ptr<::testing::ScopedTrace> seed_trace_;
};

void expect_statistics(const GraphCacheStatistics& s, std::uint64_t hits, std::uint64_t updates,
                       std::uint64_t captures, std::uint64_t recaptures, std::uint64_t eager_runs,
                       std::uint64_t evictions) {
  EXPECT_EQ(s.hits, hits);
  EXPECT_EQ(s.updates, updates);
  EXPECT_EQ(s.captures, captures);
  EXPECT_EQ(s.recaptures, recaptures);
  EXPECT_EQ(s.eager_runs, eager_runs);
  EXPECT_EQ(s.evictions, evictions);
}

// ---- hits, updates, recaptures ----

TEST_F(GraphCacheTest, FirstRunCapturesAndLaterRunsReplayWithoutCallingTheWork) {
  Stream s(dev());
  auto [hx, hy, x, y, a] = operands(s);
  GraphCache<int> cache;
  int calls = 0;
  auto step = saxpy_step(a, x, y);
  auto counted = [&](StreamRef st) {
    ++calls;
    step(st);
  };
  EXPECT_EQ(cache.run(s, 8, counted), GraphCacheOutcome::captured);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(cache.run(s, 8, counted), GraphCacheOutcome::hit);
  EXPECT_EQ(calls, 1) << "a hit replays the executable; the work is not called";
  EXPECT_EQ(instantiations(), 1);
  EXPECT_EQ(replays(), 5);
  EXPECT_EQ(download(s, y), saxpy_on_host(a, hx, hy, 5));
  GraphCacheStatistics st = cache.statistics();
  expect_statistics(st, 4, 0, 1, 0, 0, 0);
  EXPECT_EQ(st.runs(), 5u);
  EXPECT_EQ(st.instantiations(), 1u);
  EXPECT_TRUE(cache.contains(8));
  EXPECT_EQ(cache.size(), 1u);
}

TEST_F(GraphCacheTest, ChangedBuffersAndScalarsUpdateTheExecutableInPlace) {
  Stream s(dev());
  std::vector<float> hx1, hy1, hx2, hy2;
  DeviceBuffer<float> x1 = random_buffer(s, &hx1), y1 = random_buffer(s, &hy1);
  DeviceBuffer<float> x2 = random_buffer(s, &hx2), y2 = random_buffer(s, &hy2);
  float a1 = random_scalar(), a2 = random_scalar() + 5.0f;
  GraphCache<int> cache;
  EXPECT_EQ(cache.run(s, 1, saxpy_step(a1, x1, y1)), GraphCacheOutcome::captured);
  EXPECT_EQ(cache.update_and_run(s, 1, saxpy_step(a2, x2, y2)), GraphCacheOutcome::updated);
  EXPECT_EQ(cache.run(s, 1, saxpy_step(a2, x2, y2)), GraphCacheOutcome::hit);
  EXPECT_EQ(instantiations(), 1) << "updated in place, not instantiated again";
  EXPECT_EQ(updates(), 1);
  EXPECT_EQ(download(s, y1), saxpy_on_host(a1, hx1, hy1)) << "the first buffers were left alone after the update";
  EXPECT_EQ(download(s, y2), saxpy_on_host(a2, hx2, hy2, 2));
  expect_statistics(cache.statistics(), 1, 1, 1, 0, 0, 0);
}

TEST_F(GraphCacheTest, UpdateAndRunWithTheSameArgumentsIsAnUpdate) {
  Stream s(dev());
  auto [hx, hy, x, y, a] = operands(s);
  GraphCache<int> cache;
  cache.update_and_run(s, 1, saxpy_step(a, x, y));
  EXPECT_EQ(cache.update_and_run(s, 1, saxpy_step(a, x, y)), GraphCacheOutcome::updated);
  EXPECT_EQ(download(s, y), saxpy_on_host(a, hx, hy, 2));
  expect_statistics(cache.statistics(), 0, 1, 1, 0, 0, 0);
}

TEST_F(GraphCacheTest, AChangedTopologyIsCapturedAndInstantiatedAnew) {
  Stream s(dev());
  auto [hx, hy, x, y, a] = operands(s);
  float b = random_scalar();
  GraphCache<int> cache;
  cache.run(s, 1, saxpy_step(a, x, y));
  auto two_kernels = [&](StreamRef st) {
    launch(st, saxpy_, one_block, a, x, y, n);
    launch(st, saxpy_, one_block, b, x, y, n);
  };
  EXPECT_EQ(cache.update_and_run(s, 1, two_kernels), GraphCacheOutcome::recaptured);
  EXPECT_EQ(cache.run(s, 1, two_kernels), GraphCacheOutcome::hit);
  EXPECT_EQ(instantiations(), 2);
  std::vector<float> expected = saxpy_on_host(a, hx, hy);
  for (int i = 0; i < 2; ++i) expected = saxpy_on_host(b, hx, saxpy_on_host(a, hx, expected));
  EXPECT_EQ(download(s, y), expected);
  expect_statistics(cache.statistics(), 1, 0, 1, 1, 0, 0);
  ASSERT_NE(cache.executable(1), nullptr);
  EXPECT_EQ(cache.executable(1)->node_count(), 2u);
  EXPECT_EQ(cache.graph(1).node_count(), 2u) << "the entry keeps the graph its new executable was made from";
}

TEST_F(GraphCacheTest, KeysAreIndependentAndReplaysMayGoToAnyStream) {
  Stream s(dev()), r(dev());
  std::vector<float> hx, hy1, hy8;
  DeviceBuffer<float> x = random_buffer(s, &hx), y1 = random_buffer(s, &hy1), y8 = random_buffer(s, &hy8);
  float a = random_scalar(), b = random_scalar();
  GraphCache<int> cache;
  cache.run(s, 1, saxpy_step(a, x, y1));
  cache.run(s, 8, saxpy_step(b, x, y8));
  EXPECT_EQ(cache.run(r, 1, saxpy_step(a, x, y1)), GraphCacheOutcome::hit);
  EXPECT_EQ(cache.run(r, 8, saxpy_step(b, x, y8)), GraphCacheOutcome::hit);
  EXPECT_EQ(download(r, y1), saxpy_on_host(a, hx, hy1, 2));
  EXPECT_EQ(download(r, y8), saxpy_on_host(b, hx, hy8, 2));
  expect_statistics(cache.statistics(), 2, 0, 2, 0, 0, 0);
}

TEST_F(GraphCacheTest, ShapesArePairTupleAndArrayKeys) {
  Stream s(dev());
  DeviceBuffer<float> x = random_buffer(s), y = random_buffer(s);
  float a = random_scalar();
  GraphCache<std::pair<int, int>> pairs;
  GraphCache<std::tuple<int, long, char>> tuples;
  GraphCache<std::array<int, 3>> arrays;
  EXPECT_EQ(pairs.run(s, {8, 128}, saxpy_step(a, x, y)), GraphCacheOutcome::captured);
  EXPECT_EQ(pairs.run(s, {8, 256}, saxpy_step(a, x, y)), GraphCacheOutcome::captured);
  EXPECT_EQ(pairs.run(s, {8, 128}, saxpy_step(a, x, y)), GraphCacheOutcome::hit);
  EXPECT_EQ(tuples.run(s, {1, 2L, 'c'}, saxpy_step(a, x, y)), GraphCacheOutcome::captured);
  EXPECT_EQ(tuples.run(s, {1, 2L, 'c'}, saxpy_step(a, x, y)), GraphCacheOutcome::hit);
  EXPECT_EQ(arrays.run(s, {1, 2, 3}, saxpy_step(a, x, y)), GraphCacheOutcome::captured);
  EXPECT_EQ(arrays.run(s, {3, 2, 1}, saxpy_step(a, x, y)), GraphCacheOutcome::captured);
  GraphKeyHash<std::array<int, 3>> hash;
  EXPECT_NE(hash({1, 2, 3}), hash({3, 2, 1}));
}

// ---- eviction ----

TEST_F(GraphCacheTest, TheLeastRecentlyRunKeyIsEvictedBeyondTheCapacity) {
  Stream s(dev());
  DeviceBuffer<float> x = random_buffer(s), y = random_buffer(s);
  float a = random_scalar();
  GraphCache<int> cache({.capacity = 2});
  EXPECT_EQ(cache.capacity(), 2u);
  cache.run(s, 1, saxpy_step(a, x, y));
  cache.run(s, 2, saxpy_step(a, x, y));
  cache.run(s, 1, saxpy_step(a, x, y));  // 2 is now the least recently run
  int execs = static_cast<int>(fake().live("graph exec"));
  cache.run(s, 3, saxpy_step(a, x, y));
  EXPECT_EQ(static_cast<int>(fake().live("graph exec")), execs) << "the evicted key's executable was destroyed";
  EXPECT_TRUE(cache.contains(1));
  EXPECT_FALSE(cache.contains(2));
  EXPECT_TRUE(cache.contains(3));
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.run(s, 2, saxpy_step(a, x, y)), GraphCacheOutcome::captured) << "an evicted key is captured again";
  EXPECT_FALSE(cache.contains(1)) << "1 was the least recently run then";
  expect_statistics(cache.statistics(), 1, 0, 4, 0, 0, 2);
  EXPECT_EQ(instantiations(), 4);
}

TEST_F(GraphCacheTest, ACapacityOfZeroIsRefused) {
  std::string m = testing::message_of<InvalidArgument>([] { GraphCache<int> cache({.capacity = 0}); });
  EXPECT_NE(m.find("capacity of 0"), std::string::npos) << m;
}

TEST_F(GraphCacheTest, EraseAndClearForgetKeysAndKeepTheStatistics) {
  Stream s(dev());
  DeviceBuffer<float> x = random_buffer(s), y = random_buffer(s);
  float a = random_scalar();
  GraphCache<int> cache;
  cache.run(s, 1, saxpy_step(a, x, y));
  cache.run(s, 2, saxpy_step(a, x, y));
  EXPECT_TRUE(cache.erase(1));
  EXPECT_FALSE(cache.erase(1));
  EXPECT_EQ(cache.run(s, 1, saxpy_step(a, x, y)), GraphCacheOutcome::captured);
  cache.clear();
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(fake().live("graph exec"), 0u);
  expect_statistics(cache.statistics(), 0, 0, 3, 0, 0, 0);
}

// ---- work that cannot be captured ----

TEST_F(GraphCacheTest, WorkThatCannotBeCapturedRunsEagerlyAndTheKeyRemembersWhy) {
  Stream s(dev());
  auto [hx, hy, x, y, a] = operands(s);
  GraphCache<int> cache;
  int calls = 0;
  auto synchronizing = [&](StreamRef st) {
    ++calls;
    launch(st, saxpy_, one_block, a, x, y, n);
    st.synchronize();  // cannot be captured: CaptureError
  };
  EXPECT_EQ(cache.run(s, 4, synchronizing), GraphCacheOutcome::eager);
  EXPECT_EQ(calls, 2) << "once captured (refused), once eagerly";
  expect_no_capture_left(s);
  std::optional<std::string> why = cache.not_capturable_reason(4);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("synchroniz"), std::string::npos) << *why;
  EXPECT_EQ(cache.run(s, 4, synchronizing), GraphCacheOutcome::eager);
  EXPECT_EQ(cache.update_and_run(s, 4, synchronizing), GraphCacheOutcome::eager);
  EXPECT_EQ(calls, 4) << "a key known not to be capturable is not captured again";
  EXPECT_EQ(instantiations(), 0);
  EXPECT_EQ(cache.executable(4), nullptr);
  EXPECT_FALSE(cache.graph(4));
  EXPECT_EQ(download(s, y), saxpy_on_host(a, hx, hy, 3));
  expect_statistics(cache.statistics(), 0, 0, 0, 0, 3, 0);

  EXPECT_TRUE(cache.erase(4));
  EXPECT_EQ(cache.run(s, 4, saxpy_step(a, x, y)), GraphCacheOutcome::captured) << "erase lets the key be tried again";
  EXPECT_FALSE(cache.not_capturable_reason(4).has_value());
}

TEST_F(GraphCacheTest, AKeyWhoseWorkStopsBeingCapturableDropsItsExecutableAndRunsEagerly) {
  Stream s(dev());
  auto [hx, hy, x, y, a] = operands(s);
  GraphCache<int> cache;
  cache.run(s, 1, saxpy_step(a, x, y));
  EXPECT_EQ(cache.update_and_run(s, 1,
                                 [&](StreamRef st) {
                                   launch(st, saxpy_, one_block, a, x, y, n);
                                   DeviceBuffer<float> scratch(st, n, uninitialized);  // allocation: not capturable
                                 }),
            GraphCacheOutcome::eager);
  EXPECT_EQ(cache.executable(1), nullptr);
  ASSERT_TRUE(cache.not_capturable_reason(1).has_value());
  EXPECT_EQ(cache.run(s, 1, saxpy_step(a, x, y)), GraphCacheOutcome::eager);
  EXPECT_EQ(download(s, y), saxpy_on_host(a, hx, hy, 3));
  EXPECT_EQ(fake().live("graph exec"), 0u);
}

TEST_F(GraphCacheTest, WorkThatSubmitsNothingRunsOnceAndIsRememberedAsNotCapturable) {
  Stream s(dev());
  GraphCache<int> cache;
  int calls = 0;
  auto host_only = [&] { ++calls; };
  EXPECT_EQ(cache.run(s, 1, host_only), GraphCacheOutcome::eager);
  EXPECT_EQ(calls, 1) << "the call that found nothing to capture was the run";
  std::optional<std::string> why = cache.not_capturable_reason(1);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("submitted nothing"), std::string::npos) << *why;
  EXPECT_EQ(cache.run(s, 1, host_only), GraphCacheOutcome::eager);
  EXPECT_EQ(calls, 2);
  expect_statistics(cache.statistics(), 0, 0, 0, 0, 2, 0);
}

TEST_F(GraphCacheTest, OtherExceptionsReachTheCallerAndLeaveTheKeyAsItWas) {
  Stream s(dev());
  auto [hx, hy, x, y, a] = operands(s);
  GraphCache<int> cache;
  EXPECT_THROW(cache.run(s, 1, [](StreamRef) { throw std::runtime_error("no"); }), std::runtime_error);
  EXPECT_FALSE(cache.contains(1)) << "a first run that threw holds nothing";
  cache.run(s, 1, saxpy_step(a, x, y));
  EXPECT_THROW(cache.update_and_run(s, 1,
                                    [&](StreamRef st) {
                                      launch(st, saxpy_, one_block, 2.0f * a, x, y, n);
                                      throw std::runtime_error("no");
                                    }),
               std::runtime_error);
  expect_no_capture_left(s);
  EXPECT_EQ(cache.run(s, 1, saxpy_step(a, x, y)), GraphCacheOutcome::hit);
  EXPECT_EQ(download(s, y), saxpy_on_host(a, hx, hy, 2)) << "the executable is the one from before";
  expect_statistics(cache.statistics(), 1, 0, 1, 0, 0, 0);
}

TEST_F(GraphCacheTest, AStreamThatIsAlreadyCapturingIsTheCallersError) {
  Stream s(dev());
  DeviceBuffer<float> x = random_buffer(s), y = random_buffer(s);
  GraphCache<int> cache;
  {
    Capture outer(s);
    EXPECT_THROW(cache.run(s, 1, saxpy_step(1.0f, x, y)), CaptureError);
    EXPECT_FALSE(outer.end().has_value());
  }
  EXPECT_FALSE(cache.contains(1)) << "the key is not marked as not capturable";
}

// ---- lifetimes and ordering ----

TEST_F(GraphCacheTest, CachedGraphsKeepTheirBuffersAliveAfterTheCallerFreesThem) {
  Stream s(dev());
  std::vector<float> hx, hy;
  auto x = std::make_unique<DeviceBuffer<float>>(random_buffer(s, &hx));
  auto y = std::make_unique<DeviceBuffer<float>>(random_buffer(s, &hy));
  CUdeviceptr y_address = y->device_pointer();
  float a = random_scalar();
  std::size_t before = live_memory();
  GraphCache<int> cache;
  cache.run(s, 1, saxpy_step(a, *x, *y));
  x.reset();
  y.reset();
  run_deferred_releases();
  EXPECT_EQ(live_memory(), before) << "the cached executable holds both buffers";
  EXPECT_EQ(cache.run(s, 1, [] { FAIL() << "a hit does not call the work"; }), GraphCacheOutcome::hit);
  s.synchronize();
  std::vector<float> got(reinterpret_cast<const float*>(y_address), reinterpret_cast<const float*>(y_address) + n);
  EXPECT_EQ(got, saxpy_on_host(a, hx, hy, 2));
  cache.erase(1);
  run_deferred_releases();
  EXPECT_EQ(live_memory(), before - 2) << "freed once the key is gone";
}

TEST_F(GraphCacheTest, AnUpdatedExecutableHoldsItsNewBuffersAndLetsTheReplacedOnesGo) {
  Stream s(dev());
  std::vector<float> hx, hy;
  DeviceBuffer<float> x1 = random_buffer(s), y1 = random_buffer(s);
  auto x2 = std::make_unique<DeviceBuffer<float>>(random_buffer(s));
  auto y2 = std::make_unique<DeviceBuffer<float>>(random_buffer(s));
  auto x3 = std::make_unique<DeviceBuffer<float>>(random_buffer(s, &hx));
  auto y3 = std::make_unique<DeviceBuffer<float>>(random_buffer(s, &hy));
  CUdeviceptr y3_address = y3->device_pointer();
  float a = random_scalar();
  GraphCache<int> cache;
  cache.run(s, 1, saxpy_step(a, x1, y1));
  cache.update_and_run(s, 1, saxpy_step(a, *x2, *y2));
  std::size_t with_second = live_memory();
  x2.reset();
  y2.reset();
  run_deferred_releases();
  EXPECT_EQ(live_memory(), with_second) << "the executable runs the second buffers: they stay";
  cache.update_and_run(s, 1, saxpy_step(a, *x3, *y3));
  x3.reset();
  y3.reset();
  s.synchronize();
  run_deferred_releases();
  EXPECT_EQ(live_memory(), with_second - 2) << "the second buffers went once no replay needed them; the third stay";
  cache.run(s, 1, [] {});
  s.synchronize();
  std::vector<float> got(reinterpret_cast<const float*>(y3_address), reinterpret_cast<const float*>(y3_address) + n);
  EXPECT_EQ(got, saxpy_on_host(a, hx, hy, 2));
}

TEST_F(GraphCacheTest, EvictingAKeyWhileItsReplaysAreQueuedKeepsItsBuffersUntilTheyRan) {
  Stream s(dev());
  auto x = std::make_unique<DeviceBuffer<float>>(random_buffer(s));
  auto y = std::make_unique<DeviceBuffer<float>>(random_buffer(s));
  DeviceBuffer<float> other(s, n, zeroed);
  float a = random_scalar(), value = random_scalar();
  std::size_t before = live_memory();
  GraphCache<int> cache({.capacity = 1});
  cache.run(s, 1, saxpy_step(a, *x, *y));
  fake::defer_graph_replays(true);
  for (int i = 0; i < 3; ++i) cache.run(s, 1, [] {});
  x.reset();
  y.reset();
  cache.run(s, 2, [&](StreamRef st) { launch(st, fill_, one_block, other, value, n); });  // evicts key 1
  run_deferred_releases();
  EXPECT_EQ(cache.statistics().evictions, 1u);
  EXPECT_EQ(live_memory(), before) << "replays in flight still need key 1's buffers";
  EXPECT_EQ(fake::pending_replays(), 4u);
  fake::run_pending_replays();
  run_deferred_releases();
  EXPECT_EQ(live_memory(), before - 2) << "freed after the queued replays ran";
  fake::defer_graph_replays(false);
  EXPECT_EQ(download(s, other), std::vector<float>(n, value));
}

TEST_F(GraphCacheTest, UsesOnOtherStreamsAreOrderedAfterAReplay) {
  Stream s(dev()), r(dev());
  auto [hx, hy, x, y, a] = operands(s);
  DeviceBuffer<float> scratch(r, n, zeroed);
  GraphCache<int> cache;
  cache.run(s, 1, saxpy_step(a, x, y));
  cudakit::copy(r, y, scratch);  // must wait for the capture-and-launch on s
  cache.run(s, 1, saxpy_step(a, x, y));
  int waits_before = waits();
  cudakit::copy(r, y, scratch);
  EXPECT_GT(waits(), waits_before) << "the read on r waits for the replay on s";
  EXPECT_EQ(download(r, scratch), saxpy_on_host(a, hx, hy, 2));
  // The hazard model (checked at teardown) sees every access of the replays and copies.
}

// ---- values that change every step ----

TEST_F(GraphCacheTest, AValueSetBeforeEachRunChangesEveryStepWithoutCaptureOrUpdate) {
  Stream s(dev());
  DeviceBuffer<float> out(s, n, zeroed);
  std::uniform_int_distribution<int> positions(1, 1 << 20);
  DeviceValue<int> position(s, positions(rng_));
  GraphCache<int> cache;
  auto step = [&](StreamRef st) { launch(st, positions_, one_block, position.span(), out, n); };
  for (int i = 0; i < 10; ++i) {
    int p = positions(rng_);
    position.set(s, p);
    cache.run(s, 32, step);
    std::vector<float> got = download(s, out);
    for (int j = 0; j < n; ++j) ASSERT_EQ(got[j], static_cast<float>(p + j)) << "step " << i << ", element " << j;
  }
  expect_statistics(cache.statistics(), 9, 0, 1, 0, 0, 0);
  EXPECT_EQ(instantiations(), 1);
  EXPECT_EQ(updates(), 0);
  EXPECT_EQ(fake().calls(EntryId::GraphExecKernelNodeSetParams), 0);
}

TEST_F(GraphCacheTest, AValueSetOnOneStreamIsOrderedBeforeAReplayOnAnother) {
  Stream s(dev()), r(dev());
  DeviceBuffer<float> out(r, n, zeroed);
  DeviceValue<int> position(s, 0);
  GraphCache<int> cache;
  auto step = [&](StreamRef st) { launch(st, positions_, one_block, position.span(), out, n); };
  cache.run(r, 1, step);
  int p = std::uniform_int_distribution<int>(1, 1000)(rng_);
  int waits_before = waits();
  position.set(s, p);  // waits for the replay's read on r
  cache.run(r, 1, step);  // waits for the set on s
  EXPECT_GE(waits() - waits_before, 2);
  EXPECT_EQ(download(r, out)[5], static_cast<float>(p + 5));
}

// (The fake records no function for captured kernel nodes, so the argument update itself
// runs on the GPU: GraphCacheGpuTest.AScalarArgumentIsUpdatedInPlaceThroughTheCachedExecutable.)
TEST_F(GraphCacheTest, TheExecutableAndTheGraphItWasMadeFromAreReachableForArgumentUpdates) {
  Stream s(dev());
  auto [hx, hy, x, y, a] = operands(s);
  DeviceBuffer<float> x2 = random_buffer(s), y2 = random_buffer(s);
  GraphCache<int> cache;
  EXPECT_EQ(cache.executable(1), nullptr);
  EXPECT_FALSE(cache.graph(1));
  cache.run(s, 1, saxpy_step(a, x, y));
  GraphExec* exec = cache.executable(1);
  ASSERT_NE(exec, nullptr);
  std::vector<GraphNode> kernels = cache.graph(1).kernel_nodes();
  ASSERT_EQ(kernels.size(), 1u);
  cache.update_and_run(s, 1, saxpy_step(a, x2, y2));
  EXPECT_EQ(cache.executable(1), exec) << "updated in place: the same executable";
  EXPECT_EQ(cache.graph(1).kernel_nodes(), kernels) << "its nodes are still those of the graph it was made from";
  cache.update_and_run(s, 1, [&](StreamRef st) {
    launch(st, saxpy_, one_block, a, x, y, n);
    launch(st, saxpy_, one_block, a, x2, y2, n);
  });
  ASSERT_EQ(cache.graph(1).kernel_nodes().size(), 2u) << "instantiated anew: the new graph's nodes";
  EXPECT_EQ(cache.executable(1)->node_count(), 2u);
}

TEST_F(GraphCacheTest, ADeviceValueRoundTripsEveryWidth) {
  Stream s(dev());
  std::uniform_int_distribution<std::int64_t> wide(1, INT64_MAX);
  std::int64_t v64 = wide(rng_);
  DeviceValue<std::int64_t> big(s, v64);
  EXPECT_EQ(big.read(s), v64);
  v64 = wide(rng_);
  big.set(s, v64);
  EXPECT_EQ(big.read(s), v64);
  double d = std::uniform_real_distribution<double>(-1e9, 1e9)(rng_);
  DeviceValue<double> real(s, d);
  EXPECT_EQ(real.read(s), d);
  auto v16 = static_cast<std::uint16_t>(std::uniform_int_distribution<int>(1, 65535)(rng_));
  DeviceValue<std::uint16_t> half(s, v16);
  EXPECT_EQ(half.read(s), v16);
  auto v8 = static_cast<std::uint8_t>(std::uniform_int_distribution<int>(1, 255)(rng_));
  DeviceValue<std::uint8_t> byte(s, v8);
  EXPECT_EQ(byte.read(s), v8);
  float f = random_scalar();
  DeviceValue<float> single(s, f);
  EXPECT_EQ(single.read(s), f);
}

TEST_F(GraphCacheTest, ADeviceValueSetInsideACaptureIsRefused) {
  Stream s(dev());
  DeviceValue<int> position(s, 3);
  GraphCache<int> cache;
  std::string m = testing::message_of<CaptureError>([&] {
    Capture scope(s);
    position.set(s, 4);
  });
  EXPECT_NE(m.find("DeviceValue::set"), std::string::npos) << m;
  EXPECT_NE(m.find("every replay"), std::string::npos) << m;
  DeviceValue<int> empty;
  EXPECT_THROW(empty.set(s, 1), EmptyHandle);
  EXPECT_EQ(position.read(s), 3);
}

// ---- threads ----

TEST_F(GraphCacheTest, ASecondThreadIsRefusedWhileARunIsInProgress) {
  Stream s(dev());
  DeviceBuffer<float> x = random_buffer(s), y = random_buffer(s);
  GraphCache<int> cache;
  std::atomic<bool> inside{false}, release{false};
  std::thread runner([&] {
    cache.run(s, 1, [&](StreamRef st) {
      launch(st, saxpy_, one_block, 1.0f, x, y, n);
      inside = true;
      while (!release) std::this_thread::sleep_for(1ms);
    });
  });
  while (!inside) std::this_thread::sleep_for(1ms);
  Stream mine(dev());
  std::string m = testing::message_of<InvalidArgument>([&] { cache.run(mine, 2, [] {}); });
  EXPECT_NE(m.find("in use by thread"), std::string::npos) << m;
  EXPECT_NE(m.find("one thread at a time"), std::string::npos) << m;
  EXPECT_THROW(cache.statistics(), InvalidArgument);
  release = true;
  runner.join();
  expect_statistics(cache.statistics(), 0, 0, 1, 0, 0, 0);
  EXPECT_FALSE(cache.contains(2));
}

TEST_F(GraphCacheTest, ACallFromInsideTheCachesOwnWorkIsRefused) {
  Stream s(dev());
  DeviceBuffer<float> x = random_buffer(s), y = random_buffer(s);
  GraphCache<int> cache;
  std::string m = testing::message_of<InvalidArgument>([&] {
    cache.run(s, 1, [&](StreamRef st) {
      launch(st, saxpy_, one_block, 1.0f, x, y, n);
      cache.run(st, 2, [] {});
    });
  });
  EXPECT_NE(m.find("from inside the work"), std::string::npos) << m;
  expect_no_capture_left(s);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.run(s, 1, saxpy_step(1.0f, x, y)), GraphCacheOutcome::captured) << "the cache is usable after";
}

TEST_F(GraphCacheTest, SessionsOnTheirOwnThreadsStreamsAndCachesAreIndependent) {
  constexpr int sessions = 4, steps = 40;
  std::vector<std::vector<float>> hx(sessions), hy(sessions);
  std::vector<float> scales(sessions);
  for (int i = 0; i < sessions; ++i) {
    hx[i] = random_values();
    hy[i] = random_values();
    scales[i] = random_scalar();
  }
  std::vector<std::vector<float>> results(sessions);
  std::vector<GraphCacheStatistics> statistics(sessions);
  std::vector<std::thread> threads;
  for (int i = 0; i < sessions; ++i)
    threads.emplace_back([&, i] {
      Stream s(dev());
      DeviceBuffer<float> x = upload(s, hx[i]), y = upload(s, hy[i]);
      DeviceValue<int> position(s, 0);
      DeviceBuffer<float> out(s, n, zeroed);
      GraphCache<int> cache({.capacity = 2});
      for (int step = 0; step < steps; ++step) {
        int batch = step % 3 == 0 ? 1 : 8;  // two keys, both held
        position.set(s, step);
        cache.run(s, batch, [&](StreamRef st) {
          launch(st, saxpy_, one_block, scales[i], x, y, n);
          launch(st, positions_, one_block, position.span(), out, n);
        });
      }
      results[i] = download(s, y);
      results[i].push_back(download(s, out)[0]);
      statistics[i] = cache.statistics();
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < sessions; ++i) {
    std::vector<float> expected = saxpy_on_host(scales[i], hx[i], hy[i], steps);
    expected.push_back(static_cast<float>(steps - 1));
    EXPECT_EQ(results[i], expected) << "session " << i;
    expect_statistics(statistics[i], steps - 2, 0, 2, 0, 0, 0);
  }
}

// ---- the hit path allocates nothing ----

TEST_F(GraphCacheTest, TheHitPathMakesNoHeapAllocation) {
  Stream s(dev());
  DeviceBuffer<float> x = random_buffer(s), y = random_buffer(s), out(s, n, zeroed);
  DeviceValue<int> position(s, 0);
  GraphCache<std::pair<int, int>> cache;
  auto step = [&](StreamRef st) {
    launch(st, saxpy_, one_block, 0.5f, x, y, n);
    launch(st, positions_, one_block, position.span(), out, n);
  };
  cache.run(s, {8, 1}, step);
  cache.run(s, {32, 1}, step);
  cache.run(s, {8, 1}, step);  // warm: every lazy structure exists
  long counted = 0;
  {
    CountAllocations c;
    for (int i = 0; i < 100; ++i) {
      position.set(s, i + 1);
      cache.run(s, {i % 2 == 0 ? 8 : 32, 1}, step);
    }
    counted = c.count();
  }
  EXPECT_EQ(counted, 0) << "heap allocations in 100 steps (a value set, then a hit)";
  EXPECT_EQ(cache.statistics().hits, 101u);
}

}  // namespace
}  // namespace cudakit
