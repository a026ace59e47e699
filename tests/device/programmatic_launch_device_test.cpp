// Programmatic dependent launch and device-side loops on a real GPU, with kernels compiled
// by NVRTC from cudakit's device headers (device_headers.hpp).
//
// The wait matters: a slow producer triggers its dependents at once, then spins, then
// writes. A dependent that skips cudakit::device::wait_for_predecessors() reads the
// poison the producer has not yet overwritten; the same dependent with the wait reads
// the producer's values. Shown for a launch on a stream, a captured graph and an explicit
// graph, and for the hand-off between streams, which cudakit keeps a full dependency (so
// even the dependent without the wait reads the right values there).
//
// The graph cache's loop: a step whose tokens depend on the step before, run N times in
// one launch (run_loop), equals the same step run once per launch.
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "gpu_fixture.hpp"
#include "under_sanitizer.hpp"

namespace cudakit {
namespace {

using testing::GpuTest;

const char* const source = R"(
#include "cudakit/device/programmatic_launch.cuh"
#include "cudakit/device/graph_condition.cuh"

extern "C" __global__ void fill_with(float* data, int n, float value) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) data[i] = value;
}
// Lets its dependents launch at once, then writes `value` only after `delay` clock cycles.
extern "C" __global__ void slow_producer(float* data, int n, float value, long long delay) {
  cudakit::device::trigger_dependents();
  long long start = clock64();
  while (clock64() - start < delay) {
  }
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) data[i] = value;
}
extern "C" __global__ void consumer_that_waits(const float* data, float* out, int n) {
  cudakit::device::wait_for_predecessors();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = data[i];
}
extern "C" __global__ void consumer_that_skips_the_wait(const float* data, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = data[i];
}
// One step of a recurrence: history[d] = history[d - 1] * 0.5 + inputs[d], d = (*done)++.
extern "C" __global__ void token(int* done, float* history, const float* inputs) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  int d = *done;
  history[d] = (d > 0 ? history[d - 1] * 0.5f : 0.0f) + inputs[d];
  *done = d + 1;
}
extern "C" __global__ void stop_after(unsigned long long loop, const int* done, int steps) {
  if (threadIdx.x == 0 && blockIdx.x == 0 && *done >= steps) cudakit::device::set_condition(loop, 0u);
}
)";

using FillWith = void(float*, int, float);
using SlowProducer = void(float*, int, float, long long);
using Consumer = void(const float*, float*, int);
using Token = void(int*, float*, const float*);
using StopAfter = void(unsigned long long, const int*, int);

constexpr int n = 1 << 16;
constexpr unsigned threads = 256;
constexpr float poison = -1.0f;

class ProgrammaticLaunchGpuTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    if (device().compute_capability().major < 9) GTEST_SKIP() << "programmatic dependent launch needs sm_90";
    Program program(source, "programmatic.cu");
    add_device_headers(program);
    module_ = Module::load(device(), program.compile(device()));
    fill_ = module_.kernel<FillWith>("fill_with");
    producer_ = module_.kernel<SlowProducer>("slow_producer");
    waits_ = module_.kernel<Consumer>("consumer_that_waits");
    skips_ = module_.kernel<Consumer>("consumer_that_skips_the_wait");
    token_ = module_.kernel<Token>("token");
    stop_ = module_.kernel<StopAfter>("stop_after");
    std::random_device seed;
    value_ = static_cast<float>(seed() % 1000) + 1.5f;
    delay_ = testing::spin_cycles(device(), 5.0);  // 5 ms: far beyond a launch's latency
  }

  // One producer block, so the dependent's blocks find room on the other multiprocessors.
  LaunchConfig producer_config() const { return LaunchConfig{1, threads}; }
  static LaunchConfig dependent() {
    LaunchConfig c{grid_for(n, threads), threads};
    c.programmatic_dependent_launch = true;
    return c;
  }
  static LaunchConfig cover() { return LaunchConfig{grid_for(n, threads), threads}; }

  // How many elements of `out` hold the poison, and how many the producer's value.
  struct Counts {
    int stale = 0, right = 0;
  };
  Counts count(const std::vector<float>& out) const {
    Counts c;
    for (float v : out) {
      c.stale += v == poison;
      c.right += v == value_;
    }
    return c;
  }

  // poison -> slow producer -> dependent consumer, on one stream.
  void chain(StreamRef s, DeviceBuffer<float>& data, DeviceBuffer<float>& out, const Kernel<Consumer>& consumer) {
    launch(s, fill_, cover(), data, n, poison);
    launch(s, fill_, cover(), out, n, -2.0f);
    launch(s, producer_, producer_config(), data, n, value_, delay_);
    launch(s, consumer, dependent(), std::as_const(data), out, n);
  }

  Module module_;
  Kernel<FillWith> fill_;
  Kernel<SlowProducer> producer_;
  Kernel<Consumer> waits_, skips_;
  Kernel<Token> token_;
  Kernel<StopAfter> stop_;
  float value_ = 0;
  long long delay_ = 0;
};

// compute-sanitizer runs kernels one at a time (the sanitize stage sets
// CUDAKIT_TEST_UNDER_SANITIZER=1), so there a dependent never overlaps its predecessor:
// that a skipped wait reads early is checked only where kernels can overlap.
bool kernels_can_overlap() { return !testing::under_sanitizer(); }

TEST_F(ProgrammaticLaunchGpuTest, OnAStreamADependentThatSkipsTheWaitReadsPoisonAndOneThatWaitsIsRight) {
  Stream s(device());
  DeviceBuffer<float> data(s, n, uninitialized), out(s, n, uninitialized);
  chain(s, data, out, skips_);
  Counts skipped = count(download(s, out));
  if (kernels_can_overlap())
    EXPECT_GT(skipped.stale, 0) << "the dependent ran before the producer wrote: the wait is what orders them";
  chain(s, data, out, waits_);
  Counts waited = count(download(s, out));
  EXPECT_EQ(waited.right, n) << waited.stale << " stale elements despite the wait";
}

TEST_F(ProgrammaticLaunchGpuTest, ACapturedChainKeepsItsProgrammaticEdgeAndTheWaitStillDecides) {
  Stream s(device());
  DeviceBuffer<float> data(s, n, uninitialized), out(s, n, uninitialized);
  for (const Kernel<Consumer>* consumer : {&skips_, &waits_}) {
    Graph g = capture_nonempty(s, [&] { chain(s, data, out, *consumer); });
    int programmatic = 0;
    for (const GraphEdge& e : g.edges()) programmatic += e.programmatic;
    EXPECT_EQ(programmatic, 1) << "the capture keeps the producer -> consumer edge programmatic";
    GraphExec exec = g.instantiate();
    exec.launch(s);
    Counts c = count(download(s, out));
    if (consumer == &skips_ && kernels_can_overlap())
      EXPECT_GT(c.stale, 0) << "graph: the dependent without the wait read early";
    else EXPECT_EQ(c.right, n) << "graph: the dependent with the wait";
  }
}

TEST_F(ProgrammaticLaunchGpuTest, AnExplicitGraphWithAProgrammaticEdgeBehavesTheSame) {
  Stream s(device());
  DeviceBuffer<float> data(s, n, uninitialized), out(s, n, uninitialized);
  for (const Kernel<Consumer>* consumer : {&skips_, &waits_}) {
    Graph g(device());
    GraphNode p1 = g.add_kernel(fill_, cover(), data, n, poison);
    GraphNode p2 = g.add_kernel({p1}, fill_, cover(), out, n, -2.0f);
    GraphNode produce = g.add_kernel({p2}, producer_, producer_config(), data, n, value_, delay_);
    g.add_kernel({produce}, *consumer, dependent(), std::as_const(data), out, n);
    GraphExec exec = g.instantiate();
    exec.launch(s);
    Counts c = count(download(s, out));
    if (consumer == &skips_ && kernels_can_overlap())
      EXPECT_GT(c.stale, 0) << "explicit graph: the dependent without the wait read early";
    else EXPECT_EQ(c.right, n) << "explicit graph: the dependent with the wait";
  }
}

TEST_F(ProgrammaticLaunchGpuTest, AHandOffBetweenStreamsStaysAFullDependencyEvenWithoutTheWait) {
  Stream a(device()), b(device());
  DeviceBuffer<float> data(a, n, uninitialized), out(b, n, uninitialized);
  // Live streams: data comes from stream a.
  launch(a, fill_, cover(), data, n, poison);
  launch(b, fill_, cover(), out, n, -2.0f);
  launch(a, producer_, producer_config(), data, n, value_, delay_);
  launch(b, skips_, dependent(), std::as_const(data), out, n);
  EXPECT_EQ(count(download(b, out)).right, n) << "live streams";
  // In a capture: a fork, the producer on one stream, the dependent on the other.
  Graph g = capture_nonempty(a, [&] {
    b.wait(a);
    launch(a, fill_, cover(), data, n, poison);
    launch(b, fill_, cover(), out, n, -2.0f);
    launch(a, producer_, producer_config(), data, n, value_, delay_);
    launch(b, skips_, dependent(), std::as_const(data), out, n);
  });
  for (const GraphEdge& e : g.edges()) EXPECT_FALSE(e.programmatic) << "a hand-off is never a programmatic edge";
  GraphExec exec = g.instantiate();
  exec.launch(a);
  EXPECT_EQ(count(download(a, out)).right, n) << "captured hand-off";
}

TEST_F(ProgrammaticLaunchGpuTest, ALoopOfStepsInOneLaunchEqualsOneStepPerLaunch) {
  if (!driver::has(driver::EntryId::GraphConditionalHandleCreate)) GTEST_SKIP() << "driver without conditional nodes";
  constexpr int slots = 64;
  constexpr int steps = 24;
  Stream s(device());
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> inputs(slots);
  for (float& v : inputs) v = d(rng);
  DeviceBuffer<float> in = upload(s, inputs);
  DeviceBuffer<float> looped(s, slots, uninitialized), single(s, slots, uninitialized);
  launch(s, fill_, LaunchConfig{1, slots}, looped, slots, poison);
  launch(s, fill_, LaunchConfig{1, slots}, single, slots, poison);
  DeviceValue<int> done_looped(s, 0), done_single(s, 0);

  testing::settle_allocations_before_a_loop_capture(s);
  GraphCache<int> cache;
  auto step = [&](StreamRef on, ConditionalHandle loop) {
    launch(on, token_, LaunchConfig{1, 1}, done_looped.span(), looped, in);
    launch(on, stop_, LaunchConfig{1, 1}, loop.value, std::as_const(done_looped).span(), steps);
  };
  EXPECT_EQ(cache.run_loop(s, 1, step), GraphCacheOutcome::captured);
  for (int i = 0; i < steps; ++i)
    cache.run(s, 2, [&](StreamRef on) { launch(on, token_, LaunchConfig{1, 1}, done_single.span(), single, in); });
  std::vector<float> a = download(s, looped), b = download(s, single);
  EXPECT_EQ(a, b) << "the same tokens, whether " << steps << " steps run in one launch or one per launch";
  EXPECT_NE(a[steps - 1], poison);
  EXPECT_EQ(a[steps], poison) << "no step past the last";
  // Replays: the loop's state is reset before each, and each launch runs `steps` steps again.
  for (int round = 0; round < 3; ++round) {
    done_looped.set(s, 0);
    launch(s, fill_, LaunchConfig{1, slots}, looped, slots, poison);
    EXPECT_EQ(cache.run_loop(s, 1, step), GraphCacheOutcome::hit);
    EXPECT_EQ(download(s, looped), b) << "replay " << round;
  }
}

}  // namespace
}  // namespace cudakit
