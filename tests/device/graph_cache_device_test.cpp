// The graph cache on a real GPU (graph_cache.hpp, device_value.hpp): a small decode-like
// step of three kernels (a projection, an attention-like read of a cache of past rows up
// to a position held in a DeviceValue, a feedback into the next step's input) run through
// the cache: hits, an update with new buffers, a recapture with a changed topology,
// eviction between batch sizes, the eager fallback, a scalar argument updated in place
// through the cached executable, and four sessions on four threads.
// Every step is checked against the same step on the host, on fresh random data.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpu_fixture.hpp"

namespace cudakit {
namespace {

using testing::GpuTest;

constexpr unsigned threads = 256;

const char* const step_source = R"(
extern "C" __global__ void project(const float* in, const float* weight, float bias, float* hidden, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) hidden[i] = in[i] * weight[i] + bias;
}
// Writes this step's row at *position, then averages rows 0..*position (each thread its column).
extern "C" __global__ void attend(const float* hidden, float* rows, const int* position, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int p = *position;
  rows[p * n + i] = hidden[i];
  float sum = 0.0f;
  for (int r = 0; r <= p; ++r) sum += rows[r * n + i];
  out[i] = hidden[i] + sum / (p + 1);
}
extern "C" __global__ void feed_back(const float* out, float* in, float scale, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) in[i] = out[i] * scale;
}
extern "C" __global__ void add_bias(float* data, float bias, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] += bias;
}
)";

using Project = void(const float*, const float*, float, float*, int);
using Attend = void(const float*, float*, const int*, float*, int);
using FeedBack = void(const float*, float*, float, int);
using AddBias = void(float*, float, int);

struct StepKernels {
  Kernel<Project> project;
  Kernel<Attend> attend;
  Kernel<FeedBack> feed_back;
  Kernel<AddBias> add_bias;
};

std::vector<float> random_floats(std::mt19937& rng, std::size_t count, float low, float high) {
  std::uniform_real_distribution<float> d(low, high);
  std::vector<float> v(count);
  for (float& f : v) f = d(rng);
  return v;
}

// One model's buffers on the device and the same state on the host. The rows past the
// current position hold NaN: a read of one the step has not written shows in the output.
struct Model {
  int n = 0;
  int max_positions = 0;
  float bias = 0, feedback = 0, extra_bias = 0;
  DeviceBuffer<float> in, weight, hidden, rows, out;
  std::vector<float> host_in, host_weight, host_rows;

  Model(StreamRef s, int width, int positions, std::mt19937& rng) : n(width), max_positions(positions) {
    host_in = random_floats(rng, n, -1.0f, 1.0f);
    host_weight = random_floats(rng, n, -1.0f, 1.0f);
    host_rows.assign(std::size_t(n) * max_positions, std::numeric_limits<float>::quiet_NaN());
    bias = random_floats(rng, 1, -0.5f, 0.5f)[0];
    feedback = random_floats(rng, 1, 0.25f, 0.75f)[0];
    extra_bias = random_floats(rng, 1, 0.5f, 1.5f)[0];
    in = upload(s, host_in);
    weight = upload(s, host_weight);
    hidden = DeviceBuffer<float>(s, n, uninitialized);
    rows = upload(s, host_rows);
    out = upload(s, random_floats(rng, n, 100.0f, 200.0f));  // poison: no step output looks like this
  }

  // The step's work, as the cache captures it; `with_extra_bias` adds a fourth kernel.
  auto step(const StepKernels& k, const DeviceValue<int>& position, bool with_extra_bias = false) {
    return [this, &k, &position, with_extra_bias](StreamRef s) {
      LaunchConfig cover{grid_for(n, threads), threads};
      launch(s, k.project, cover, in, weight, bias, hidden, n);
      launch(s, k.attend, cover, hidden, rows, position.span(), out, n);
      if (with_extra_bias) launch(s, k.add_bias, cover, out, extra_bias, n);
      launch(s, k.feed_back, cover, out, in, feedback, n);
    };
  }

  // The same step on the host; returns its output.
  std::vector<float> step_on_host(int position, bool with_extra_bias = false) {
    std::vector<float> result(n);
    for (int i = 0; i < n; ++i) {
      float h = host_in[i] * host_weight[i] + bias;
      host_rows[std::size_t(position) * n + i] = h;
      float sum = 0.0f;
      for (int r = 0; r <= position; ++r) sum += host_rows[std::size_t(r) * n + i];
      float o = h + sum / float(position + 1);
      if (with_extra_bias) o += extra_bias;
      result[i] = o;
      host_in[i] = o * feedback;
    }
    return result;
  }
};

// Within a few float roundings of the host (the GPU contracts a*b+c into one FMA); a stale
// buffer, a wrong position or a NaN row is far outside.
::testing::AssertionResult matches_host(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "sizes " << got.size() << " and " << want.size();
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-4f * (1.0f + std::fabs(want[i]))))
      return ::testing::AssertionFailure() << "element " << i << ": device " << got[i] << ", host " << want[i];
  return ::testing::AssertionSuccess();
}

std::string words(const GraphCacheStatistics& s) {
  return "hits " + std::to_string(s.hits) + ", updates " + std::to_string(s.updates) + ", captures " +
         std::to_string(s.captures) + ", recaptures " + std::to_string(s.recaptures) + ", evictions " +
         std::to_string(s.evictions) + ", eager runs " + std::to_string(s.eager_runs);
}

class GraphCacheGpuTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    module_ = Module::load(device(), Program(step_source, "graph_cache_step.cu").compile(device()));
    kernels_.project = module_.kernel<Project>("project");
    kernels_.attend = module_.kernel<Attend>("attend");
    kernels_.feed_back = module_.kernel<FeedBack>("feed_back");
    kernels_.add_bias = module_.kernel<AddBias>("add_bias");
    unsigned seed = std::random_device{}();
    rng_.seed(seed);
    RecordProperty("seed", std::to_string(seed));
  }
  void TearDown() override {
    run_deferred_releases();
    GpuTest::TearDown();
  }

  Module module_;
  StepKernels kernels_;
  std::mt19937 rng_;
};

TEST_F(GraphCacheGpuTest, StepsHitThenUpdateWithNewBuffersThenRecaptureAChangedTopologyMatchingTheHost) {
  Stream s(device()), r(device());
  constexpr int n = 4096, positions = 16;
  DeviceValue<int> position(s, 0);
  GraphCache<int> cache({.capacity = 4});

  Model first(s, n, positions, rng_);
  for (int p = 0; p < 6; ++p) {
    position.set(s, p);
    GraphCacheOutcome o = cache.run(s, 1, first.step(kernels_, position));
    EXPECT_EQ(o, p == 0 ? GraphCacheOutcome::captured : GraphCacheOutcome::hit) << "step " << p;
    std::vector<float> want = first.step_on_host(p);
    ASSERT_TRUE(matches_host(download(r, first.out), want)) << "first model, step " << p;  // read on another stream
  }
  std::vector<float> first_out = download(s, first.out);

  // New buffers (another model, fresh random data), the same topology: updated in place.
  Model second(s, n, positions, rng_);
  for (int p = 0; p < 4; ++p) {
    position.set(s, p);
    auto step = second.step(kernels_, position);
    GraphCacheOutcome o = p == 0 ? cache.update_and_run(s, 1, step) : cache.run(s, 1, step);
    EXPECT_EQ(o, p == 0 ? GraphCacheOutcome::updated : GraphCacheOutcome::hit) << "step " << p;
    ASSERT_TRUE(matches_host(download(s, second.out), second.step_on_host(p))) << "second model, step " << p;
  }
  EXPECT_EQ(download(s, first.out), first_out) << "the update left the first model's buffers alone";

  // A fourth kernel: another topology, instantiated anew.
  for (int p = 4; p < 7; ++p) {
    position.set(s, p);
    auto step = second.step(kernels_, position, true);
    GraphCacheOutcome o = p == 4 ? cache.update_and_run(s, 1, step) : cache.run(s, 1, step);
    EXPECT_EQ(o, p == 4 ? GraphCacheOutcome::recaptured : GraphCacheOutcome::hit) << "step " << p;
    ASSERT_TRUE(matches_host(download(s, second.out), second.step_on_host(p, true))) << "changed topology, step " << p;
  }

  GraphCacheStatistics st = cache.statistics();
  EXPECT_EQ(st.hits, 5u + 3u + 2u);
  EXPECT_EQ(st.updates, 1u);
  EXPECT_EQ(st.captures, 1u);
  EXPECT_EQ(st.recaptures, 1u);
  EXPECT_EQ(st.eager_runs, 0u);
  std::printf("graph cache: %s\n", words(st).c_str());
}

TEST_F(GraphCacheGpuTest, AScalarArgumentIsUpdatedInPlaceThroughTheCachedExecutable) {
  Stream s(device());
  Model m(s, 4096, 8, rng_);
  DeviceValue<int> position(s, 0);
  GraphCache<int> cache;
  EXPECT_EQ(cache.run(s, 1, m.step(kernels_, position)), GraphCacheOutcome::captured);
  ASSERT_TRUE(matches_host(download(s, m.out), m.step_on_host(0)));
  std::vector<GraphNode> nodes = cache.graph(1).kernel_nodes();
  ASSERT_EQ(nodes.size(), 3u);
  for (int p = 1; p < 4; ++p) {
    m.bias = random_floats(rng_, 1, 1.0f, 2.0f)[0];
    cache.executable(1)->update_kernel_arguments(nodes[0], kernels_.project, m.in, m.weight, m.bias, m.hidden, m.n);
    position.set(s, p);
    EXPECT_EQ(cache.run(s, 1, m.step(kernels_, position)), GraphCacheOutcome::hit) << "step " << p;
    ASSERT_TRUE(matches_host(download(s, m.out), m.step_on_host(p))) << "step " << p;
  }
  EXPECT_EQ(cache.statistics().instantiations(), 1u);
}

TEST_F(GraphCacheGpuTest, BatchSizesAsKeysEvictTheLeastRecentlyRunAndCaptureItAgain) {
  Stream s(device());
  constexpr int positions = 8;
  const int batches[] = {1, 8, 32};
  std::vector<std::unique_ptr<Model>> models;
  std::vector<std::unique_ptr<DeviceValue<int>>> values;
  std::vector<int> next(3, 0);
  for (int b : batches) {
    models.push_back(std::make_unique<Model>(s, 256 * b, positions, rng_));
    values.push_back(std::make_unique<DeviceValue<int>>(s, 0));
  }
  GraphCache<int> cache({.capacity = 2});
  // 1, 8, 1, 32 (evicts 8), 8 (captured again; evicts 1), 32, 8
  const int order[] = {0, 1, 0, 2, 1, 2, 1};
  const GraphCacheOutcome expected[] = {GraphCacheOutcome::captured, GraphCacheOutcome::captured,
                                        GraphCacheOutcome::hit,      GraphCacheOutcome::captured,
                                        GraphCacheOutcome::captured, GraphCacheOutcome::hit,
                                        GraphCacheOutcome::hit};
  for (int i = 0; i < 7; ++i) {
    int k = order[i];
    Model& m = *models[k];
    values[k]->set(s, next[k]);
    EXPECT_EQ(cache.run(s, batches[k], m.step(kernels_, *values[k])), expected[i]) << "run " << i;
    ASSERT_TRUE(matches_host(download(s, m.out), m.step_on_host(next[k]))) << "run " << i << ", batch " << batches[k];
    ++next[k];
  }
  GraphCacheStatistics st = cache.statistics();
  EXPECT_EQ(st.evictions, 2u);
  EXPECT_EQ(st.captures, 4u);
  EXPECT_EQ(st.hits, 3u);
  EXPECT_TRUE(cache.contains(8));
  EXPECT_TRUE(cache.contains(32));
  EXPECT_FALSE(cache.contains(1));
  std::printf("graph cache: %s\n", words(st).c_str());
}

TEST_F(GraphCacheGpuTest, WorkThatSynchronizesRunsEagerlyAndMatchesTheHost) {
  Stream s(device());
  Model m(s, 2048, 4, rng_);
  DeviceValue<int> position(s, 0);
  GraphCache<int> cache;
  for (int p = 0; p < 3; ++p) {
    position.set(s, p);
    auto step = m.step(kernels_, position);
    EXPECT_EQ(cache.run(s, 1,
                        [&](StreamRef st) {
                          step(st);
                          st.synchronize();
                        }),
              GraphCacheOutcome::eager);
    ASSERT_TRUE(matches_host(download(s, m.out), m.step_on_host(p))) << "step " << p;
  }
  ASSERT_TRUE(cache.not_capturable_reason(1).has_value());
  EXPECT_NE(cache.not_capturable_reason(1)->find("synchroniz"), std::string::npos) << *cache.not_capturable_reason(1);
  EXPECT_EQ(cache.statistics().eager_runs, 3u);
}

TEST_F(GraphCacheGpuTest, FourSessionsOnFourThreadsEachWithItsOwnStreamAndCacheMatchTheHost) {
  constexpr int sessions = 4, steps = 16, n = 8192;
  std::vector<unsigned> seeds;
  for (int i = 0; i < sessions; ++i) seeds.push_back(static_cast<unsigned>(rng_()));
  std::vector<std::string> failures(sessions);
  std::vector<GraphCacheStatistics> statistics(sessions);
  std::vector<std::thread> workers;
  for (int i = 0; i < sessions; ++i)
    workers.emplace_back([&, i] {
      try {
        std::mt19937 rng(seeds[i]);
        Stream s(device());
        Model m(s, n, steps, rng);
        DeviceValue<int> position(s, 0);
        GraphCache<int> cache;
        for (int p = 0; p < steps && failures[i].empty(); ++p) {
          position.set(s, p);
          cache.run(s, 8, m.step(kernels_, position));
          ::testing::AssertionResult ok = matches_host(download(s, m.out), m.step_on_host(p));
          if (!ok) failures[i] = "step " + std::to_string(p) + ": " + ok.message();
        }
        statistics[i] = cache.statistics();
      } catch (const std::exception& e) {
        failures[i] = e.what();
      }
    });
  for (auto& w : workers) w.join();
  for (int i = 0; i < sessions; ++i) {
    EXPECT_EQ(failures[i], "") << "session " << i;
    EXPECT_EQ(statistics[i].captures, 1u) << "session " << i;
    EXPECT_EQ(statistics[i].hits, std::uint64_t(steps - 1)) << "session " << i;
  }
}

}  // namespace
}  // namespace cudakit
