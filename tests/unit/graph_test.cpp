// Graphs and executables against the fake driver (DESIGN 4, 6): lifetimes held by graphs
// and executables and the deferred queue, launch-time tracking, the one-thread rule,
// instantiate and update failures in words, kernel-argument updates, explicit building and
// conditional nodes.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <new>
#include <optional>
#include <thread>

#include "allocation_counter.hpp"
#include "cudakit/copy.hpp"
#include "cudakit/launch.hpp"
#include "cudakit/pinned_buffer.hpp"
#include "cudakit/module.hpp"
#include "fake_kernels.hpp"
#include "graph_fixture.hpp"
#include "stream/capture_state.hpp"

namespace cudakit {
namespace {

using driver::EntryId;
using namespace std::chrono_literals;

class GraphTest : public testing::GraphTestBase {
 protected:
  // A fake kernel `add(float* data, float value, int n)`: data[i] += value.
  CUfunction add_kernel() {
    return fake::make_kernel({sizeof(float*), sizeof(float), sizeof(int)}, [](void* const* params) {
      float* data = *static_cast<float* const*>(params[0]);
      float value = *static_cast<const float*>(params[1]);
      int n = *static_cast<const int*>(params[2]);
      fake::kernel_access(reinterpret_cast<std::uintptr_t>(data), n * sizeof(float), true, "kernel add");
      for (int i = 0; i < n; ++i) data[i] += value;
    });
  }
  std::size_t live_memory() { return fake().live("device memory"); }
};

// ---- lifetimes (Note [Graph lifetimes]) ----

TEST_F(GraphTest, BufferDroppedAfterCaptureStaysAllocatedUntilGraphAndExecutableAreGone) {
  Stream s(dev());
  auto x = std::make_unique<DeviceBuffer<float>>(s, 64, zeroed);
  CUdeviceptr address = x->device_pointer();
  Graph g = capture_nonempty(s, [&] { fill(*x, s, 2.0f); });
  x.reset();  // the user lets go right after the capture
  EXPECT_EQ(live_memory(), 1u) << "the graph keeps the buffer";
  GraphExec exec = g.instantiate();
  g = Graph();
  run_deferred_releases();
  EXPECT_EQ(live_memory(), 1u) << "the executable keeps the buffer";
  for (int i = 0; i < 5; ++i) exec.launch(s);  // replays touch valid memory (the fake checks)
  s.synchronize();
  EXPECT_EQ(reinterpret_cast<const float*>(address)[0], 2.0f);
  exec = GraphExec();
  EXPECT_EQ(live_memory(), 0u) << "freed once the graph and its executable are gone";
}

TEST_F(GraphTest, DestroyingTheExecutableWhileReplaysAreQueuedKeepsBuffersUntilTheyRan) {
  Stream s(dev());
  auto x = std::make_unique<DeviceBuffer<float>>(s, 64, zeroed);
  CUdeviceptr address = x->device_pointer();
  Graph g = capture_nonempty(s, [&] { fill(*x, s, 3.0f); });
  GraphExec exec = g.instantiate();
  fake::defer_graph_replays(true);
  for (int i = 0; i < 3; ++i) exec.launch(s);
  EXPECT_EQ(fake::pending_replays(), 3u);
  x.reset();
  exec = GraphExec();
  g = Graph();
  run_deferred_releases();
  EXPECT_EQ(live_memory(), 1u) << "replays in flight still need the buffer";
  fake::run_pending_replays();  // the replays complete; the host function after them queues the release
  EXPECT_EQ(reinterpret_cast<const float*>(address)[0], 3.0f);
  EXPECT_EQ(live_memory(), 1u) << "the host function ran on a driver thread: it only queued the release";
  run_deferred_releases();
  EXPECT_EQ(live_memory(), 0u);
  fake::defer_graph_replays(false);
}

TEST_F(GraphTest, TheDeferredReleaseWaitsWhileThisThreadCapturesAndRunsAtTheCapturesEnd) {
  Stream s(dev()), c(dev());
  auto x = std::make_unique<DeviceBuffer<float>>(s, 64, zeroed);
  Graph g = capture_nonempty(s, [&] { fill(*x, s, 1.0f); });
  x.reset();
  {
    Capture scope(c);
    g = Graph();  // the last holder goes inside another capture
    run_deferred_releases();
    EXPECT_EQ(live_memory(), 1u) << "no free while this thread captures (cuMemFree would invalidate it)";
    EXPECT_FALSE(scope.end().has_value());
  }
  EXPECT_EQ(live_memory(), 0u) << "freed at the capture's end";
}

TEST_F(GraphTest, ClonesAndChildGraphsKeepTheirBuffersAlive) {
  Stream s(dev());
  auto x = std::make_unique<DeviceBuffer<float>>(s, 64, zeroed);
  CUdeviceptr address = x->device_pointer();
  Graph child = capture_nonempty(s, [&] { fill(*x, s, 4.0f); });
  x.reset();
  Graph parent(dev());
  GraphNode first = parent.add_empty();
  parent.add_child(child, {first});
  Graph copy = child.clone();
  child = Graph();
  run_deferred_releases();
  EXPECT_EQ(live_memory(), 1u);
  GraphExec exec = parent.instantiate();
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(reinterpret_cast<const float*>(address)[0], 4.0f);
  exec = GraphExec();
  parent = Graph();
  run_deferred_releases();
  EXPECT_EQ(live_memory(), 1u) << "the clone still holds it";
  copy = Graph();
  EXPECT_EQ(live_memory(), 0u);
}

// ---- launch-time tracking ----

TEST_F(GraphTest, LaunchIsOrderedAfterEarlierWorkAndLaterUsesAreOrderedAfterTheLaunch) {
  Stream w(dev()), c(dev()), l(dev()), r(dev());
  DeviceBuffer<float> x(w, 64, zeroed), scratch(r, 64, zeroed);
  Graph g = capture_nonempty(c, [&] { fill(x, c, 6.0f); });
  fill(x, w, 1.0f);  // earlier work on another stream
  GraphExec exec = g.instantiate();
  int before = waits();
  exec.launch(l);
  EXPECT_EQ(waits() - before, 1) << "the replay waits for w";
  copy(scratch, x, r);  // the ordering model fails the test if this is not after the replay
  EXPECT_EQ(waits() - before, 2) << "the reader waits for the replay";
  r.synchronize();
  EXPECT_EQ(at(scratch, 0), 6.0f);
}

TEST_F(GraphTest, RepeatedLaunchesOnOneStreamRecordNoEvent) {
  Stream s(dev());
  DeviceBuffer<float> x(s, 64, zeroed), y(s, 64, zeroed);
  Graph g = capture_nonempty(s, [&] {
    fill(x, s, 1.0f);
    copy(y, x, s);
  });
  GraphExec exec = g.instantiate();
  int before = records();
  for (int i = 0; i < 100; ++i) exec.launch(s);
  EXPECT_EQ(records(), before) << "buffers that stay on the launch stream cost nothing";
}

TEST_F(GraphTest, LaunchOntoACapturingStreamIsRefused) {
  Stream s(dev()), c(dev());
  DeviceBuffer<float> x(s, 64, zeroed);
  Graph g = capture_nonempty(s, [&] { fill(x, s, 1.0f); });
  GraphExec exec = g.instantiate();
  Capture scope(c);
  std::string message = testing::message_of<CaptureError>([&] { exec.launch(c); });
  EXPECT_NE(message.find("add_child"), std::string::npos) << message;
  EXPECT_FALSE(scope.end().has_value());
}

// ---- executables ----

TEST_F(GraphTest, AnExecutableIsUsedByOneThreadAtATime) {
  Stream s(dev()), t(dev());
  Graph g(dev());
  std::atomic<bool> inside{false}, release{false};
  g.add_host([&] {
    inside = true;
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!release && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(100us);
  });
  GraphExec exec = g.instantiate();
  std::thread first([&] { exec.launch(s); });  // the fake runs the replay inside the launch
  while (!inside) std::this_thread::sleep_for(100us);
  std::string message = testing::message_of<InvalidArgument>([&] { exec.launch(t); });
  EXPECT_NE(message.find("one thread at a time"), std::string::npos) << message;
  EXPECT_THROW(exec.update(g), InvalidArgument);
  release = true;
  first.join();
  exec.launch(t);  // free again
}

TEST_F(GraphTest, InstantiateFailureNamesTheReasonAndTheNode) {
  Graph g(dev());
  GraphNode host = g.add_host([] {});
  InstantiateOptions options;
  options.device_launch = true;  // device launch cannot run host nodes
  try {
    GraphExec exec(g, options);
    FAIL() << "instantiation must fail";
  } catch (const GraphInstantiateError& e) {
    EXPECT_EQ(e.result(), CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED);
    EXPECT_EQ(e.node(), host.handle());
    std::string m = e.what();
    EXPECT_NE(m.find("cannot run"), std::string::npos) << m;
    EXPECT_NE(m.find("a host node"), std::string::npos) << m;
  }
}

TEST_F(GraphTest, NodeCountDotAndUpload) {
  Stream s(dev());
  DeviceBuffer<float> x(s, 64, zeroed), y(s, 64, zeroed);
  Graph g(dev());
  GraphNode a = g.add_fill(x.span(), 1.0f);
  GraphNode b = g.add_copy(y.span(), x.span(), {a});
  g.add_empty({a, b});
  EXPECT_EQ(g.node_count(), 3u);
  EXPECT_EQ(a.type(), CU_GRAPH_NODE_TYPE_MEMSET);
  EXPECT_EQ(b.type(), CU_GRAPH_NODE_TYPE_MEMCPY);
  std::string dot = g.dot();
  EXPECT_NE(dot.find("digraph"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n0 -> n1"), std::string::npos) << dot;
  InstantiateOptions options;
  options.upload_on = s;
  GraphExec exec(g, options);
  EXPECT_EQ(exec.node_count(), 3u);
  exec.upload(s);
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(at(y, 10), 1.0f);
}

TEST_F(GraphTest, UpdateFromACompatibleGraphSwapsBuffersAndTracksTheNewOnes) {
  Stream s(dev()), r(dev());
  DeviceBuffer<float> x(s, 64, zeroed), scratch(r, 64, zeroed);
  auto y = std::make_unique<DeviceBuffer<float>>(s, 64, zeroed);
  Graph first = capture_nonempty(s, [&] { fill(x, s, 1.0f); });
  Graph second = capture_nonempty(s, [&] { fill(*y, s, 2.0f); });
  GraphExec exec = first.instantiate();
  exec.update(second);
  CUdeviceptr y_address = y->device_pointer();
  y.reset();
  second = Graph();
  run_deferred_releases();
  EXPECT_EQ(live_memory(), 3u) << "the executable now holds the second graph's buffer";
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(at(x, 0), 0.0f);
  EXPECT_EQ(reinterpret_cast<const float*>(y_address)[0], 2.0f);
}

TEST_F(GraphTest, UpdateFromAnIncompatibleGraphThrowsNamingTheNodeAndTheReason) {
  Stream s(dev());
  DeviceBuffer<float> x(s, 64, zeroed);
  Graph original = capture_nonempty(s, [&] { fill(x, s, 1.0f); });
  Graph longer = capture_nonempty(s, [&] {
    fill(x, s, 1.0f);
    fill(x, s, 2.0f);
  });
  Graph other_type(dev());
  GraphNode host = other_type.add_host([] {});
  GraphExec exec = original.instantiate();
  try {
    exec.update(longer);
    FAIL();
  } catch (const GraphUpdateError& e) {
    EXPECT_EQ(e.result(), CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    EXPECT_NE(std::string(e.what()).find("topology changed"), std::string::npos) << e.what();
  }
  try {
    exec.update(other_type);
    FAIL();
  } catch (const GraphUpdateError& e) {
    EXPECT_EQ(e.result(), CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED);
    EXPECT_EQ(e.node(), host.handle());
    std::string m = e.what();
    EXPECT_NE(m.find("a node's type changed"), std::string::npos) << m;
    EXPECT_NE(m.find("(a host node)"), std::string::npos) << m;
    EXPECT_NE(m.find("instantiate the new graph instead"), std::string::npos) << m;
  }
  exec.launch(s);  // unchanged and launchable
  s.synchronize();
  EXPECT_EQ(at(x, 0), 1.0f);
}

TEST_F(GraphTest, KernelArgumentUpdateChangesScalarsAndBuffersWithoutReinstantiating) {
  Stream s(dev()), r(dev());
  DeviceBuffer<float> a(s, 16, zeroed), scratch(r, 16, zeroed);
  auto b = std::make_unique<DeviceBuffer<float>>(s, 16, zeroed);
  CUdeviceptr b_address = b->device_pointer();
  CUfunction add = add_kernel();
  Graph g(dev());
  GraphNode kernel = g.add_kernel(RawKernelNode{add, 1, 16}, KernelArgs().add(a).add(1.0f).add(16));
  ASSERT_EQ(g.kernel_nodes().size(), 1u);
  EXPECT_EQ(g.kernel_nodes()[0], kernel);
  GraphExec exec = g.instantiate();
  exec.launch(s);
  EXPECT_EQ(at(a, 0), 1.0f);
  int instantiations = fake().calls(EntryId::GraphInstantiateWithParams);
  exec.update_kernel_arguments(kernel, KernelArgs().add(*b).add(5.0f).add(16));
  b.reset();  // the executable keeps the new buffer alive
  EXPECT_EQ(live_memory(), 3u);
  exec.launch(s);
  EXPECT_EQ(at(a, 0), 1.0f) << "a is no longer an argument";
  EXPECT_EQ(reinterpret_cast<const float*>(b_address)[0], 5.0f);
  EXPECT_EQ(fake().calls(EntryId::GraphInstantiateWithParams), instantiations) << "no re-instantiation";
  exec = GraphExec();  // releases b after the last launch (ordered on the service stream)
  run_deferred_releases();
  EXPECT_EQ(live_memory(), 2u);
}

TEST_F(GraphTest, KernelArgumentUpdateTracksTheNewBufferAtLaunch) {
  Stream s(dev()), w(dev()), r(dev());
  DeviceBuffer<float> a(s, 16, zeroed), b(w, 16, zeroed), scratch(r, 16, zeroed);
  CUfunction add = add_kernel();
  Graph g(dev());
  GraphNode kernel = g.add_kernel(RawKernelNode{add, 1, 16}, KernelArgs().add(a).add(1.0f).add(16));
  GraphExec exec = g.instantiate();
  exec.update_kernel_arguments(kernel, KernelArgs().add(b).add(2.0f).add(16));
  fill(b, w, 10.0f);  // earlier work on another stream
  exec.launch(s);     // must wait for w
  copy(scratch, b, r);  // must wait for the launch
  r.synchronize();
  EXPECT_EQ(at(scratch, 0), 12.0f);
}

// ---- explicit building ----

TEST_F(GraphTest, ExplicitNodesWithDependenciesReplayInOrder) {
  Stream s(dev());
  DeviceBuffer<float> x(s, 32, zeroed), y(s, 32, zeroed);
  std::vector<float> host_in(32, 3.0f), host_out(32, 0.0f);
  std::vector<int> order;
  Event e(dev());
  Graph g(dev());
  GraphNode up = g.add_copy(x.span(), std::span<const float>(host_in));
  GraphNode add = g.add_kernel(RawKernelNode{add_kernel(), 1, 32}, KernelArgs().add(x).add(1.0f).add(32), {up});
  GraphNode mid = g.add_host([&] { order.push_back(1); }, {add});
  GraphNode dup = g.add_copy(y.span(), x.span(), {mid});
  GraphNode rec = g.add_event_record(e, {dup});
  GraphNode down = g.add_copy(std::span<float>(host_out), y.span(), {rec});
  g.add_host([&] { order.push_back(2); }, {down});
  GraphExec exec = g.instantiate();
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(host_out[31], 4.0f);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  e.synchronize();
}

TEST_F(GraphTest, FillNodeUsesTheElementSize) {
  Stream s(dev());
  DeviceBuffer<std::uint16_t> h(s, 8, zeroed);
  DeviceBuffer<std::uint8_t> b(s, 8, zeroed);
  Graph g(dev());
  g.add_fill(h.span(), std::uint16_t{0xBEEF});
  g.add_fill(b.span(), std::uint8_t{7});
  GraphExec exec = g.instantiate();
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(reinterpret_cast<const std::uint16_t*>(h.device_pointer())[7], 0xBEEF);
  EXPECT_EQ(reinterpret_cast<const std::uint8_t*>(b.device_pointer())[7], 7);
}

TEST_F(GraphTest, CopyExtentsMustMatch) {
  Stream s(dev());
  DeviceBuffer<float> x(s, 32, zeroed), y(s, 16, zeroed);
  Graph g(dev());
  std::string m = testing::message_of<InvalidArgument>([&] { g.add_copy(y.span(), x.span()); });
  EXPECT_NE(m.find("16 elements"), std::string::npos) << m;
}

TEST_F(GraphTest, EventWaitNodeOrdersTheReplayAfterTheEvent) {
  Stream s(dev()), w(dev());
  DeviceBuffer<float> x(w, 16, zeroed);
  Event e(dev());
  Graph g(dev());
  {
    ManualOrdering manual;  // ordering by hand: the event wait node is the order
    fill(x, w, 8.0f);
    e.record(w);
    GraphNode wait = g.add_event_wait(e);
    DeviceBuffer<float>* target = &x;
    g.add_kernel(RawKernelNode{add_kernel(), 1, 16}, KernelArgs().add(*target).add(1.0f).add(16), {wait});
    GraphExec exec = g.instantiate();
    exec.launch(s);
    s.synchronize();
    w.synchronize();
  }
  EXPECT_EQ(at(x, 0), 9.0f);
}

// ---- conditional nodes ----

TEST_F(GraphTest, IfNodeRunsItsBodyOnlyWhenTheConditionIsSet) {
  Stream s(dev());
  DeviceBuffer<float> x(s, 16, zeroed);
  CUfunction add = add_kernel();
  for (unsigned start : {0u, 1u}) {
    Graph g(dev());
    ConditionalHandle c = g.make_condition(start);
    ConditionalNode branch = g.add_if(c);
    branch.body.add_kernel(RawKernelNode{add, 1, 16}, KernelArgs().add(x).add(1.0f).add(16));
    EXPECT_THROW(branch.body.add_host([] {}), InvalidArgument) << "no host nodes in a conditional body";
    GraphExec exec = g.instantiate();
    exec.launch(s);
    s.synchronize();
  }
  EXPECT_EQ(at(x, 0), 1.0f) << "the body ran once: when the condition started at 1";
}

TEST_F(GraphTest, WhileNodeRepeatsItsBodyUntilAKernelClearsTheCondition) {
  Stream s(dev());
  DeviceBuffer<int> counter(s, 1, zeroed);
  Graph g(dev());
  ConditionalHandle c = g.make_condition(1);
  // A fake kernel that counts down from 5 and clears the condition at zero.
  CUfunction count_down =
      fake::make_kernel({sizeof(CUgraphConditionalHandle), sizeof(int*)}, [](void* const* params) {
        auto handle = *static_cast<const CUgraphConditionalHandle*>(params[0]);
        int* n = *static_cast<int* const*>(params[1]);
        fake::kernel_access(reinterpret_cast<std::uintptr_t>(n), sizeof(int), true, "count_down");
        if (++*n >= 5) fake::set_conditional(handle, 0);
      });
  ConditionalNode loop = g.add_while(c);
  loop.body.add_kernel(RawKernelNode{count_down, 1, 1}, KernelArgs().add(c.value).add(counter));
  GraphExec exec = g.instantiate();
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(reinterpret_cast<const int*>(counter.device_pointer())[0], 5);
}

class OldDriverGraphTest : public GraphTest {
  void configure(fake::Driver& d) override {
    d.driver_version = 12020;
    d.missing.insert(EntryId::GraphConditionalHandleCreate);
  }
};

TEST_F(OldDriverGraphTest, ConditionalNodesAreRefusedClearlyOnOlderDrivers) {
  Graph g(dev());
  try {
    (void)g.make_condition(1);
    FAIL();
  } catch (const FeatureUnavailable& e) {
    EXPECT_NE(std::string(e.what()).find("conditional graph nodes"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)g.add_while(ConditionalHandle{1}), FeatureUnavailable);
}

// ---- copies (the memory layer) inside a capture ----

TEST_F(GraphTest, CapturedCopiesThroughPinnedMemoryReplayAndKeepThePinnedBuffersAlive) {
  Stream s(dev());
  auto in = std::make_unique<PinnedBuffer<float>>(64, zeroed);
  auto out = std::make_unique<PinnedBuffer<float>>(64, zeroed);
  DeviceBuffer<float> d(s, 64, zeroed);
  float* in_host = in->data();
  float* out_host = out->data();
  Graph g = capture_nonempty(s, [&] {
    cudakit::copy(s, *in, d);
    cudakit::copy(s, d, *out);
  });
  EXPECT_EQ(g.node_count(), 2u);
  in.reset();
  out.reset();
  EXPECT_EQ(fake().live("pinned host memory"), 2u) << "the graph keeps the page-locked buffers";
  GraphExec exec = g.instantiate();
  for (int round = 1; round <= 3; ++round) {
    for (int i = 0; i < 64; ++i) in_host[i] = float(round * i);
    exec.launch(s);
    s.synchronize();
    EXPECT_EQ(out_host[5], float(round * 5));
  }
  exec = GraphExec();
  g = Graph();
  run_deferred_releases();
  EXPECT_EQ(fake().live("pinned host memory"), 0u);
}

TEST_F(GraphTest, PageableCopiesAreRefusedInsideACaptureWhichStaysValid) {
  Stream s(dev());
  DeviceBuffer<float> d(s, 64, zeroed);
  std::vector<float> host(64, 1.0f);
  Graph g = capture_nonempty(s, [&] {
    EXPECT_THROW(cudakit::copy(s, host, d), CaptureError);
    fill(d, s, 2.0f);
  });
  EXPECT_EQ(g.node_count(), 1u);
}

// ---- typed kernels (the launch layer's Kernel<Sig>, LaunchConfig and binding rules) ----

using testing::FillSig;
using testing::SaxpySig;

class TypedGraphTest : public GraphTest {
 protected:
  void SetUp() override {
    GraphTest::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    module_ = Module::load(dev(), fake::fatbin_image(testing::standard_image(), {90}, {}));
  }
  void TearDown() override {
    module_ = {};
    GraphTest::TearDown();
  }
  Module module_;
};

TEST_F(TypedGraphTest, TypedKernelNodeBindsLikeALaunchAndKeepsItsModuleLoaded) {
  Stream s(dev()), r(dev());
  DeviceBuffer<float> x(s, 16, zeroed), y(s, 16, zeroed), scratch(r, 16, zeroed);
  Graph g(dev());
  GraphNode fill_node, saxpy_node;
  {
    auto fill = module_.kernel<FillSig>("fill");
    auto saxpy = module_.kernel<SaxpySig>("saxpy");
    fill_node = g.add_kernel(fill, LaunchConfig{1, 16}, x, 3.0f, 16);
    saxpy_node = g.add_kernel({fill_node}, saxpy, LaunchConfig{1, 16}, 2.0f, x, y, 16);  // x read, y written
  }
  module_ = {};
  EXPECT_EQ(fake().live("module"), 1u) << "the graph keeps the kernels' module loaded";
  GraphExec exec = g.instantiate();
  exec.launch(s);
  copy(scratch, y, r);  // ordered after the launch (y is a write of the graph)
  r.synchronize();
  EXPECT_EQ(at(scratch, 0), 6.0f);
  exec = GraphExec();
  g = Graph();
  run_deferred_releases();
  EXPECT_EQ(fake().live("module"), 0u);
}

TEST_F(TypedGraphTest, TypedArgumentUpdate) {
  Stream s(dev());
  DeviceBuffer<float> x(s, 16, zeroed), y(s, 16, zeroed);
  auto fill = module_.kernel<FillSig>("fill");
  auto saxpy = module_.kernel<SaxpySig>("saxpy");
  Graph g(dev());
  GraphNode node = g.add_kernel(fill, LaunchConfig{1, 16}, x, 1.0f, 16);
  GraphExec exec = g.instantiate();
  exec.update_kernel_arguments(node, fill, y, 4.0f, 16);
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(at(x, 0), 0.0f);
  EXPECT_EQ(at(y, 15), 4.0f);
  EXPECT_THROW(exec.update_kernel_arguments(node, saxpy, 1.0f, x, y, 16), InvalidArgument)
      << "the node launches another kernel";
}

TEST_F(TypedGraphTest, KernelNodeCarriesClusterCooperativeAndPriorityAttributes) {
  DeviceBuffer<float> x(Stream(dev()), 16, zeroed);
  auto fill = module_.kernel<FillSig>("fill");
  Graph g(dev());
  LaunchConfig clustered{4, 16};
  clustered.cluster = Dim3{2};
  GraphNode a = g.add_kernel(fill, clustered, x, 1.0f, 16);
  LaunchConfig cooperative{1, 16};
  cooperative.cooperative = true;
  cooperative.priority = 0;
  GraphNode b = g.add_kernel({a}, fill, cooperative, x, 2.0f, 16);

  auto cluster = fake::kernel_node_attribute(a.handle(), CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
  ASSERT_TRUE(cluster.has_value());
  EXPECT_EQ(cluster->clusterDim.x, 2u);
  EXPECT_EQ(cluster->clusterDim.y, 1u);
  EXPECT_FALSE(fake::kernel_node_attribute(a.handle(), CU_LAUNCH_ATTRIBUTE_COOPERATIVE).has_value());
  auto coop = fake::kernel_node_attribute(b.handle(), CU_LAUNCH_ATTRIBUTE_COOPERATIVE);
  ASSERT_TRUE(coop.has_value());
  EXPECT_EQ(coop->cooperative, 1);
  auto priority = fake::kernel_node_attribute(b.handle(), CU_LAUNCH_ATTRIBUTE_PRIORITY);
  ASSERT_TRUE(priority.has_value());
  EXPECT_EQ(priority->priority, 0);
}

TEST_F(TypedGraphTest, KernelNodeChecksItsConfigurationLikeALaunchBeforeAddingTheNode) {
  DeviceBuffer<float> x(Stream(dev()), 16, zeroed);
  auto fill = module_.kernel<FillSig>("fill");
  Graph g(dev());
  try {
    g.add_kernel(fill, LaunchConfig{1, Dim3{0}}, x, 1.0f, 16);
    FAIL() << "a zero block accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("fill"), std::string::npos) << "names the kernel: " << e.what();
    EXPECT_NE(std::string(e.what()).find("zero"), std::string::npos) << e.what();
  }
  EXPECT_THROW(g.add_kernel(fill, LaunchConfig{1, 1u << 20}, x, 1.0f, 16), InvalidArgument) << "block over the limit";
  LaunchConfig uneven{3, 16};
  uneven.cluster = Dim3{2};
  EXPECT_THROW(g.add_kernel(fill, uneven, x, 1.0f, 16), InvalidArgument) << "grid not a multiple of the cluster";
  EXPECT_EQ(fake::node_count(g.handle()), 0u) << "no node for a refused configuration";
}

TEST_F(TypedGraphTest, KernelNodeWhoseAttributeTheDriverRefusesIsRemovedAgain) {
  DeviceBuffer<float> x(Stream(dev()), 16, zeroed);
  auto fill = module_.kernel<FillSig>("fill");
  Graph g(dev());
  LaunchConfig config{4, 16};
  config.cluster = Dim3{2};
  fake().fail(EntryId::GraphKernelNodeSetAttribute, 1, CUDA_ERROR_INVALID_VALUE);
  try {
    g.add_kernel(fill, config, x, 1.0f, 16);
    FAIL() << "the driver's refusal was not reported";
  } catch (const DriverError& e) {
    EXPECT_EQ(e.code(), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(e.call(), "cuGraphKernelNodeSetAttribute");
  }
  EXPECT_EQ(fake::node_count(g.handle()), 0u) << "no half-made node left in the graph";
}

TEST_F(TypedGraphTest, CapturedTypedLaunchesReplayAndKeepTheirModule) {
  Stream s(dev()), l(dev());
  DeviceBuffer<float> x(s, 64, zeroed), y(s, 64, zeroed);
  std::optional<Graph> g;
  {
    auto fill = module_.kernel<FillSig>("fill");
    auto saxpy = module_.kernel<SaxpySig>("saxpy");
    g = capture(s, [&] {
      launch(s, fill, LaunchConfig{1, 64}, x, 5.0f, 64);
      launch(s, fill, LaunchConfig{1, 64}, y, 1.0f, 64);
      launch(s, saxpy, LaunchConfig{1, 64}, 2.0f, x, y, 64);
    });
  }
  module_ = {};
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->node_count(), 3u);
  EXPECT_EQ(g->kernel_nodes().size(), 3u);
  EXPECT_EQ(at(y, 0), 0.0f) << "captured, not run";
  EXPECT_EQ(fake().live("module"), 1u);
  GraphExec exec = g->instantiate();
  exec.launch(l);
  l.synchronize();
  EXPECT_EQ(at(y, 63), 11.0f);
}

TEST_F(TypedGraphTest, LoadingAModuleAndLookingUpAKernelInsideACaptureKeepsItValid) {
  // The fake refuses module loads and unloads during a strict capture (stricter than the
  // driver); cudakit makes them in relaxed mode.
  Stream s(dev());
  DeviceBuffer<float> x(s, 16, zeroed);
  Graph g = capture_nonempty(s, [&] {
    Module inside = Module::load(dev(), fake::fatbin_image(testing::standard_image(), {90}, {}));
    launch(s, inside.kernel<FillSig>("fill"), LaunchConfig{1, 16}, x, 2.0f, 16);
  });  // `inside` is released here, but the graph keeps it loaded
  GraphExec exec = g.instantiate();
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(at(x, 0), 2.0f);
}

TEST_F(TypedGraphTest, ALaunchFromAnotherThreadIntoACaptureIsRefused) {
  Stream s(dev());
  auto empty = module_.kernel<void()>("empty");
  std::optional<Graph> g = capture(s, [&] {
    launch(s, empty, LaunchConfig{1, 1});
    std::string message;
    std::thread other([&] {
      ContextRef(detail::library_context(0), 0).make_current();
      message = testing::message_of<CaptureError>([&] { launch(s, empty, LaunchConfig{1, 1}); });
    });
    other.join();
    EXPECT_NE(message.find("a launch of kernel 'empty'"), std::string::npos) << message;
  });
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->node_count(), 1u);
}

// Each heap allocation of a captured launch fails in turn: a kernel whose keeping failed
// is not noted as kept, so its next launch in the capture keeps it, and the graph holds
// its module loaded.
TEST_F(TypedGraphTest, AKernelThatCouldNotBeKeptIsKeptByItsNextLaunchInTheCapture) {
  Stream s(dev());
  bool failed = true;
  for (long nth = 1; failed && nth < 30; ++nth) {
    std::optional<Graph> g;
    {
      auto empty = module_.kernel<void()>("empty");
      Capture scope(s);
      {
        testing::FailNthAllocation fail(nth);
        try {
          launch(s, empty, LaunchConfig{1, 1});
        } catch (const std::bad_alloc&) {
        }
        failed = fail.failed();
      }
      launch(s, empty, LaunchConfig{1, 1});
      g = scope.end();
    }
    ASSERT_TRUE(g.has_value());
    module_ = {};
    EXPECT_EQ(fake().live("module"), 1u) << "allocation " << nth << " failed: the graph does not keep the module";
    g.reset();
    run_deferred_releases();
    module_ = Module::load(dev(), fake::fatbin_image(testing::standard_image(), {90}, {}));
  }
  EXPECT_FALSE(failed) << "the sweep did not reach a launch that allocates nothing more";
}

thread_local bool is_launching_thread = false;
std::atomic<bool> launch_hook_reached{false}, launch_capture_ended{false};
void hold_launch_after_capture_read() {
  if (!is_launching_thread) return;
  launch_hook_reached = true;
  while (!launch_capture_ended.load()) std::this_thread::yield();
}

// Another thread launches on a capturing stream and has read the stream's capture when
// the capture ends and its state is freed (a test hook holds it there): it must not touch
// that state. The capture is over, so the launch runs live.
TEST_F(TypedGraphTest, ALaunchFromAnotherThreadAsTheCaptureEndsNeverTouchesTheEndedCapture) {
  Stream s(dev());
  auto empty = module_.kernel<void()>("empty");
  auto scope = std::make_unique<Capture>(s);
  launch(s, empty, LaunchConfig{1, 1});
  launch_hook_reached = false;
  launch_capture_ended = false;
  detail::after_capture_read_hook = &hold_launch_after_capture_read;
  std::string error;
  std::thread other([&] {
    is_launching_thread = true;
    ContextRef(detail::library_context(0), 0).make_current();
    try {
      launch(s, empty, LaunchConfig{1, 1});
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  while (!launch_hook_reached.load()) std::this_thread::yield();
  std::optional<Graph> g = scope->end();
  scope.reset();
  launch_capture_ended = true;
  other.join();
  detail::after_capture_read_hook = nullptr;
  EXPECT_EQ(error, "");
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->node_count(), 1u);
  s.synchronize();
}

}  // namespace
}  // namespace cudakit
