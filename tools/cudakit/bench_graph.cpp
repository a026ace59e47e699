// Graph benchmarks: replay cost per node for 10, 100 and 1000 tiny kernels,
// instantiation of a 1000-node graph, a kernel-argument update against re-instantiating
// a 100-node graph, and replay against plain stream launches. The quick run (`cudakit
// bench --quick`, the doctor) replays the 100-node graph only.
//
// The raw side captures the same kernels with cuLaunchKernel on a raw stream and replays
// with cuGraphLaunch; both sides replay on the same cudakit stream, timed with events.
//
// Replay cost depends on the executable, not only on the graph: on an H200, executables
// instantiated from one and the same 10-node graph replay up to 5% apart, each one
// steadily. So each side instantiates several executables of its graph and every batch
// replays them in turn: the ratio compares cudakit with the driver, not one executable's
// placement with another's. At 10 nodes two raw executables of one graph are also set
// against each other (reported): the size of that difference.
#include <memory>
#include <string>
#include <vector>

#include "bench/harness.hpp"
#include "cudakit/cudakit.hpp"

#ifdef CUDAKIT_HAVE_TEST_KERNELS
#include "test_kernels.hpp"

namespace cudakit::tool::bench {
namespace {

using driver::EntryId;

const LaunchConfig one_thread{1, 1};

// A raw graph of `nodes` empty-kernel launches, captured on a raw stream.
struct RawGraph {
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  RawGraph(CUfunction f, int nodes, CUstream stream) {
    auto begin = raw_entry<EntryId::StreamBeginCapture>();
    auto end = raw_entry<EntryId::StreamEndCapture>();
    auto launch = raw_entry<EntryId::LaunchKernel>();
    check_raw(begin(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
    for (int i = 0; i < nodes; ++i)
      check_raw(launch(f, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr), "cuLaunchKernel");
    check_raw(end(stream, &graph), "cuStreamEndCapture");
    check_raw(raw_entry<EntryId::GraphInstantiateWithFlags>()(&exec, graph, 0), "cuGraphInstantiateWithFlags");
  }
  ~RawGraph() {
    if (exec) raw_entry<EntryId::GraphExecDestroy>()(exec);
    if (graph) raw_entry<EntryId::GraphDestroy>()(graph);
  }
  RawGraph(const RawGraph&) = delete;
  RawGraph& operator=(const RawGraph&) = delete;
};

struct GraphSetup {
  explicit GraphSetup(const Context& c)
      : raw_context(c.device),
        module(Module::load(c.device, cudakit_kernels::test_fatbin())),
        empty(module.kernel<void()>("empty_kernel")),
        stream(c.device) {}
  RawPrimaryContext raw_context;
  Module module;
  Kernel<void()> empty;
  Stream stream;
  RawStream raw_stream;

  Graph capture_chain(int nodes) const {
    return capture_nonempty(stream, [&] {
      for (int i = 0; i < nodes; ++i) launch(stream, empty, one_thread);
    });
  }
};

PairedSamples per_node(PairedSamples s, int nodes) {
  for (auto& v : s.cudakit) v /= nodes;
  for (auto& v : s.raw) v /= nodes;
  return s;
}

// Executables replayed in turn by each side's batches (see the top of this file).
constexpr int executables_per_side = 8;

// Replays `ops` times, cycling through `execs`, with raw cuGraphLaunch on `stream`.
void replay_in_turn(const std::vector<CUgraphExec>& execs, CUstream stream, int ops) {
  static const auto graph_launch = raw_entry<EntryId::GraphLaunch>();
  for (int i = 0; i < ops; ++i)
    check_raw(graph_launch(execs[static_cast<std::size_t>(i) % execs.size()], stream), "cuGraphLaunch");
}

std::vector<Result> replay(const Context& c) {
  GraphSetup setup(c);
  std::vector<Result> results;
  const std::vector<int> sizes = c.quick ? std::vector<int>{100} : std::vector<int>{10, 100, 1000};
  for (int nodes : sizes) {
    Graph graph = setup.capture_chain(nodes);
    std::vector<GraphExec> execs;
    for (int i = 0; i < executables_per_side; ++i) execs.push_back(graph.instantiate());
    std::vector<std::unique_ptr<RawGraph>> raws;
    std::vector<CUgraphExec> raw_execs;
    for (int i = 0; i < executables_per_side; ++i) {
      raws.push_back(std::make_unique<RawGraph>(setup.empty.handle(), nodes, setup.raw_stream.handle()));
      raw_execs.push_back(raws.back()->exec);
    }
    CUstream s = setup.stream.handle();
    int replays = nodes >= 1000 ? 24 : (nodes >= 100 ? 96 : 400);  // a multiple of executables_per_side
    auto samples = time_device(
        c.interleave(replays), setup.stream,
        [&](int ops) {
          for (int i = 0; i < ops; ++i) execs[static_cast<std::size_t>(i) % execs.size()].launch(setup.stream);
        },
        [&](int ops) { replay_in_turn(raw_execs, s, ops); });
    results.push_back(cost_result("graph replay per node, " + std::to_string(nodes) + " nodes", "graphs",
                                  per_node(samples, nodes), 1.02));
    if (nodes == 10) {
      // How far apart two executables of one graph replay: the first raw executable
      // against the second, each replayed alone (reported).
      const std::vector<CUgraphExec> first{raw_execs[0]}, second{raw_execs[1]};
      auto two_execs = time_device(
          c.interleave(replays), setup.stream, [&](int ops) { replay_in_turn(first, s, ops); },
          [&](int ops) { replay_in_turn(second, s, ops); });
      results.push_back(cost_result(
          "graph replay per node, 10 nodes, one raw executable against another of the same graph", "graphs",
          per_node(two_execs, nodes), 0.0));
    }
  }
  return results;
}

std::vector<Result> instantiate(const Context& c) {
  GraphSetup setup(c);
  constexpr int nodes = 1000;
  Graph graph = setup.capture_chain(nodes);
  RawGraph raw(setup.empty.handle(), nodes, setup.raw_stream.handle());
  auto inst = raw_entry<EntryId::GraphInstantiateWithFlags>();
  auto destroy = raw_entry<EntryId::GraphExecDestroy>();
  Interleave plan = c.interleave(4);
  plan.rounds = c.rounds > 0 ? c.rounds : c.quick ? 3 : 15;  // each round is costly
  plan.warmup_rounds = 1;
  plan.ops_per_batch = 4;
  auto samples = time_host(
      plan,
      [&](int ops) {
        for (int i = 0; i < ops; ++i) GraphExec exec = graph.instantiate();
      },
      [&](int ops) {
        for (int i = 0; i < ops; ++i) {
          CUgraphExec e = nullptr;
          check_raw(inst(&e, raw.graph, 0), "cuGraphInstantiateWithFlags");
          check_raw(destroy(e), "cuGraphExecDestroy");
        }
      });
  return {cost_result("instantiate + destroy, 1000 nodes", "graphs", samples, 1.05)};
}

// cudakit's kernel-argument update against cudakit's re-instantiation, 100-node graph:
// the "raw" column is the re-instantiation here; the target is at least 20x faster.
std::vector<Result> update_vs_instantiate(const Context& c) {
  GraphSetup setup(c);
  auto saxpy = setup.module.kernel<void(float, const float*, float*, int)>("saxpy");
  DeviceBuffer<float> x(setup.stream, 256, zeroed), y(setup.stream, 256, zeroed);
  Graph graph = capture_nonempty(setup.stream, [&] {
    for (int i = 0; i < 100; ++i) launch(setup.stream, saxpy, one_thread, 1.0f, x, y, 0);
  });
  GraphExec exec = graph.instantiate();
  GraphNode node = graph.kernel_nodes().front();
  Interleave plan = c.interleave(20);
  plan.rounds = c.rounds > 0 ? c.rounds : c.quick ? 3 : 15;  // each round is costly
  float a = 1.0f;
  auto samples = time_host(
      plan,
      [&](int ops) {
        for (int i = 0; i < ops; ++i) exec.update_kernel_arguments(node, saxpy, a += 1.0f, x, y, 0);
      },
      [&](int ops) {
        for (int i = 0; i < ops; ++i) GraphExec fresh = graph.instantiate();
      });
  return {cost_result("kernel-argument update vs re-instantiate, 100 nodes", "graphs", samples, 0.05)};
}

// Replay of 1000 tiny kernels against launching them one by one on a stream (both
// cudakit; reported, no target).
std::vector<Result> replay_vs_stream(const Context& c) {
  GraphSetup setup(c);
  constexpr int nodes = 1000;
  Graph graph = setup.capture_chain(nodes);
  GraphExec exec = graph.instantiate();
  auto samples = time_device(
      c.interleave(5), setup.stream,
      [&](int ops) {
        for (int i = 0; i < ops; ++i) exec.launch(setup.stream);
      },
      [&](int ops) {
        for (int i = 0; i < ops * nodes; ++i) launch(setup.stream, setup.empty, one_thread);
      });
  return {cost_result("graph replay vs stream launches, per kernel, 1000 kernels", "graphs", per_node(samples, nodes), 0)};
}

// In the quick run: 8 rounds (1 warm-up) of 2 batches of 24 replays of 100 nodes, about
// 25 ms on an H200 (0.55 us per node in bench/results) plus capture and instantiation of
// 8 executables a side.
CUDAKIT_BENCHMARK("graph replay", "graphs", QuickRun::include, replay);
CUDAKIT_BENCHMARK("graph instantiate", "graphs", QuickRun::skip, instantiate);
CUDAKIT_BENCHMARK("graph kernel-argument update", "graphs", QuickRun::skip, update_vs_instantiate);
CUDAKIT_BENCHMARK("graph replay vs stream launches", "graphs", QuickRun::skip, replay_vs_stream);

}  // namespace
}  // namespace cudakit::tool::bench
#endif
