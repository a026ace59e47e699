// Programmatic dependent launch against the fake driver: the launch attribute on one
// stream, the full dependency a hand-off between streams falls back to, the programmatic
// edges a capture and the graph cache keep, and explicit kernel nodes with programmatic
// edges (docs/launch.md, "Programmatic dependent launch").
#include <gtest/gtest.h>

#include <string>

#include "cudakit/graph_cache.hpp"
#include "cudakit/launch.hpp"
#include "cudakit/module.hpp"
#include "fake_kernels.hpp"
#include "graph_fixture.hpp"

namespace cudakit {
namespace {

using driver::EntryId;
using testing::FillSig;
using testing::SaxpySig;

constexpr int n = 64;

LaunchConfig dependent() {
  LaunchConfig c{1, n};
  c.programmatic_dependent_launch = true;
  return c;
}

bool programmatic(const fake::FakeLaunch& l) {
  const CUlaunchAttribute* a = l.attribute(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
  return a != nullptr && a->value.programmaticStreamSerializationAllowed == 1;
}

bool programmatic_edge(GraphNode from, GraphNode to) {
  auto e = fake::edge_between(from.handle(), to.handle());
  return e.has_value() && e->type == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC &&
         e->from_port == CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC;
}

class ProgrammaticLaunchTest : public testing::GraphTestBase {
 protected:
  void SetUp() override {
    GraphTestBase::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    module_ = Module::load(dev(), fake::fatbin_image(testing::standard_image(), {90}, {}));
    fill_ = module_.kernel<FillSig>("fill");
    saxpy_ = module_.kernel<SaxpySig>("saxpy");
  }
  void TearDown() override {
    fill_ = {};
    saxpy_ = {};
    module_ = {};
    GraphTestBase::TearDown();
  }
  Module module_;
  Kernel<FillSig> fill_;
  Kernel<SaxpySig> saxpy_;
};

TEST_F(ProgrammaticLaunchTest, ALaunchWhoseBuffersStayOnItsStreamIsProgrammatic) {
  Stream s(dev());
  DeviceBuffer<float> x(s, n, zeroed), y(s, n, zeroed);
  launch(s, fill_, LaunchConfig{1, n}, x, 3.0f, n);
  launch(s, saxpy_, dependent(), 2.0f, std::as_const(x), y, n);
  ASSERT_FALSE(fake::launches().empty());
  EXPECT_TRUE(programmatic(fake::launches().back()));
  EXPECT_TRUE(fake::launches().back().through_ex);
  s.synchronize();
  EXPECT_EQ(at(y, n - 1), 6.0f);
}

TEST_F(ProgrammaticLaunchTest, ABufferHandedOverFromAnotherStreamMakesTheLaunchAFullDependency) {
  Stream a(dev()), b(dev());
  DeviceBuffer<float> x(a, n, zeroed), y(b, n, zeroed);
  launch(a, fill_, LaunchConfig{1, n}, x, 5.0f, n);
  const int waits_before = waits();
  launch(b, saxpy_, dependent(), 1.0f, std::as_const(x), y, n);  // x comes from stream a
  EXPECT_GT(waits(), waits_before) << "the hand-off is ordered by an event wait";
  EXPECT_FALSE(programmatic(fake::launches().back())) << "the wait for another stream must stay a full dependency";
  // Once the buffers live on b, the next dependent launch on b is programmatic again.
  launch(b, saxpy_, dependent(), 1.0f, std::as_const(x), y, n);
  EXPECT_TRUE(programmatic(fake::launches().back()));
  b.synchronize();
  EXPECT_EQ(at(y, 0), 10.0f);
}

TEST_F(ProgrammaticLaunchTest, AnUntypedLaunchFallsBackTheSameWay) {
  Stream a(dev()), b(dev());
  DeviceBuffer<float> x(a, n, zeroed);
  launch(a, fill_, LaunchConfig{1, n}, x, 5.0f, n);
  Function f = fill_;
  launch(b, f, dependent(), KernelArgs().add(x).add(7.0f).add(n));
  EXPECT_FALSE(programmatic(fake::launches().back()));
  launch(b, f, dependent(), KernelArgs().add(x).add(8.0f).add(n));
  EXPECT_TRUE(programmatic(fake::launches().back()));
}

TEST_F(ProgrammaticLaunchTest, CaptureKeepsTheProgrammaticEdgeFromTheKernelBefore) {
  Stream s(dev());
  DeviceBuffer<float> x(s, n, zeroed), y(s, n, zeroed);
  Graph g = capture_nonempty(s, [&] {
    launch(s, fill_, LaunchConfig{1, n}, x, 3.0f, n);
    launch(s, saxpy_, dependent(), 2.0f, std::as_const(x), y, n);
  });
  std::vector<GraphNode> kernels = g.kernel_nodes();
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_TRUE(programmatic_edge(kernels[0], kernels[1]));
  std::vector<GraphEdge> edges = g.edges();
  ASSERT_EQ(edges.size(), 1u);
  EXPECT_EQ(edges[0].from, kernels[0]);
  EXPECT_EQ(edges[0].to, kernels[1]);
  EXPECT_TRUE(edges[0].programmatic);
  GraphExec exec = g.instantiate();
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(at(y, 0), 6.0f);
}

TEST_F(ProgrammaticLaunchTest, InACaptureAHandOffBetweenStreamsIsAFullEdge) {
  Stream s(dev()), side(dev());
  DeviceBuffer<float> x(s, n, zeroed), y(side, n, zeroed);
  Graph g = capture_nonempty(s, [&] {
    side.wait(s);  // side joins the capture
    launch(s, fill_, LaunchConfig{1, n}, x, 3.0f, n);
    launch(side, saxpy_, dependent(), 2.0f, std::as_const(x), y, n);  // x was written on s
  });
  std::vector<GraphNode> kernels = g.kernel_nodes();
  ASSERT_EQ(kernels.size(), 2u);
  auto edge = fake::edge_between(kernels[0].handle(), kernels[1].handle());
  ASSERT_TRUE(edge.has_value()) << "the capture orders the read of x after its write";
  EXPECT_EQ(edge->type, CU_GRAPH_DEPENDENCY_TYPE_DEFAULT);
  for (const GraphEdge& e : g.edges()) EXPECT_FALSE(e.programmatic);
}

TEST_F(ProgrammaticLaunchTest, TheGraphCacheKeepsProgrammaticEdges) {
  Stream s(dev());
  DeviceBuffer<float> x(s, n, zeroed), y(s, n, zeroed);
  GraphCache<int> cache;
  auto step = [&](StreamRef on) {
    launch(on, fill_, LaunchConfig{1, n}, x, 3.0f, n);
    launch(on, saxpy_, dependent(), 2.0f, std::as_const(x), y, n);
  };
  EXPECT_EQ(cache.run(s, 1, step), GraphCacheOutcome::captured);
  EXPECT_EQ(cache.run(s, 1, step), GraphCacheOutcome::hit);
  std::vector<GraphEdge> edges = cache.graph(1).edges();
  ASSERT_EQ(edges.size(), 1u);
  EXPECT_TRUE(edges[0].programmatic);
  EXPECT_EQ(cache.update_and_run(s, 1, step), GraphCacheOutcome::updated) << "same topology, same edge types";
  s.synchronize();
  EXPECT_EQ(at(y, 0), 18.0f) << "three runs of y += 2 * 3";
}

TEST_F(ProgrammaticLaunchTest, AnExplicitDependentNodeHasProgrammaticEdgesFromKernelsAndFullOnesFromOtherNodes) {
  Stream s(dev());
  DeviceBuffer<float> x(s, n, zeroed), y(s, n, zeroed);
  Graph g(dev());
  GraphNode clear = g.add_fill(y.span(), 1.0f);
  GraphNode first = g.add_kernel(fill_, LaunchConfig{1, n}, x, 4.0f, n);
  GraphNode next = g.add_kernel({clear, first}, saxpy_, dependent(), 2.0f, std::as_const(x), y, n);
  EXPECT_TRUE(programmatic_edge(first, next));
  auto full = fake::edge_between(clear.handle(), next.handle());
  ASSERT_TRUE(full.has_value());
  EXPECT_EQ(full->type, CU_GRAPH_DEPENDENCY_TYPE_DEFAULT);
  EXPECT_FALSE(fake::kernel_node_attribute(next.handle(), CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION))
      << "in a graph it is the edge's type, not a node attribute";
  int programmatic_edges = 0;
  for (const GraphEdge& e : g.edges()) programmatic_edges += e.programmatic;
  EXPECT_EQ(programmatic_edges, 1);
  GraphExec exec = g.instantiate();
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(at(y, 0), 9.0f);
}

TEST_F(ProgrammaticLaunchTest, AnEdgeTheDriverRefusesRemovesTheNodeAgain) {
  DeviceBuffer<float> x(Stream(dev()), n, zeroed), y(Stream(dev()), n, zeroed);
  Graph g(dev());
  GraphNode first = g.add_kernel(fill_, LaunchConfig{1, n}, x, 4.0f, n);
  fake().fail(EntryId::GraphAddDependencies, 1, CUDA_ERROR_INVALID_VALUE);
  try {
    g.add_kernel({first}, saxpy_, dependent(), 2.0f, std::as_const(x), y, n);
    FAIL() << "the driver's refusal was not reported";
  } catch (const DriverError& e) {
    EXPECT_EQ(e.code(), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(e.call(), "cuGraphAddDependencies");
  }
  EXPECT_EQ(fake::node_count(g.handle()), 1u) << "no node without its programmatic edge";
}

class OldDriverProgrammaticTest : public ProgrammaticLaunchTest {
  void configure(fake::Driver& d) override {
    d.driver_version = 12020;
    d.missing.insert(EntryId::GraphAddDependencies);
    d.missing.insert(EntryId::GraphGetEdges);
  }
};

TEST_F(OldDriverProgrammaticTest, ProgrammaticEdgesAndEdgeTypesAreRefusedClearlyBeforeCuda12_3) {
  DeviceBuffer<float> x(Stream(dev()), n, zeroed), y(Stream(dev()), n, zeroed);
  Graph g(dev());
  GraphNode first = g.add_kernel(fill_, LaunchConfig{1, n}, x, 4.0f, n);
  try {
    g.add_kernel({first}, saxpy_, dependent(), 2.0f, std::as_const(x), y, n);
    FAIL();
  } catch (const FeatureUnavailable& e) {
    EXPECT_NE(std::string(e.what()).find("programmatic"), std::string::npos) << e.what();
  }
  EXPECT_EQ(fake::node_count(g.handle()), 1u);
  EXPECT_THROW((void)g.edges(), FeatureUnavailable);
}

}  // namespace
}  // namespace cudakit
