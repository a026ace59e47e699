// The fault-injection sweep over the graph area's public operations: stream
// capture (with launches, copies and a cross-stream fork and join inside), explicit
// graph building (every node kind, conditional nodes, child graphs), queries and DOT,
// instantiation, replay, upload, whole-graph and argument updates, the Gpu facade's
// capture, and the graph cache (capture, hit, update, recapture, eviction, eager run)
// with device values. The rules, and how an operation is written: fault_sweep.hpp. The tests are
// Call/FaultSweep.EndsCleanlyWhateverTheDriverAnswers/<name>.
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cudakit/cudakit.hpp"
#include "fake_kernels.hpp"
#include "fault_sweep.hpp"

namespace cudakit {
namespace {

namespace sweep = testing::sweep;
using sweep::Scene;
using driver::EntryId;
using Buf = DeviceBuffer<float>;
using testing::SaxpySig;
using testing::FillSig;

constexpr int n = 64;
const LaunchConfig one_block{.grid = 1, .block = n};

// Inputs (made outside the sweep, kept for the scene's life).
const Module& module(Scene& s) {
  int id = s.given<int>("image", [] { return testing::standard_image(); });
  return s.given<Module>("module", [&] { return Module::load(Device::get(0), fake::fatbin_image(id, {90}, {})); });
}
Kernel<FillSig>& fill_kernel(Scene& s) {
  const Module& m = module(s);
  return s.given<Kernel<FillSig>>("fill", [&] { return m.kernel<FillSig>("fill"); });
}
Kernel<SaxpySig>& saxpy_kernel(Scene& s) {
  const Module& m = module(s);
  return s.given<Kernel<SaxpySig>>("saxpy", [&] { return m.kernel<SaxpySig>("saxpy"); });
}
// A zeroed buffer, last written on stream `on`.
Buf& buffer(Scene& s, const std::string& key, int on = 0) {
  StreamRef st = s.stream(on);
  return s.given<Buf>(key, [&] { return Buf(st, n, zeroed); });
}
std::vector<float>& host(Scene& s) {
  return s.given<std::vector<float>>("host", [] { return std::vector<float>(n, 2.0f); });
}
Graph& empty_graph(Scene& s, const std::string& key = "graph") {
  return s.given<Graph>(key, [] { return Graph(Device::get(0)); });
}

// A graph of one fill kernel node writing y, and that node.
struct OneKernel {
  Graph graph;
  GraphNode node;
};
OneKernel& one_kernel(Scene& s, const std::string& key = "one kernel") {
  Kernel<FillSig>& fill = fill_kernel(s);
  Buf& y = buffer(s, "y");
  return s.given<OneKernel>(key, [&] {
    Graph g(Device::get(0));
    GraphNode node = g.add_kernel(fill, one_block, y, 1.0f, n);
    return OneKernel{std::move(g), node};
  });
}
// A graph of every node kind the fake replays (kernel, copies, fill, host, event
// record, child), instantiated.
Graph& mixed_graph(Scene& s) {
  Kernel<SaxpySig>& saxpy = saxpy_kernel(s);
  Buf& x = buffer(s, "x");
  Buf& y = buffer(s, "y");
  std::vector<float>& h = host(s);
  EventRef e = s.event(1);
  return s.given<Graph>("mixed", [&] {
    Graph g(Device::get(0));
    GraphNode up = g.add_copy(x.span(), std::span<const float>(h));
    GraphNode k = g.add_kernel({up}, saxpy, one_block, 2.0f, x, y, n);
    GraphNode f = g.add_fill(x.span(), 0.5f, {k});
    GraphNode d = g.add_copy(std::span<float>(h), y.span(), {f});
    GraphNode hn = g.add_host([] {}, {d});
    g.add_event_record(e, {hn});
    Graph child(Device::get(0));
    child.add_empty();
    g.add_child(child, {hn});
    return g;
  });
}
GraphExec& exec_of(Scene& s, Graph& g, const std::string& key) {
  return s.given<GraphExec>(key, [&] { return g.instantiate(); });
}

// ---- stream capture ----
const bool capture_ops = sweep::add("capture", {
    {"capture (launch, copy, fill)", [](Scene& s) {
       StreamRef st = s.stream();
       Kernel<SaxpySig>& saxpy = saxpy_kernel(s);
       Buf& x = buffer(s, "x");
       Buf& y = buffer(s, "y");
       std::optional<Graph> g = capture(st, [&] {
         fill(st, x, 1.0f);
         launch(st, saxpy, one_block, 2.0f, x, y, n);
         copy(st, y, x);
       });
     }},
    {"capture (a fork and join across streams)", [](Scene& s) {
       StreamRef st = s.stream(0), side = s.stream(1);
       Kernel<FillSig>& fill_k = fill_kernel(s);
       Buf& x = buffer(s, "x");
       Buf& y = buffer(s, "y");
       std::optional<Graph> g = capture(st, [&] {
         side.wait(st);  // fork: the side stream joins the capture
         launch(side, fill_k, one_block, y, 2.0f, n);
         fill(st, x, 1.0f);
         copy(st, y, x);  // y was written on the side stream: a tracked hand-off inside the capture
         st.wait(side);   // join
       });
     }},
    {"capture (copies from and to pinned memory inside)", [](Scene& s) {
       StreamRef st = s.stream();
       Buf& x = buffer(s, "x");
       auto& p = s.given<PinnedBuffer<float>>("pinned", [] { return PinnedBuffer<float>(n, zeroed); });
       std::optional<Graph> g = capture(st, [&] {
         copy(st, p, x);
         copy(st, x, p);
       });
     }},
    {"capture (nothing captured)", [](Scene& s) { std::optional<Graph> g = capture(s.stream(), [] {}); }},
    {"capture_nonempty", [](Scene& s) {
       StreamRef st = s.stream();
       Buf& x = buffer(s, "x");
       Graph g = capture_nonempty(st, [&] { fill(st, x, 1.0f); });
     }},
    {"Capture scope ended by its destructor", [](Scene& s) {
       StreamRef st = s.stream();
       Buf& x = buffer(s, "x");
       Capture c(st);
       fill(st, x, 1.0f);
     }},
    {"is_capturing", [](Scene& s) { s.returned(is_capturing(s.stream())); }},
});

// ---- explicit graphs ----
const bool graph_ops = sweep::add("graphs", {
    {"Graph(Device)", [](Scene& s) { Graph g(s.device()); }},
    {"Graph::add_empty", [](Scene& s) { empty_graph(s).add_empty(); }},
    {"Graph::add_kernel (typed)", [](Scene& s) {
       empty_graph(s).add_kernel(saxpy_kernel(s), one_block, 2.0f, buffer(s, "x"), buffer(s, "y"), n);
     }},
    {"Graph::add_kernel (Function, KernelArgs)", [](Scene& s) {
       empty_graph(s).add_kernel(static_cast<const Function&>(fill_kernel(s)), one_block, KernelArgs().add(buffer(s, "y")).add(1.0f).add(n));
     }},
    {"Graph::add_kernel (RawKernelNode)", [](Scene& s) {
       empty_graph(s).add_kernel(RawKernelNode{fill_kernel(s).handle(), 1, n},
                                 KernelArgs().add(buffer(s, "y")).add(1.0f).add(n));
     },
     // A raw kernel's arguments are checked against cuFuncGetParamInfo where the driver
     // can tell; where it cannot (a failure other than a sticky one), the driver checks
     // them at instantiation (graph.cpp, DESIGN 10): a fallback.
     {EntryId::FuncGetParamInfo}},
    {"Graph::add_copy (device to device)", [](Scene& s) { empty_graph(s).add_copy(buffer(s, "y").span(), buffer(s, "x").span()); }},
    {"Graph::add_copy (host to device)",
     [](Scene& s) { empty_graph(s).add_copy(buffer(s, "y").span(), std::span<const float>(host(s))); }},
    {"Graph::add_copy (device to host)",
     [](Scene& s) { empty_graph(s).add_copy(std::span<float>(host(s)), buffer(s, "y").span()); }},
    {"Graph::add_fill", [](Scene& s) { empty_graph(s).add_fill(buffer(s, "y").span(), 1.0f); }},
    {"Graph::add_host", [](Scene& s) { empty_graph(s).add_host([p = std::make_unique<int>(1)] { (void)*p; }); }},
    {"Graph::add_event_record", [](Scene& s) { empty_graph(s).add_event_record(s.event()); }},
    {"Graph::add_event_wait", [](Scene& s) { empty_graph(s).add_event_wait(s.event()); }},
    {"Graph::add_child", [](Scene& s) {
       Graph& child = empty_graph(s, "child");
       s.setup([&] { child.add_fill(buffer(s, "y").span(), 1.0f); });
       empty_graph(s).add_child(child);
     }},
    {"Graph::make_condition and add_if", [](Scene& s) {
       Graph& g = empty_graph(s);
       ConditionalNode branch = g.add_if(g.make_condition(1));
       branch.body.add_fill(buffer(s, "y").span(), 1.0f);
     }},
    {"Graph::add_if_else", [](Scene& s) {
       Graph& g = empty_graph(s);
       ConditionalNode branch = g.add_if_else(g.make_condition(0, ConditionStart::keep_last_value));
       branch.body.add_empty();
     }},
    {"Graph::add_while", [](Scene& s) {
       Graph& g = empty_graph(s);
       ConditionalNode loop = g.add_while(g.make_condition(0));
       loop.body.add_kernel(fill_kernel(s), one_block, buffer(s, "y"), 1.0f, n);
     }},
    {"Graph::add_kernel (programmatic dependent: programmatic edges)", [](Scene& s) {
       OneKernel& k = one_kernel(s);
       LaunchConfig dependent = one_block;
       dependent.programmatic_dependent_launch = true;
       k.graph.add_kernel({k.node}, fill_kernel(s), dependent, buffer(s, "x"), 2.0f, n);
     }},
    {"Graph::edges", [](Scene& s) { (void)mixed_graph(s).edges(); }},
    {"launch (programmatic dependent, after a hand-off from another stream)", [](Scene& s) {
       LaunchConfig dependent = one_block;
       dependent.programmatic_dependent_launch = true;
       launch(s.stream(1), fill_kernel(s), dependent, buffer(s, "y"), 2.0f, n);
     }},
    {"Graph::clone", [](Scene& s) { Graph c = mixed_graph(s).clone(); }},
    {"Graph::node_count, nodes, kernel_nodes, GraphNode::type", [](Scene& s) {
       Graph& g = mixed_graph(s);
       (void)g.node_count();
       for (GraphNode node : g.nodes()) (void)node.type();
       (void)g.kernel_nodes();
     }},
    {"Graph::dot", [](Scene& s) { (void)mixed_graph(s).dot(); }},
    {"Graph move and destruction (keeps buffers and module alive meanwhile)", [](Scene& s) {
       Graph g(s.device());
       g.add_kernel(fill_kernel(s), one_block, buffer(s, "y"), 1.0f, n);
       Graph h(std::move(g));
     }},
});

// ---- executable graphs ----
const bool exec_ops = sweep::add("executable graphs", {
    {"Graph::instantiate (one kernel)", [](Scene& s) { GraphExec e = one_kernel(s).graph.instantiate(); }},
    {"Graph::instantiate (every node kind)", [](Scene& s) { GraphExec e = mixed_graph(s).instantiate(); }},
    {"Graph::instantiate (conditional)", [](Scene& s) {
       Graph& g = s.given<Graph>("conditional", [&] {
         Graph c(Device::get(0));
         ConditionalNode loop = c.add_if(c.make_condition(1));
         loop.body.add_empty();
         return c;
       });
       GraphExec e = g.instantiate();
     }},
    {"GraphExec::launch", [](Scene& s) { exec_of(s, one_kernel(s).graph, "exec").launch(s.stream()); }},
    {"GraphExec::launch (every node kind)", [](Scene& s) { exec_of(s, mixed_graph(s), "exec").launch(s.stream()); }},
    {"GraphExec::launch on another stream (the graph's buffers hand off)",
     [](Scene& s) { exec_of(s, mixed_graph(s), "exec").launch(s.stream(1)); }},
    {"GraphExec::upload", [](Scene& s) { exec_of(s, one_kernel(s).graph, "exec").upload(s.stream()); }},
    {"GraphExec::update", [](Scene& s) {
       GraphExec& e = exec_of(s, one_kernel(s).graph, "exec");
       e.update(one_kernel(s, "another").graph);
     }},
    {"GraphExec::update_kernel_arguments (typed)", [](Scene& s) {
       OneKernel& k = one_kernel(s);
       exec_of(s, k.graph, "exec").update_kernel_arguments(k.node, fill_kernel(s), buffer(s, "x"), 2.0f, n);
     }},
    {"GraphExec::update_kernel_arguments (KernelArgs)", [](Scene& s) {
       OneKernel& k = one_kernel(s);
       exec_of(s, k.graph, "exec").update_kernel_arguments(k.node, KernelArgs().add(buffer(s, "x")).add(2.0f).add(n));
     },
     {EntryId::FuncGetParamInfo}},  // checked where the driver can tell, as add_kernel (RawKernelNode)
    {"GraphExec lifecycle (instantiate, launch, destroy)", [](Scene& s) {
       GraphExec e = mixed_graph(s).instantiate();
       e.launch(s.stream());
       s.stream().synchronize();
     }},
});

// ---- the Gpu facade (capture) ----
const bool gpu_graph_ops = sweep::add("Gpu facade (capture)", {
    {"Gpu::capture, capture_nonempty and launch(GraphExec)", [](Scene& s) {
       Gpu& gpu = s.given<Gpu>("gpu", [] { return Gpu(0); });
       Buf& y = s.given<Buf>("y on the gpu", [&] { return gpu.alloc<float>(n, zeroed); });
       std::optional<Graph> none = gpu.capture([] {});
       Graph g = gpu.capture_nonempty([&] { gpu.fill(y, 1.0f); });
       GraphExec e = g.instantiate();
       gpu.launch(e);
       gpu.synchronize();
     }},
});

// ---- the graph cache and device values ----
using Cache = GraphCache<int>;
// Work for the cache: the fill kernel writing `y` with `value`.
auto fill_work(Scene& s, const std::string& key, float value) {
  Kernel<FillSig>& fill_k = fill_kernel(s);
  Buf& y = buffer(s, key);
  return [&fill_k, &y, value](StreamRef on) { launch(on, fill_k, one_block, y, value, n); };
}
// A cache holding key 1, captured from fill_work(s, "y", 1.0f).
Cache& warm_cache(Scene& s) {
  auto work = fill_work(s, "y", 1.0f);
  StreamRef st = s.stream();
  return *s.given<std::unique_ptr<Cache>>("cache", [&] {
    auto c = std::make_unique<Cache>(GraphCacheOptions{.capacity = 2});
    c->run(st, 1, work);
    return c;
  });
}
const bool graph_cache_ops = sweep::add("graph cache", {
    {"GraphCache::run (capture, instantiate, launch, destroy)", [](Scene& s) {
       Cache cache;
       cache.run(s.stream(), 1, fill_work(s, "y", 1.0f));
     }},
    {"GraphCache::run (a hit)", [](Scene& s) { warm_cache(s).run(s.stream(), 1, fill_work(s, "y", 1.0f)); }},
    {"GraphCache::run (a hit on another stream)",
     [](Scene& s) { warm_cache(s).run(s.stream(1), 1, fill_work(s, "y", 1.0f)); }},
    {"GraphCache::update_and_run (updated in place)",
     [](Scene& s) { warm_cache(s).update_and_run(s.stream(), 1, fill_work(s, "x", 2.0f)); }},
    {"GraphCache::update_and_run (a changed topology)", [](Scene& s) {
       auto first = fill_work(s, "x", 2.0f);
       auto second = fill_work(s, "y", 3.0f);
       warm_cache(s).update_and_run(s.stream(), 1, [&](StreamRef on) {
         first(on);
         second(on);
       });
     }},
    {"GraphCache::run (evicting the least recently run key)", [](Scene& s) {
       Cache& cache = warm_cache(s);
       auto work = fill_work(s, "x", 2.0f);
       s.setup([&] { cache.run(s.stream(), 2, work); });
       cache.run(s.stream(), 3, work);
     }},
    {"GraphCache::run (work that synchronizes runs eagerly)", [](Scene& s) {
       auto work = fill_work(s, "y", 1.0f);
       Cache cache;
       cache.run(s.stream(), 1, [&](StreamRef on) {
         work(on);
         on.synchronize();
       });
     }},
    {"DeviceValue (make, set, read)", [](Scene& s) {
       DeviceValue<long long> v(s.stream(), 1);
       v.set(s.stream(), 0x123456789abLL);
       (void)v.read(s.stream());
     }},
});

}  // namespace
}  // namespace cudakit
