// Capture, graphs and executables on a real GPU (DESIGN 4, 6, 9).
//
// Kernels are the embedded test kernels, loaded as a Module and launched typed (the launch
// layer declares each buffer use to tracking, so captured launches are recorded with
// their buffers); one test builds a node from a raw CUfunction.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "gpu_fixture.hpp"

#ifdef CUDAKIT_HAVE_TEST_KERNELS
#include "test_kernels.hpp"
#endif

namespace cudakit {
namespace {

using driver::cu;
using testing::GpuTest;

#ifdef CUDAKIT_HAVE_TEST_KERNELS

constexpr int n = 4096;
constexpr unsigned threads = 256;
constexpr unsigned blocks = (n + threads - 1) / threads;

using ScaleOffset = void(const float*, float*, float, float, int);
using AddArrays = void(const float*, const float*, float*, int);
using Increment = void(float*, int);
using Spin = void(long long);
using SetCondition = void(unsigned long long, const int*);
using CountDown = void(unsigned long long, int*);

class GraphGpuTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    context_ = Context::primary(device());
    context_.make_current();
    module_ = Module::load(device(), cudakit_kernels::test_fatbin());
    scale_offset_ = module_.kernel<ScaleOffset>("scale_offset");
    add_arrays_ = module_.kernel<AddArrays>("add_arrays");
    increment_ = module_.kernel<Increment>("increment");
    spin_ = module_.kernel<Spin>("spin_kernel");
    set_condition_ = module_.kernel<SetCondition>("set_condition_from");
    count_down_ = module_.kernel<CountDown>("count_down");
  }
  void TearDown() override {
    run_deferred_releases();
    GpuTest::TearDown();
  }

  static LaunchConfig cover(std::size_t count) { return LaunchConfig{grid_for(count, threads), threads}; }
  // out[i] = in[i] * scale + offset
  void scale_offset(DeviceSpan<const float> in, DeviceSpan<float> out, float scale, float offset, StreamRef s) {
    launch(s, scale_offset_, cover(out.size()), in, out, scale, offset, int(out.size()));
  }
  // out[i] = a[i] + b[i]
  void add(DeviceSpan<const float> a, DeviceSpan<const float> b, DeviceSpan<float> out, StreamRef s) {
    launch(s, add_arrays_, cover(out.size()), a, b, out, int(out.size()));
  }
  void increment(DeviceSpan<float> data, StreamRef s) { launch(s, increment_, cover(data.size()), data, int(data.size())); }
  void spin(StreamRef s, long long cycles) { launch(s, spin_, LaunchConfig{1, 1}, cycles); }

  static void upload(DeviceSpan<float> to, const std::vector<float>& from, StreamRef s) {
    to.use(s, Access::write);
    ASSERT_EQ(cu.MemcpyHtoDAsync(to.device_pointer(), from.data(), to.size_bytes(), s.handle()), CUDA_SUCCESS);
  }
  static std::vector<float> download(DeviceSpan<const float> from, StreamRef s) {
    std::vector<float> out(from.size());
    from.use(s, Access::read);
    EXPECT_EQ(cu.MemcpyDtoHAsync(out.data(), from.device_pointer(), from.size_bytes(), s.handle()), CUDA_SUCCESS);
    s.synchronize();
    return out;
  }
  static void poison(DeviceSpan<float> b, StreamRef s) {  // NaN everywhere
    b.use(s, Access::write);
    ASSERT_EQ(cu.MemsetD32Async(b.device_pointer(), 0xFFFFFFFFu, b.size(), s.handle()), CUDA_SUCCESS);
  }
  static std::vector<float> random_values(std::mt19937& rng) {
    std::uniform_real_distribution<float> d(-100.f, 100.f);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
  }
  long long spin_cycles(double ms) const {
    return cudakit::testing::spin_cycles(device(), ms);
  }

  Context context_;
  Module module_;
  Kernel<ScaleOffset> scale_offset_;
  Kernel<AddArrays> add_arrays_;
  Kernel<Increment> increment_;
  Kernel<Spin> spin_;
  Kernel<SetCondition> set_condition_;
  Kernel<CountDown> count_down_;
};

TEST_F(GraphGpuTest, EmptyCaptureGivesNoneAndCaptureNonemptyThrows) {
  Stream s(device());
  EXPECT_FALSE(capture(s, [] {}).has_value());
  EXPECT_THROW((void)capture_nonempty(s, [] {}), EmptyCapture);
  EXPECT_FALSE(is_capturing(s));
}

TEST_F(GraphGpuTest, ExceptionOrDriverErrorInsideACaptureEndsItAndTheStreamWorksAfterwards) {
  Stream s(device());
  DeviceBuffer<float> x(s, n, zeroed), y(s, n, zeroed);
  EXPECT_THROW((void)capture(s, [&] {
                 increment(x, s);
                 throw std::runtime_error("user error");
               }),
               std::runtime_error);
  EXPECT_FALSE(is_capturing(s));
  // cudakit refuses a synchronize of the capturing stream before the driver sees it...
  EXPECT_THROW((void)capture(s, [&] {
                 increment(x, s);
                 s.synchronize();
               }),
               CaptureError);
  EXPECT_FALSE(is_capturing(s));
  // ...and a raw one the driver refuses invalidates the capture: its end says so.
  try {
    (void)capture(s, [&] {
      increment(x, s);
      EXPECT_EQ(cu.StreamSynchronize(s.handle()), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    });
    ADD_FAILURE() << "an invalidated capture yields no graph";
  } catch (const CaptureError& e) {
    EXPECT_EQ(e.code(), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) << e.what();
  }
  EXPECT_FALSE(is_capturing(s));
  increment(x, s);  // the stream works: this runs now, once
  scale_offset(x, y, 2.0f, 0.0f, s);
  auto out = download(y, s);
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_EQ(out[n - 1], 2.0f);
}

TEST_F(GraphGpuTest, BufferDroppedAfterCaptureThenAThousandReplaysAreCorrect) {
  Stream s(device());
  DeviceBuffer<float> in(s, n, uninitialized), out(s, n, uninitialized);
  auto tmp = std::make_unique<DeviceBuffer<float>>(s, n, uninitialized);
  Graph g = capture_nonempty(s, [&] {
    scale_offset(in, *tmp, 2.0f, 1.0f, s);  // tmp = 2 in + 1
    add(*tmp, in, out, s);                  // out = tmp + in = 3 in + 1
  });
  tmp.reset();  // the graph keeps it alive
  GraphExec exec = g.instantiate();
  g = Graph();
  std::mt19937 rng(1234);
  for (int replay = 0; replay < 1000; ++replay) {
    auto input = random_values(rng);
    upload(in, input, s);
    poison(out, s);
    exec.launch(s);
    auto result = download(out, s);
    for (int i = 0; i < n; i += 97) {
      float expected = 3.0f * input[i] + 1.0f;
      ASSERT_NEAR(result[i], expected, 1e-3f * std::abs(expected) + 1e-3f) << "replay " << replay << " element " << i;
    }
  }
}

TEST_F(GraphGpuTest, ACrossStreamUseRightAfterAReplaySeesTheReplaysWrites) {
  Stream l(device()), r(device());
  DeviceBuffer<float> in(l, n, zeroed), out(l, n, uninitialized);
  Graph g = capture_nonempty(l, [&] {
    spin(l, spin_cycles(50));              // holds the replay
    scale_offset(in, out, 0.0f, 42.0f, l);  // out = 42
  });
  GraphExec exec = g.instantiate();
  for (int round = 0; round < 3; ++round) {
    poison(out, l);
    exec.launch(l);
    auto result = download(out, r);  // another stream, right after: must wait for the replay
    EXPECT_EQ(result[0], 42.0f) << "round " << round;
    EXPECT_EQ(result[n - 1], 42.0f) << "round " << round;
  }
}

TEST_F(GraphGpuTest, ReplayWaitsForEarlierWorkOnAnotherStream) {
  Stream w(device()), l(device());
  DeviceBuffer<float> in(l, n, zeroed), out(l, n, zeroed);
  Graph g = capture_nonempty(l, [&] { scale_offset(in, out, 1.0f, 0.0f, l); });  // out = in
  GraphExec exec = g.instantiate();
  spin(w, spin_cycles(50));
  scale_offset(out, in, 0.0f, 7.0f, w);  // in = 7, late on w (reads out: the graph's write waits too)
  exec.launch(l);                        // must wait for w's write of in
  auto result = download(out, l);
  EXPECT_EQ(result[0], 7.0f);
}

TEST_F(GraphGpuTest, ForkAndJoinInsideACaptureBecomeGraphEdges) {
  Stream a(device()), b(device()), launch_on(device());
  DeviceBuffer<float> x(a, n, zeroed), y(a, n, zeroed), z(a, n, zeroed);
  Graph g = capture_nonempty(a, [&] {
    b.wait(a);                             // fork
    scale_offset(x, x, 0.0f, 5.0f, a);      // x = 5 on a
    spin(b, spin_cycles(20));
    scale_offset(x, y, 2.0f, 0.0f, b);      // y = 2x on b: waits for a's write inside the graph
    add(x, y, z, a);                        // z = x + y on a: waits for b (joined at the end too)
  });
  GraphExec exec = g.instantiate();
  exec.launch(launch_on);
  auto result = download(z, launch_on);
  EXPECT_EQ(result[0], 15.0f);
  EXPECT_EQ(result[n - 1], 15.0f);
}

// The same through events recorded inside the capture: the waiting stream is marked as
// joining before the driver's wait (design.md decision 14), and the driver confirms it.
TEST_F(GraphGpuTest, ForkAndJoinThroughRecordedEventsBecomeGraphEdges) {
  Stream a(device()), b(device()), launch_on(device());
  DeviceBuffer<float> x(a, n, zeroed), y(a, n, zeroed), z(a, n, zeroed);
  Event forked(device()), joined(device());
  Graph g = capture_nonempty(a, [&] {
    scale_offset(x, x, 0.0f, 5.0f, a);  // x = 5 on a
    forked.record(a);
    b.wait(forked);                     // fork: b joins the capture
    EXPECT_TRUE(is_capturing(b));
    spin(b, spin_cycles(20));
    scale_offset(x, y, 2.0f, 0.0f, b);  // y = 2x on b
    joined.record(b);
    a.wait(joined);                     // join
    add(x, y, z, a);                    // z = x + y on a
  });
  EXPECT_FALSE(is_capturing(b));
  GraphExec exec = g.instantiate();
  exec.launch(launch_on);
  auto result = download(z, launch_on);
  EXPECT_EQ(result[0], 15.0f);
  EXPECT_EQ(result[n - 1], 15.0f);
}

TEST_F(GraphGpuTest, ConcurrentCapturesOnSeparateThreadsAndStreams) {
  constexpr int workers = 4;
  std::vector<std::thread> pool;
  std::atomic<int> failures{0};
  for (int t = 0; t < workers; ++t)
    pool.emplace_back([&, t] {
      try {
        context_.make_current();
        Stream s(device());
        DeviceBuffer<float> in(s, n, zeroed), out(s, n, zeroed);
        std::vector<float> input(n, float(t + 1));
        upload(in, input, s);
        Graph g = capture_nonempty(s, [&] {
          for (int k = 0; k < 10; ++k) scale_offset(in, out, 2.0f, float(k), s);
        });
        GraphExec exec = g.instantiate();
        for (int i = 0; i < 20; ++i) exec.launch(s);
        auto result = download(out, s);
        if (result[0] != 2.0f * (t + 1) + 9.0f || result[n - 1] != 2.0f * (t + 1) + 9.0f) ++failures;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "worker " << t << ": " << e.what();
        ++failures;
      }
    });
  for (auto& th : pool) th.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(GraphGpuTest, AnotherThreadsSubmissionToACapturingStreamIsRefused) {
  Stream s(device());
  DeviceBuffer<float> x(s, n, zeroed);
  Graph g = capture_nonempty(s, [&] {
    increment(x, s);
    std::thread intruder([&] {
      context_.make_current();
      EXPECT_THROW(x.span().use(s, Access::write), CaptureError);
      EXPECT_THROW(s.host_callback([] {}), CaptureError);
    });
    intruder.join();
  });
  EXPECT_EQ(g.node_count(), 1u);
  GraphExec exec = g.instantiate();
  exec.launch(s);
  EXPECT_EQ(download(x, s)[0], 1.0f);
}

TEST_F(GraphGpuTest, AThousandNodeGraph) {
  Stream s(device());
  DeviceBuffer<float> x(s, n, zeroed);
  Graph g = capture_nonempty(s, [&] {
    for (int i = 0; i < 1000; ++i) increment(x, s);
  });
  EXPECT_EQ(g.node_count(), 1000u);
  GraphExec exec = g.instantiate();
  EXPECT_EQ(exec.node_count(), 1000u);
  exec.launch(s);
  exec.launch(s);
  auto result = download(x, s);
  EXPECT_EQ(result[0], 2000.0f);
  EXPECT_EQ(result[n - 1], 2000.0f);
}

TEST_F(GraphGpuTest, UpdateWithACompatibleAndAnIncompatibleGraph) {
  Stream s(device());
  DeviceBuffer<float> in(s, n, zeroed), out(s, n, zeroed), out2(s, n, zeroed);
  upload(in, std::vector<float>(n, 2.0f), s);
  Graph first = capture_nonempty(s, [&] { scale_offset(in, out, 2.0f, 0.0f, s); });
  Graph second = capture_nonempty(s, [&] { scale_offset(in, out2, 3.0f, 1.0f, s); });
  Graph longer = capture_nonempty(s, [&] {
    scale_offset(in, out, 2.0f, 0.0f, s);
    increment(out, s);
  });
  GraphExec exec = first.instantiate();
  exec.update(second);
  exec.launch(s);
  EXPECT_EQ(download(out2, s)[0], 7.0f);
  EXPECT_EQ(download(out, s)[0], 0.0f);
  try {
    exec.update(longer);
    ADD_FAILURE() << "a graph with another topology cannot update the executable";
  } catch (const GraphUpdateError& e) {
    EXPECT_EQ(e.result(), CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED) << e.what();
    EXPECT_NE(std::string(e.what()).find("topology"), std::string::npos) << e.what();
  }
  poison(out2, s);
  exec.launch(s);  // unchanged
  EXPECT_EQ(download(out2, s)[0], 7.0f);
}

TEST_F(GraphGpuTest, KernelArgumentUpdateWithoutReinstantiating) {
  Stream s(device());
  DeviceBuffer<float> in(s, n, zeroed), out(s, n, zeroed);
  auto out2 = std::make_unique<DeviceBuffer<float>>(s, n, zeroed);
  upload(in, std::vector<float>(n, 2.0f), s);
  Graph g(device());
  GraphNode node = g.add_kernel(scale_offset_, cover(n), in, out, 2.0f, 0.0f, n);
  GraphExec exec = g.instantiate();
  exec.launch(s);
  EXPECT_EQ(download(out, s)[0], 4.0f);
  exec.update_kernel_arguments(node, scale_offset_, in, *out2, 5.0f, 1.0f, n);
  DeviceSpan<const float> view = *out2;
  auto kept = out2->device_pointer();
  exec.launch(s);
  auto result = download(view, s);
  EXPECT_EQ(result[0], 11.0f);
  EXPECT_EQ(download(out, s)[0], 4.0f) << "the old output is no longer written";
  (void)kept;
  out2.reset();  // the executable keeps the buffer for later launches
  exec.launch(s);
  s.synchronize();
}

TEST_F(GraphGpuTest, ConditionalIfAndWhileNodes) {
  if (!driver::has(driver::EntryId::GraphConditionalHandleCreate)) GTEST_SKIP() << "driver without conditional nodes";
  Stream s(device());
  DeviceBuffer<float> data(s, n, zeroed);
  DeviceBuffer<int> flag(s, 1, zeroed), remaining(s, 1, zeroed);

  // if: the body runs when a kernel set the condition from the flag.
  Graph g(device());
  ConditionalHandle c = g.make_condition(0);
  GraphNode set = g.add_kernel(set_condition_, LaunchConfig{1, 1}, c.value, std::as_const(flag));
  ConditionalNode branch = g.add_if(c, {set});
  branch.body.add_kernel(increment_, cover(n), data, n);
  GraphExec exec = g.instantiate();
  exec.launch(s);  // flag 0: skipped
  EXPECT_EQ(download(data, s)[0], 0.0f);
  flag.span().use(s, Access::write);
  ASSERT_EQ(cu.MemsetD32Async(flag.device_pointer(), 1, 1, s.handle()), CUDA_SUCCESS);
  exec.launch(s);  // flag 1: runs
  EXPECT_EQ(download(data, s)[0], 1.0f);

  // while: the body runs until count_down clears the condition.
  Graph w(device());
  ConditionalHandle loop_condition = w.make_condition(1);
  ConditionalNode loop = w.add_while(loop_condition);
  GraphNode inc = loop.body.add_kernel(increment_, cover(n), data, n);
  loop.body.add_kernel({inc}, count_down_, LaunchConfig{1, 1}, loop_condition.value, remaining);
  GraphExec loop_exec = w.instantiate();
  remaining.span().use(s, Access::write);
  ASSERT_EQ(cu.MemsetD32Async(remaining.device_pointer(), 10, 1, s.handle()), CUDA_SUCCESS);
  loop_exec.launch(s);
  EXPECT_EQ(download(data, s)[n - 1], 11.0f) << "1 from the if graph, 10 from the loop";
}

TEST_F(GraphGpuTest, RawFunctionNodeWithAnUntypedArgumentList) {
  Stream s(device());
  DeviceBuffer<float> data(s, n, zeroed);
  Graph g(device());
  g.add_kernel(RawKernelNode{increment_.handle(), blocks, threads}, KernelArgs().add(data).add(n));
  GraphExec exec = g.instantiate();
  exec.launch(s);
  exec.launch(s);
  EXPECT_EQ(download(data, s)[n - 1], 2.0f);
}

TEST_F(GraphGpuTest, CapturedLaunchesKeepTheirModuleLoaded) {
  Stream s(device());
  DeviceBuffer<float> data(s, n, zeroed);
  std::optional<Graph> g;
  {
    Module own = Module::load(device(), cudakit_kernels::test_fatbin());
    auto inc = own.kernel<Increment>("increment");
    g = capture(s, [&] { launch(s, inc, cover(n), data, n); });
  }  // the module's last handle is gone: the graph keeps it loaded
  ASSERT_TRUE(g.has_value());
  GraphExec exec = g->instantiate();
  exec.launch(s);
  EXPECT_EQ(download(data, s)[0], 1.0f);
}

TEST_F(GraphGpuTest, LazySetUpAndPlainAllocationsInsideACaptureDoNotInvalidateIt) {
  Stream s(device()), other(device());
  std::vector<Stream> sides;
  for (int i = 0; i < 12; ++i) sides.emplace_back(device());
  DeviceBuffer<float> x(s, n, zeroed);
  std::vector<DeviceBuffer<float>> parts;
  for (int i = 0; i < 12; ++i) parts.emplace_back(sides[i], n, zeroed);
  Graph g = capture_nonempty(s, [&] {
    scale_offset(x, x, 0.0f, 3.0f, s);
    for (int i = 0; i < 12; ++i) {
      sides[i].wait(s);  // more forks than the warm event pool holds
      scale_offset(x, parts[i], 1.0f, float(i), sides[i]);
    }
    DeviceBuffer<float> plain(other, n, zeroed, Allocator::plain);  // allocated and freed inside
    Stream made_inside(device());
  });
  GraphExec exec = g.instantiate();
  exec.launch(s);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(download(parts[i], s)[0], 3.0f + i);
}

TEST_F(GraphGpuTest, HostCallbackInACaptureRunsAtEveryReplay) {
  Stream s(device());
  auto count = std::make_shared<std::atomic<int>>(0);
  Graph g = capture_nonempty(s, [&] { s.host_callback([count] { ++*count; }); });
  GraphExec exec = g.instantiate();
  for (int i = 0; i < 5; ++i) exec.launch(s);
  s.synchronize();
  EXPECT_EQ(count->load(), 5);
}

TEST_F(GraphGpuTest, DestroyingGraphAndExecutableWithReplaysInFlightIsSafe) {
  Stream s(device()), r(device());
  DeviceBuffer<float> out(s, n, zeroed);
  {
    auto tmp = std::make_unique<DeviceBuffer<float>>(s, n, zeroed);
    Graph g = capture_nonempty(s, [&] {
      spin(s, spin_cycles(30));
      scale_offset(out, *tmp, 0.0f, 9.0f, s);  // tmp = 9
      scale_offset(*tmp, out, 1.0f, 1.0f, s);  // out = 10
    });
    GraphExec exec = g.instantiate();
    for (int i = 0; i < 3; ++i) exec.launch(s);
    tmp.reset();
  }  // graph, executable and the only user handle of tmp gone while replays run
  run_deferred_releases();
  DeviceBuffer<float> reuse(r, n, zeroed);  // an allocation right after must not take tmp's memory early
  auto result = download(out, r);
  EXPECT_EQ(result[0], 10.0f);
  s.synchronize();
  run_deferred_releases();
}

// Launch attributes on explicit kernel nodes. The cluster node's blocks must see
// their rank in the cluster (only true if the attribute reached the driver); the
// cooperative node's grid is the largest fully resident one.
TEST_F(GraphGpuTest, ExplicitKernelNodesWithClusterAndCooperativeAttributes) {
  Stream s(device());
  Graph g(device());
  std::vector<GraphNode> nodes;
  const unsigned blocks = 64;
  DeviceBuffer<unsigned> ranks(s, blocks, uninitialized);
  if (device().supports_clusters()) {
    ASSERT_EQ(cu.MemsetD32Async(ranks.device_pointer(), 0xFFFFFFFFu, blocks, s.handle()), CUDA_SUCCESS);  // poison
    auto ids = module_.kernel<void(unsigned*)>("cluster_ids");
    nodes.push_back(g.add_kernel(ids, LaunchConfig{.grid = blocks, .block = 32, .cluster = Dim3{4}}, ranks));
  }
  const unsigned block = 256;
  const int per_sm = max_active_blocks_per_multiprocessor(scale_offset_, block);
  ASSERT_GT(per_sm, 0);
  const unsigned grid = unsigned(per_sm * device().multiprocessor_count());
  const int count = int(grid * block);
  DeviceBuffer<float> in(s, count, uninitialized), out(s, count, uninitialized);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-10.f, 10.f);
  std::vector<float> host(count);
  for (float& v : host) v = d(rng);
  upload(in, host, s);
  poison(out, s);
  if (device().supports_cooperative_launch()) {
    LaunchConfig config{.grid = grid, .block = block, .cooperative = true, .priority = 0};
    nodes.push_back(g.add_kernel(scale_offset_, config, in, out, 2.0f, 1.0f, count));
  }
  if (nodes.empty()) GTEST_SKIP() << "neither clusters nor cooperative launches on " << device().compute_capability().arch();
  GraphExec exec = g.instantiate(InstantiateOptions{.use_node_priority = true});
  exec.launch(s);
  s.synchronize();
  if (device().supports_clusters()) {
    std::vector<unsigned> h(blocks);
    ASSERT_EQ(cu.MemcpyDtoHAsync(h.data(), ranks.device_pointer(), blocks * sizeof(unsigned), s.handle()), CUDA_SUCCESS);
    s.synchronize();
    for (unsigned b = 0; b < blocks; ++b) ASSERT_EQ(h[b], b % 4) << "block " << b;
  }
  if (device().supports_cooperative_launch()) {
    std::vector<float> result = download(out, s);
    for (int i = 0; i < count; ++i) ASSERT_EQ(result[i], host[i] * 2.0f + 1.0f) << "element " << i;
  }
}

#endif  // CUDAKIT_HAVE_TEST_KERNELS

}  // namespace
}  // namespace cudakit
