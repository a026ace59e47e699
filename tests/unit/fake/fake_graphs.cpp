// Fake driver: stream capture, graphs and executables.
//
// - Capture state per stream, as the driver keeps it: begin/end, the capture mode, the
//   thread, forks and joins through captured events, invalidation by refused calls
//   (synchronous calls on a capturing stream, unsafe calls under thread-local or global
//   mode, waits across capture boundaries), unjoined forks, zero-node graphs for empty
//   captures.
// - A graph is a list of nodes in creation order (dependencies always come earlier).
//   Work submitted to a capturing stream is recorded as a node that can replay it, not
//   run; a launch replays every node on the launch stream, so replays really copy and
//   fill host memory and the ordering model sees them.
// - Executables hold a private copy of their graph; an update checks that node count,
//   types, edges and kernel functions match.
#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>

#include "fake_driver.hpp"
#include "fake_modules.hpp"

namespace cudakit::fake {

namespace {

Driver& D() { return Driver::current(); }

struct Tag {
  char c;
};
template <class H>
H new_handle() {
  return reinterpret_cast<H>(new Tag);
}
template <class H>
void delete_handle(H h) {
  delete reinterpret_cast<Tag*>(h);
}

struct Node {
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  std::string what;
  CUgraph graph = nullptr;
  std::vector<CUgraphNode> deps;
  std::vector<CUgraphEdgeData> edges;  // one per dependency: its type and ports (zero: a full one)
  std::function<CUresult(CUstream)> replay;  // captured operations, copies, fills
  // kernel nodes
  CUfunction function = nullptr;
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1}, shared = 0;
  std::vector<std::vector<unsigned char>> params;
  std::vector<void*> param_pointers;
  std::map<int, CUlaunchAttributeValue> attributes;  // cuGraphKernelNodeSetAttribute
  // host nodes
  CUhostFn host_fn = nullptr;
  void* host_data = nullptr;
  // event nodes
  CUevent event = nullptr;
  // child graph and conditional nodes: graphs the node owns
  std::vector<CUgraph> bodies;
  CUgraphConditionalHandle condition = 0;
  CUgraphConditionalNodeType conditional_type = CU_GRAPH_COND_TYPE_IF;
};

struct Graph {
  std::vector<CUgraphNode> nodes;
  std::vector<CUgraphConditionalHandle> conditions;
  bool body = false;  // owned by a node (a child graph copy or a conditional body)
};

struct Condition {
  unsigned default_value = 0;
  bool assign_default = false;
  unsigned value = 0;
};

struct Exec {
  CUgraph graph = nullptr;                       // a private copy
  std::vector<CUgraphNode> source_nodes;         // the nodes of the graph it was instantiated from
  std::map<CUgraphNode, CUgraphNode> node_map;   // source (and updated-from) nodes -> copy nodes
  std::vector<CUgraph> held;                     // replaced copies, kept until queued replays ran
  int pending = 0;
  bool destroyed = false;
};

struct Capture {
  std::uint64_t id = 0;
  CUstream origin = nullptr;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  std::thread::id thread;
  CUgraph graph = nullptr;
  bool invalidated = false;
  std::set<CUstream> members;
};

struct Membership {
  Capture* capture = nullptr;
  std::vector<CUgraphNode> frontier;  // what the stream's next captured node depends on
};

struct CapturedEvent {
  std::uint64_t capture = 0;
  std::vector<CUgraphNode> frontier;
};

struct Kernel {
  std::vector<std::size_t> sizes;
  std::function<void(void* const*)> body;
};

struct Area {
  std::map<CUgraph, Graph> graphs;
  std::map<CUgraphNode, Node> nodes;
  std::map<CUgraphExec, Exec> execs;
  std::map<CUgraphConditionalHandle, Condition> conditions;
  CUgraphConditionalHandle next_condition = 1;
  std::map<std::uint64_t, std::unique_ptr<Capture>> captures;
  std::uint64_t next_capture = 1;
  std::map<CUstream, Membership> capturing;
  std::map<CUevent, CapturedEvent> captured_events;
  // Events last recorded in a capture that ended, or that is invalidated: the driver
  // answers INVALID_VALUE for them until a record outside a capture.
  std::set<CUevent> events_of_ended_captures;
  std::map<CUfunction, Kernel> kernels;
  bool defer = false;
  std::vector<std::pair<CUgraphExec, CUstream>> pending;
  std::vector<std::pair<CUhostFn, void*>> pending_host_functions;  // submitted while replays were in flight

  ~Area() {
    for (auto& [h, g] : graphs) delete_handle(h);
    for (auto& [h, n] : nodes) delete_handle(h);
    for (auto& [h, e] : execs) delete_handle(h);
    for (auto& [h, k] : kernels) delete_handle(h);
  }
};

std::unique_ptr<Area> g_area;
Area& A() { return *g_area; }

thread_local CUstreamCaptureMode tl_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
thread_local CUstream tl_replay_stream = nullptr;

// ---- graphs ----

void destroy_graph(CUgraph g) {
  auto it = A().graphs.find(g);
  if (it == A().graphs.end()) return;
  Graph graph = std::move(it->second);
  A().graphs.erase(it);
  for (CUgraphNode n : graph.nodes) {
    auto nit = A().nodes.find(n);
    if (nit == A().nodes.end()) continue;
    for (CUgraph b : nit->second.bodies) destroy_graph(b);
    A().nodes.erase(nit);
    delete_handle(n);
  }
  delete_handle(g);
}

CUgraph new_graph(bool body) {
  auto g = new_handle<CUgraph>();
  A().graphs[g].body = body;
  return g;
}

CUgraphNode add_node(CUgraph g, Node node, const CUgraphNode* deps, std::size_t count) {
  auto n = new_handle<CUgraphNode>();
  node.graph = g;
  node.deps.assign(deps, deps + count);
  if (node.edges.size() != count) node.edges.assign(count, CUgraphEdgeData{});
  A().nodes[n] = std::move(node);
  A().graphs[g].nodes.push_back(n);
  return n;
}

bool valid_deps(CUgraph g, const CUgraphNode* deps, std::size_t count) {
  if (count != 0 && deps == nullptr) return false;
  for (std::size_t i = 0; i < count; ++i) {
    auto it = A().nodes.find(deps[i]);
    if (it == A().nodes.end() || it->second.graph != g) return false;
  }
  return true;
}

void refresh_param_pointers(Node& n) {
  n.param_pointers.clear();
  for (auto& p : n.params) n.param_pointers.push_back(p.data());
}

// A deep copy of `src` (bodies included); `map` gets every source node -> copy node.
CUgraph copy_graph(CUgraph src, bool body, std::map<CUgraphNode, CUgraphNode>& map) {
  CUgraph dst = new_graph(body);
  Graph source = A().graphs[src];  // a copy: A().graphs may rehash below
  for (CUgraphNode n : source.nodes) {
    Node copy = A().nodes[n];
    for (CUgraphNode& d : copy.deps) d = map[d];
    for (CUgraph& b : copy.bodies) b = copy_graph(b, true, map);
    refresh_param_pointers(copy);
    std::vector<CUgraphNode> deps = copy.deps;
    CUgraphNode m = add_node(dst, std::move(copy), deps.data(), deps.size());
    refresh_param_pointers(A().nodes[m]);
    map[n] = m;
  }
  Graph& d = A().graphs[dst];
  d.conditions = source.conditions;
  return dst;
}

void collect_conditions(CUgraph g, std::vector<CUgraphConditionalHandle>& out) {
  const Graph& graph = A().graphs[g];
  out.insert(out.end(), graph.conditions.begin(), graph.conditions.end());
  for (CUgraphNode n : graph.nodes)
    for (CUgraph b : A().nodes[n].bodies) collect_conditions(b, out);
}

// ---- replays ----

void replay_graph(CUgraph g, CUstream s);

void replay_node(const Node& n, CUstream s) {
  switch (n.type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
      if (n.replay) {  // a captured launch
        if (CUresult r = n.replay(s); r != CUDA_SUCCESS) {
          std::lock_guard l(D().mutex);
          D().problems.push_back("a graph replay of " + n.what + " failed with CUresult " + std::to_string(r));
        }
        break;
      }
      std::function<void(void* const*)> body;
      bool ours = false;
      {
        std::lock_guard l(D().mutex);
        auto k = A().kernels.find(n.function);
        ours = k != A().kernels.end();
        if (ours) {
          D().tick(s);
          body = k->second.body;
        }
      }
      if (!ours) {  // a loaded fake module's kernel: replayed as a launch
        if (CUresult r = replay_kernel(n.function, n.grid, n.block, n.shared, s,
                                       const_cast<void**>(n.param_pointers.data()));
            r != CUDA_SUCCESS) {
          std::lock_guard l(D().mutex);
          D().problems.push_back("a graph replay of a kernel node failed with CUresult " + std::to_string(r));
        }
        break;
      }
      CUstream previous = tl_replay_stream;
      tl_replay_stream = s;
      if (body) body(n.param_pointers.data());
      tl_replay_stream = previous;
      break;
    }
    case CU_GRAPH_NODE_TYPE_HOST:
      if (!n.replay) {
        D().tick(s);
        run_host_function(n.host_fn, n.host_data);
        break;
      }
      [[fallthrough]];
    case CU_GRAPH_NODE_TYPE_MEMCPY:
    case CU_GRAPH_NODE_TYPE_MEMSET:
      if (n.replay) {
        CUresult r = n.replay(s);
        if (r != CUDA_SUCCESS) {
          std::lock_guard l(D().mutex);
          D().problems.push_back("a graph replay of " + n.what + " failed with CUresult " + std::to_string(r) +
                                 " (the memory it touches may have been freed)");
        }
      }
      break;
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: {
      std::lock_guard l(D().mutex);
      if (FakeEvent* ev = D().event(n.event); ev != nullptr && D().stream(s) != nullptr) {
        ev->recorded = true;
        ev->snapshot = D().stream(s)->clock;
      }
      break;
    }
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: {
      std::lock_guard l(D().mutex);
      FakeEvent* ev = D().event(n.event);
      FakeStream* fs = D().stream(s);
      if (ev != nullptr && fs != nullptr)
        for (const auto& [k, v] : ev->snapshot) fs->clock[k] = std::max(fs->clock[k], v);
      break;
    }
    case CU_GRAPH_NODE_TYPE_GRAPH:
      replay_graph(n.bodies[0], s);
      break;
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: {
      auto value = [&] {
        std::lock_guard l(D().mutex);
        return A().conditions[n.condition].value;
      };
      if (n.conditional_type == CU_GRAPH_COND_TYPE_IF) {
        if (value() != 0) replay_graph(n.bodies[0], s);
        else if (n.bodies.size() == 2) replay_graph(n.bodies[1], s);
      } else if (n.conditional_type == CU_GRAPH_COND_TYPE_WHILE) {
        for (int guard = 0; value() != 0 && guard < 1000000; ++guard) replay_graph(n.bodies[0], s);
      }
      break;
    }
    default:
      break;
  }
}

void replay_graph(CUgraph g, CUstream s) {
  std::vector<CUgraphNode> nodes;
  {
    std::lock_guard l(D().mutex);
    nodes = A().graphs[g].nodes;
  }
  for (CUgraphNode id : nodes) {
    Node n;
    {
      std::lock_guard l(D().mutex);
      n = A().nodes[id];
      refresh_param_pointers(n);
    }
    replay_node(n, s);
  }
}

void launch_now(CUgraphExec e, CUstream s) {
  CUgraph g = nullptr;
  {
    std::lock_guard l(D().mutex);
    Exec& exec = A().execs[e];
    g = exec.graph;
    std::vector<CUgraphConditionalHandle> conditions;
    collect_conditions(g, conditions);
    for (auto c : conditions)
      if (A().conditions[c].assign_default) A().conditions[c].value = A().conditions[c].default_value;
  }
  replay_graph(g, s);
}

// After a replay of `e` ran: a destroyed executable lets go of its copies once none is queued.
void finish_replay(CUgraphExec e) {
  {
    std::lock_guard l(D().mutex);
    auto it = A().execs.find(e);
    if (it == A().execs.end()) return;
    Exec& exec = it->second;
    --exec.pending;
    if (exec.pending == 0) {
      for (CUgraph h : exec.held) destroy_graph(h);
      exec.held.clear();
      if (exec.destroyed) {
        destroy_graph(exec.graph);
        A().execs.erase(it);
        delete_handle(e);
      }
    }
  }
}

// ---- capture ----

Membership* membership(CUstream s) {
  auto it = A().capturing.find(s);
  return it == A().capturing.end() ? nullptr : &it->second;
}

void invalidate(Capture* c) { c->invalidated = true; }

void leave_capture(Capture* c) {
  for (CUstream m : c->members) {
    A().capturing.erase(m);
    if (FakeStream* fs = D().stream(m)) {
      fs->capturing = false;
      fs->capture_graph = nullptr;
    }
  }
}

void ancestors(CUgraphNode n, std::set<CUgraphNode>& out) {
  if (!out.insert(n).second) return;
  for (CUgraphNode d : A().nodes[n].deps) ancestors(d, out);
}

// ---- entries: capture ----

CUresult StreamBeginCapture(CUstream s, CUstreamCaptureMode mode) {
  std::lock_guard l(D().mutex);
  if (!D().stream(s)) return CUDA_ERROR_INVALID_HANDLE;
  if (membership(s)) return CUDA_ERROR_ILLEGAL_STATE;
  auto c = std::make_unique<Capture>();
  c->id = A().next_capture++;
  c->origin = s;
  c->mode = mode;
  c->thread = std::this_thread::get_id();
  c->graph = new_graph(false);
  c->members.insert(s);
  A().capturing[s] = Membership{c.get(), {}};
  D().stream(s)->capturing = true;
  D().stream(s)->capture_graph = c->graph;
  A().captures[c->id] = std::move(c);
  return CUDA_SUCCESS;
}

CUresult StreamEndCapture(CUstream s, CUgraph* out) {
  std::lock_guard l(D().mutex);
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  *out = nullptr;
  Membership* m = membership(s);
  if (m == nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  Capture* c = m->capture;
  if (c->origin != s) {  // the driver invalidates the capture too
    invalidate(c);
    return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
  }
  CUresult result = CUDA_SUCCESS;
  if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && c->thread != std::this_thread::get_id()) {
    // The driver refuses, and ends the capture without a graph all the same.
    result = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  } else if (c->invalidated) {
    result = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  } else {
    std::set<CUgraphNode> joined;
    for (CUgraphNode n : m->frontier) ancestors(n, joined);
    for (CUstream other : c->members) {
      if (other == s) continue;
      for (CUgraphNode n : A().capturing[other].frontier)
        if (!joined.count(n)) result = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    }
  }
  leave_capture(c);
  CUgraph g = c->graph;
  for (auto it = A().captured_events.begin(); it != A().captured_events.end();)
    if (it->second.capture == c->id) {
      A().events_of_ended_captures.insert(it->first);
      it = A().captured_events.erase(it);
    } else {
      ++it;
    }
  A().captures.erase(c->id);
  if (result != CUDA_SUCCESS) {
    destroy_graph(g);
    return result;
  }
  D().created("graph", g);
  *out = g;
  return CUDA_SUCCESS;
}

CUresult StreamIsCapturing(CUstream s, CUstreamCaptureStatus* status) {
  std::lock_guard l(D().mutex);
  if (!status) return CUDA_ERROR_INVALID_VALUE;
  if (!D().stream(s)) return CUDA_ERROR_INVALID_HANDLE;
  Membership* m = membership(s);
  *status = m == nullptr ? CU_STREAM_CAPTURE_STATUS_NONE
                         : (m->capture->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE);
  return CUDA_SUCCESS;
}

CUresult StreamGetCaptureInfo(CUstream s, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
                              const CUgraphNode** deps, size_t* count) {
  std::lock_guard l(D().mutex);
  if (!status) return CUDA_ERROR_INVALID_VALUE;
  if (!D().stream(s)) return CUDA_ERROR_INVALID_HANDLE;
  Membership* m = membership(s);
  if (m == nullptr) {
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
  }
  *status = m->capture->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  if (id) *id = m->capture->id;
  if (graph) *graph = m->capture->graph;
  if (deps) *deps = m->frontier.empty() ? nullptr : m->frontier.data();
  if (count) *count = m->frontier.size();
  return CUDA_SUCCESS;
}

CUresult ThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  if (!mode) return CUDA_ERROR_INVALID_VALUE;
  std::swap(*mode, tl_mode);
  return CUDA_SUCCESS;
}

// ---- entries: graphs ----

CUresult GraphCreate(CUgraph* out, unsigned flags) {
  std::lock_guard l(D().mutex);
  if (!out || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  *out = new_graph(false);
  D().created("graph", *out);
  return CUDA_SUCCESS;
}

CUresult GraphDestroy(CUgraph g) {
  {
    std::lock_guard l(D().mutex);
    auto it = A().graphs.find(g);
    if (it == A().graphs.end() || it->second.body) {
      D().problems.push_back("cuGraphDestroy of a graph that is not live, or that a node owns");
      return CUDA_ERROR_INVALID_VALUE;
    }
    D().destroyed("graph", g);
    destroy_graph(g);
  }
  return CUDA_SUCCESS;
}

CUresult GraphClone(CUgraph* out, CUgraph g) {
  std::lock_guard l(D().mutex);
  if (!out || !A().graphs.count(g)) return CUDA_ERROR_INVALID_VALUE;
  std::map<CUgraphNode, CUgraphNode> map;
  *out = copy_graph(g, false, map);
  D().created("graph", *out);
  return CUDA_SUCCESS;
}

CUresult GraphGetNodes(CUgraph g, CUgraphNode* nodes, size_t* count) {
  std::lock_guard l(D().mutex);
  auto it = A().graphs.find(g);
  if (it == A().graphs.end() || !count) return CUDA_ERROR_INVALID_VALUE;
  const auto& all = it->second.nodes;
  if (nodes != nullptr)
    for (std::size_t i = 0; i < std::min(*count, all.size()); ++i) nodes[i] = all[i];
  *count = all.size();
  return CUDA_SUCCESS;
}

CUresult GraphNodeGetType(CUgraphNode n, CUgraphNodeType* type) {
  std::lock_guard l(D().mutex);
  auto it = A().nodes.find(n);
  if (it == A().nodes.end() || !type) return CUDA_ERROR_INVALID_VALUE;
  *type = it->second.type;
  return CUDA_SUCCESS;
}

// A kernel node's function: one of make_kernel's, or a loaded fake module's (fake_modules.cpp).
bool copy_kernel_params(Node& n, CUfunction f, void** params) {
  std::vector<std::size_t> sizes;
  auto k = A().kernels.find(f);
  if (k != A().kernels.end()) sizes = k->second.sizes;
  else if (!function_parameter_sizes(f, &sizes)) return false;
  if (!sizes.empty() && params == nullptr) return false;
  n.params.clear();
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    auto* p = static_cast<unsigned char*>(params[i]);
    n.params.emplace_back(p, p + sizes[i]);
  }
  refresh_param_pointers(n);
  return true;
}

CUresult GraphAddKernelNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t count,
                            const CUDA_KERNEL_NODE_PARAMS* p) {
  std::lock_guard l(D().mutex);
  if (!out || !p || !A().graphs.count(g) || !valid_deps(g, deps, count)) return CUDA_ERROR_INVALID_VALUE;
  Node n;
  n.type = CU_GRAPH_NODE_TYPE_KERNEL;
  n.what = "a kernel node";
  n.function = p->func;
  n.grid[0] = p->gridDimX, n.grid[1] = p->gridDimY, n.grid[2] = p->gridDimZ;
  n.block[0] = p->blockDimX, n.block[1] = p->blockDimY, n.block[2] = p->blockDimZ;
  n.shared = p->sharedMemBytes;
  if (!copy_kernel_params(n, p->func, p->kernelParams)) return CUDA_ERROR_INVALID_VALUE;
  *out = add_node(g, std::move(n), deps, count);
  refresh_param_pointers(A().nodes[*out]);
  return CUDA_SUCCESS;
}

CUresult GraphKernelNodeGetParams(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS* p) {
  std::lock_guard l(D().mutex);
  auto it = A().nodes.find(node);
  if (!p || it == A().nodes.end() || it->second.type != CU_GRAPH_NODE_TYPE_KERNEL) return CUDA_ERROR_INVALID_VALUE;
  Node& n = it->second;
  *p = CUDA_KERNEL_NODE_PARAMS{};
  p->func = n.function;
  p->gridDimX = n.grid[0], p->gridDimY = n.grid[1], p->gridDimZ = n.grid[2];
  p->blockDimX = n.block[0], p->blockDimY = n.block[1], p->blockDimZ = n.block[2];
  p->sharedMemBytes = n.shared;
  refresh_param_pointers(n);
  p->kernelParams = n.param_pointers.empty() ? nullptr : n.param_pointers.data();
  return CUDA_SUCCESS;
}

CUresult GraphKernelNodeSetParams(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS* p) {
  std::lock_guard l(D().mutex);
  auto it = A().nodes.find(node);
  if (!p || it == A().nodes.end() || it->second.type != CU_GRAPH_NODE_TYPE_KERNEL) return CUDA_ERROR_INVALID_VALUE;
  Node n = it->second;
  n.function = p->func;
  if (!copy_kernel_params(n, p->func, p->kernelParams)) return CUDA_ERROR_INVALID_VALUE;
  it->second = std::move(n);
  return CUDA_SUCCESS;
}

// The attributes the driver documents as "valid for graph nodes" that cudakit sets.
CUresult GraphKernelNodeSetAttribute(CUgraphNode node, CUkernelNodeAttrID id, const CUkernelNodeAttrValue* value) {
  std::lock_guard l(D().mutex);
  auto it = A().nodes.find(node);
  if (!value || it == A().nodes.end() || it->second.type != CU_GRAPH_NODE_TYPE_KERNEL) return CUDA_ERROR_INVALID_VALUE;
  switch (id) {
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
      it->second.attributes[id] = *value;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;  // e.g. programmatic stream serialization: "valid for launches" only
  }
}

CUresult GraphDestroyNode(CUgraphNode node) {
  std::lock_guard l(D().mutex);
  auto it = A().nodes.find(node);
  if (it == A().nodes.end()) return CUDA_ERROR_INVALID_VALUE;
  auto git = A().graphs.find(it->second.graph);
  if (git == A().graphs.end()) return CUDA_ERROR_INVALID_VALUE;
  if (!it->second.bodies.empty()) return CUDA_ERROR_NOT_SUPPORTED;  // not modelled: cudakit never destroys such nodes
  auto& nodes = git->second.nodes;
  nodes.erase(std::remove(nodes.begin(), nodes.end(), node), nodes.end());
  for (CUgraphNode other : nodes) {
    Node& o = A().nodes[other];
    for (std::size_t i = o.deps.size(); i-- > 0;)
      if (o.deps[i] == node) {
        o.deps.erase(o.deps.begin() + static_cast<std::ptrdiff_t>(i));
        o.edges.erase(o.edges.begin() + static_cast<std::ptrdiff_t>(i));
      }
  }
  A().nodes.erase(it);
  delete_handle(node);
  return CUDA_SUCCESS;
}

CUresult GraphExecKernelNodeSetParams(CUgraphExec e, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS* p) {
  std::lock_guard l(D().mutex);
  auto eit = A().execs.find(e);
  if (!p || eit == A().execs.end() || eit->second.destroyed) return CUDA_ERROR_INVALID_VALUE;
  auto mit = eit->second.node_map.find(node);
  if (mit == eit->second.node_map.end()) return CUDA_ERROR_INVALID_VALUE;
  Node& n = A().nodes[mit->second];
  if (n.type != CU_GRAPH_NODE_TYPE_KERNEL || n.function != p->func) return CUDA_ERROR_INVALID_VALUE;
  if (!copy_kernel_params(n, p->func, p->kernelParams)) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

bool device_range(CUdeviceptr p, std::size_t bytes) {
  std::uintptr_t base = 0;
  const Allocation* a = D().allocation_of(static_cast<std::uintptr_t>(p), &base);
  return a != nullptr && static_cast<std::uintptr_t>(p) + bytes <= base + a->bytes;
}

CUresult GraphAddMemcpyNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t count,
                            const CUDA_MEMCPY3D* p, CUcontext) {
  std::lock_guard l(D().mutex);
  if (!out || !p || !A().graphs.count(g) || !valid_deps(g, deps, count)) return CUDA_ERROR_INVALID_VALUE;
  if (p->Height > 1 || p->Depth > 1 || p->WidthInBytes == 0) return CUDA_ERROR_INVALID_VALUE;  // 1-D only
  bool src_device = p->srcMemoryType == CU_MEMORYTYPE_DEVICE;
  bool dst_device = p->dstMemoryType == CU_MEMORYTYPE_DEVICE;
  std::size_t bytes = p->WidthInBytes;
  if (src_device && !device_range(p->srcDevice, bytes)) return CUDA_ERROR_INVALID_VALUE;
  if (dst_device && !device_range(p->dstDevice, bytes)) return CUDA_ERROR_INVALID_VALUE;
  const void* src = src_device ? reinterpret_cast<const void*>(p->srcDevice) : p->srcHost;
  void* dst = dst_device ? reinterpret_cast<void*>(p->dstDevice) : p->dstHost;
  if (!src || !dst) return CUDA_ERROR_INVALID_VALUE;
  Node n;
  n.type = CU_GRAPH_NODE_TYPE_MEMCPY;
  n.what = "a copy node";
  n.replay = [=](CUstream s) {
    std::lock_guard lock(D().mutex);
    if ((src_device && !device_range(reinterpret_cast<CUdeviceptr>(src), bytes)) ||
        (dst_device && !device_range(reinterpret_cast<CUdeviceptr>(dst), bytes)))
      return CUDA_ERROR_INVALID_VALUE;
    D().tick(s);
    if (src_device) D().access(s, reinterpret_cast<std::uintptr_t>(src), bytes, false, "a graph copy node (source)");
    if (dst_device) D().access(s, reinterpret_cast<std::uintptr_t>(dst), bytes, true, "a graph copy node (destination)");
    std::memmove(dst, src, bytes);
    return CUDA_SUCCESS;
  };
  *out = add_node(g, std::move(n), deps, count);
  return CUDA_SUCCESS;
}

CUresult GraphAddMemsetNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t count,
                            const CUDA_MEMSET_NODE_PARAMS* p, CUcontext) {
  std::lock_guard l(D().mutex);
  if (!out || !p || !A().graphs.count(g) || !valid_deps(g, deps, count)) return CUDA_ERROR_INVALID_VALUE;
  unsigned size = p->elementSize;
  if ((size != 1 && size != 2 && size != 4) || p->height > 1 || p->width == 0) return CUDA_ERROR_INVALID_VALUE;
  CUdeviceptr dst = p->dst;
  std::size_t width = p->width;
  unsigned value = p->value;
  if (dst % size != 0 || !device_range(dst, width * size)) return CUDA_ERROR_INVALID_VALUE;
  Node n;
  n.type = CU_GRAPH_NODE_TYPE_MEMSET;
  n.what = "a fill node";
  n.replay = [=](CUstream s) {
    std::lock_guard lock(D().mutex);
    if (!device_range(dst, width * size)) return CUDA_ERROR_INVALID_VALUE;
    D().tick(s);
    D().access(s, static_cast<std::uintptr_t>(dst), width * size, true, "a graph fill node");
    auto* d = reinterpret_cast<unsigned char*>(dst);
    for (std::size_t i = 0; i < width; ++i) std::memcpy(d + i * size, &value, size);
    return CUDA_SUCCESS;
  };
  *out = add_node(g, std::move(n), deps, count);
  return CUDA_SUCCESS;
}

CUresult GraphAddHostNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t count,
                          const CUDA_HOST_NODE_PARAMS* p) {
  std::lock_guard l(D().mutex);
  if (!out || !p || !p->fn || !A().graphs.count(g) || !valid_deps(g, deps, count)) return CUDA_ERROR_INVALID_VALUE;
  if (A().graphs[g].body) return CUDA_ERROR_INVALID_VALUE;  // not in conditional bodies (nor, here, child copies)
  Node n;
  n.type = CU_GRAPH_NODE_TYPE_HOST;
  n.what = "a host node";
  n.host_fn = p->fn;
  n.host_data = p->userData;
  *out = add_node(g, std::move(n), deps, count);
  return CUDA_SUCCESS;
}

CUresult add_event_node(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t count, CUevent e,
                        CUgraphNodeType type) {
  std::lock_guard l(D().mutex);
  if (!out || !D().event(e) || !A().graphs.count(g) || !valid_deps(g, deps, count)) return CUDA_ERROR_INVALID_VALUE;
  Node n;
  n.type = type;
  n.what = type == CU_GRAPH_NODE_TYPE_EVENT_RECORD ? "an event record node" : "an event wait node";
  n.event = e;
  *out = add_node(g, std::move(n), deps, count);
  return CUDA_SUCCESS;
}

CUresult GraphAddEventRecordNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t count, CUevent e) {
  return add_event_node(out, g, deps, count, e, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}

CUresult GraphAddEventWaitNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t count, CUevent e) {
  return add_event_node(out, g, deps, count, e, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}

CUresult GraphAddChildGraphNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t count, CUgraph child) {
  std::lock_guard l(D().mutex);
  if (!out || !A().graphs.count(g) || !A().graphs.count(child) || child == g || !valid_deps(g, deps, count))
    return CUDA_ERROR_INVALID_VALUE;
  std::map<CUgraphNode, CUgraphNode> map;
  Node n;
  n.type = CU_GRAPH_NODE_TYPE_GRAPH;
  n.what = "a child graph node";
  n.bodies.push_back(copy_graph(child, true, map));
  *out = add_node(g, std::move(n), deps, count);
  return CUDA_SUCCESS;
}

CUresult GraphAddEmptyNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t count) {
  std::lock_guard l(D().mutex);
  if (!out || !A().graphs.count(g) || !valid_deps(g, deps, count)) return CUDA_ERROR_INVALID_VALUE;
  Node n;
  n.type = CU_GRAPH_NODE_TYPE_EMPTY;
  n.what = "an empty node";
  *out = add_node(g, std::move(n), deps, count);
  return CUDA_SUCCESS;
}

CUresult GraphConditionalHandleCreate(CUgraphConditionalHandle* out, CUgraph g, CUcontext, unsigned default_value,
                                      unsigned flags) {
  std::lock_guard l(D().mutex);
  if (!out || !A().graphs.count(g) || (flags & ~unsigned(CU_GRAPH_COND_ASSIGN_DEFAULT))) return CUDA_ERROR_INVALID_VALUE;
  CUgraphConditionalHandle h = A().next_condition++;
  A().conditions[h] = Condition{default_value, (flags & CU_GRAPH_COND_ASSIGN_DEFAULT) != 0, default_value};
  A().graphs[g].conditions.push_back(h);
  *out = h;
  return CUDA_SUCCESS;
}

CUresult GraphAddNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t count, CUgraphNodeParams* p) {
  std::lock_guard l(D().mutex);
  if (!out || !p || !A().graphs.count(g) || !valid_deps(g, deps, count)) return CUDA_ERROR_INVALID_VALUE;
  if (p->type != CU_GRAPH_NODE_TYPE_CONDITIONAL) return CUDA_ERROR_NOT_SUPPORTED;  // only conditionals are modelled
  auto& c = p->conditional;
  if (!A().conditions.count(c.handle)) return CUDA_ERROR_INVALID_VALUE;
  unsigned max = c.type == CU_GRAPH_COND_TYPE_IF ? 2 : (c.type == CU_GRAPH_COND_TYPE_WHILE ? 1 : 0);
  if (c.size == 0 || c.size > max) return CUDA_ERROR_INVALID_VALUE;
  Node n;
  n.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  n.what = "a conditional node";
  n.condition = c.handle;
  n.conditional_type = c.type;
  for (unsigned i = 0; i < c.size; ++i) n.bodies.push_back(new_graph(true));
  *out = add_node(g, std::move(n), deps, count);
  c.phGraph_out = A().nodes[*out].bodies.data();  // valid for the node's lifetime (never resized)
  return CUDA_SUCCESS;
}

// Edges with their data (CUDA 12.3+). A programmatic edge joins two kernel nodes and
// leaves its source through the programmatic or launch-order port, as the driver requires.
CUresult GraphAddDependencies(CUgraph g, const CUgraphNode* from, const CUgraphNode* to, const CUgraphEdgeData* data,
                              size_t count) {
  std::lock_guard l(D().mutex);
  if (!A().graphs.count(g) || (count != 0 && (!from || !to))) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_deps(g, from, count) || !valid_deps(g, to, count)) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) {
    CUgraphEdgeData e = data ? data[i] : CUgraphEdgeData{};
    if (from[i] == to[i]) return CUDA_ERROR_INVALID_VALUE;
    if (e.type == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC &&
        (A().nodes[from[i]].type != CU_GRAPH_NODE_TYPE_KERNEL || A().nodes[to[i]].type != CU_GRAPH_NODE_TYPE_KERNEL ||
         (e.from_port != CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC && e.from_port != CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER)))
      return CUDA_ERROR_INVALID_VALUE;
    const auto& deps = A().nodes[to[i]].deps;
    if (std::find(deps.begin(), deps.end(), from[i]) != deps.end()) return CUDA_ERROR_INVALID_VALUE;  // a duplicate
  }
  for (size_t i = 0; i < count; ++i) {
    Node& n = A().nodes[to[i]];
    n.deps.push_back(from[i]);
    n.edges.push_back(data ? data[i] : CUgraphEdgeData{});
  }
  return CUDA_SUCCESS;
}

CUresult GraphGetEdges(CUgraph g, CUgraphNode* from, CUgraphNode* to, CUgraphEdgeData* data, size_t* count) {
  std::lock_guard l(D().mutex);
  if (!count || !A().graphs.count(g) || (from == nullptr) != (to == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  std::size_t total = 0;
  for (CUgraphNode n : A().graphs[g].nodes) {
    const Node& node = A().nodes[n];
    for (std::size_t i = 0; i < node.deps.size(); ++i, ++total) {
      if (from == nullptr || total >= *count) continue;
      from[total] = node.deps[i];
      to[total] = n;
      if (data) data[total] = node.edges[i];
    }
  }
  if (from != nullptr && *count < total) return CUDA_ERROR_INVALID_VALUE;  // (the driver: CUDA_ERROR_LOSSY_QUERY)
  *count = total;
  return CUDA_SUCCESS;
}

CUresult instantiate(CUgraphExec* out, CUgraph g, unsigned long long flags, CUgraphNode* error_node,
                     CUgraphInstantiateResult* result) {
  std::lock_guard l(D().mutex);
  if (!out || !A().graphs.count(g) || A().graphs[g].body) return CUDA_ERROR_INVALID_VALUE;
  if (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) {
    for (CUgraphNode n : A().graphs[g].nodes)
      if (A().nodes[n].type == CU_GRAPH_NODE_TYPE_HOST) {  // device launch cannot run host nodes
        if (error_node) *error_node = n;
        if (result) *result = CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED;
        return CUDA_ERROR_INVALID_VALUE;
      }
  }
  auto e = new_handle<CUgraphExec>();
  Exec exec;
  exec.graph = copy_graph(g, true, exec.node_map);
  exec.source_nodes = A().graphs[g].nodes;
  A().execs[e] = std::move(exec);
  D().created("graph exec", e);
  if (result) *result = CUDA_GRAPH_INSTANTIATE_SUCCESS;
  *out = e;
  return CUDA_SUCCESS;
}

CUresult GraphInstantiateWithFlags(CUgraphExec* out, CUgraph g, unsigned long long flags) {
  return instantiate(out, g, flags, nullptr, nullptr);
}

CUresult GraphInstantiateWithParams(CUgraphExec* out, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  p->hErrNode_out = nullptr;
  p->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
  return instantiate(out, g, p->flags, &p->hErrNode_out, &p->result_out);
}

CUresult GraphExecDestroy(CUgraphExec e) {
  {
    std::lock_guard l(D().mutex);
    auto it = A().execs.find(e);
    if (it == A().execs.end() || it->second.destroyed) {
      D().problems.push_back("cuGraphExecDestroy of an executable that is not live");
      return CUDA_ERROR_INVALID_VALUE;
    }
    D().destroyed("graph exec", e);
    Exec& exec = it->second;
    if (exec.pending > 0) {
      exec.destroyed = true;  // its queued replays still need it
    } else {
      destroy_graph(exec.graph);
      for (CUgraph h : exec.held) destroy_graph(h);
      A().execs.erase(it);
      delete_handle(e);
    }
  }
  return CUDA_SUCCESS;
}

CUresult GraphLaunch(CUgraphExec e, CUstream s) {
  {
    std::lock_guard l(D().mutex);
    if (s == nullptr || !D().stream(s)) return CUDA_ERROR_INVALID_HANDLE;
    auto it = A().execs.find(e);
    if (it == A().execs.end() || it->second.destroyed) return CUDA_ERROR_INVALID_VALUE;
    if (membership(s)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // not modelled: captured graph launches
    ++it->second.pending;
    if (A().defer) {
      A().pending.push_back({e, s});
      return CUDA_SUCCESS;
    }
  }
  launch_now(e, s);
  finish_replay(e);
  return CUDA_SUCCESS;
}

CUresult GraphUpload(CUgraphExec e, CUstream s) {
  std::lock_guard l(D().mutex);
  if (s == nullptr || !D().stream(s)) return CUDA_ERROR_INVALID_HANDLE;
  if (!A().execs.count(e)) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult GraphExecUpdate(CUgraphExec e, CUgraph g, CUgraphExecUpdateResultInfo* info) {
  {
    std::lock_guard l(D().mutex);
    auto it = A().execs.find(e);
    if (!info || it == A().execs.end() || !A().graphs.count(g)) return CUDA_ERROR_INVALID_VALUE;
    Exec& exec = it->second;
    *info = CUgraphExecUpdateResultInfo{};
    const std::vector<CUgraphNode>& now = A().graphs[exec.graph].nodes;
    const std::vector<CUgraphNode>& next = A().graphs[g].nodes;
    auto fail = [&](CUgraphExecUpdateResult r, CUgraphNode node, CUgraphNode from) {
      info->result = r;
      info->errorNode = node;
      info->errorFromNode = from;
      return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    };
    if (now.size() != next.size()) return fail(CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, nullptr, nullptr);
    std::map<CUgraphNode, std::size_t> position_now, position_next;
    for (std::size_t i = 0; i < now.size(); ++i) position_now[now[i]] = i, position_next[next[i]] = i;
    for (std::size_t i = 0; i < now.size(); ++i) {
      const Node& a = A().nodes[now[i]];
      const Node& b = A().nodes[next[i]];
      if (a.type != b.type) return fail(CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED, next[i], nullptr);
      if (a.deps.size() != b.deps.size())
        return fail(CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, next[i], b.deps.empty() ? nullptr : b.deps[0]);
      for (std::size_t d = 0; d < a.deps.size(); ++d)
        if (position_now[a.deps[d]] != position_next[b.deps[d]] || a.edges[d].type != b.edges[d].type)
          return fail(CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, next[i], b.deps[d]);
      if (a.type == CU_GRAPH_NODE_TYPE_KERNEL && a.function != b.function)
        return fail(CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE, next[i], nullptr);
    }
    std::map<CUgraphNode, CUgraphNode> map;
    CUgraph copy = copy_graph(g, true, map);
    const std::vector<CUgraphNode>& copied = A().graphs[copy].nodes;
    std::map<CUgraphNode, CUgraphNode> node_map = map;
    for (std::size_t i = 0; i < exec.source_nodes.size() && i < copied.size(); ++i) node_map[exec.source_nodes[i]] = copied[i];
    if (exec.pending > 0) exec.held.push_back(exec.graph);  // queued replays still run the old copy
    else destroy_graph(exec.graph);
    exec.graph = copy;
    exec.node_map = std::move(node_map);
    info->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
  }
  return CUDA_SUCCESS;
}

CUresult GraphDebugDotPrint(CUgraph g, const char* path, unsigned) {
  std::lock_guard l(D().mutex);
  if (!path || !A().graphs.count(g)) return CUDA_ERROR_INVALID_VALUE;
  std::ofstream out(path);
  if (!out) return CUDA_ERROR_OPERATING_SYSTEM;
  out << "digraph fake_graph {\n";
  const auto& nodes = A().graphs[g].nodes;
  std::map<CUgraphNode, std::size_t> index;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    index[nodes[i]] = i;
    out << "  n" << i << " [label=\"" << A().nodes[nodes[i]].what << "\"];\n";
  }
  for (std::size_t i = 0; i < nodes.size(); ++i)
    for (CUgraphNode d : A().nodes[nodes[i]].deps) out << "  n" << index[d] << " -> n" << i << ";\n";
  out << "}\n";
  return CUDA_SUCCESS;
}

}  // namespace

// ---- for the other area files ----

bool capture_operation(CUstream s, CUgraphNodeType type, const char* what, std::function<CUresult(CUstream)> replay,
                       CUresult* result, bool programmatic) {
  std::lock_guard l(D().mutex);
  Membership* m = membership(s);
  if (m == nullptr) return false;
  if (m->capture->invalidated) {
    *result = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    return true;
  }
  Node n;
  n.type = type;
  n.what = std::string("captured ") + what;
  n.replay = std::move(replay);
  std::vector<CUgraphNode> deps = m->frontier;
  // A programmatic dependent launch (CUDA 12.3+ capture): its edges from kernel nodes are
  // programmatic, from any other node full.
  for (CUgraphNode d : deps) {
    CUgraphEdgeData e{};
    if (programmatic && type == CU_GRAPH_NODE_TYPE_KERNEL && A().nodes[d].type == CU_GRAPH_NODE_TYPE_KERNEL) {
      e.from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC;
      e.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
    }
    n.edges.push_back(e);
  }
  CUgraphNode node = add_node(m->capture->graph, std::move(n), deps.data(), deps.size());
  m->frontier = {node};
  *result = CUDA_SUCCESS;
  return true;
}

CUresult unsafe_call(const char*) {
  std::lock_guard l(D().mutex);
  if (tl_mode == CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_SUCCESS;
  std::thread::id me = std::this_thread::get_id();
  bool refused = false;
  for (auto& [id, c] : A().captures) {
    bool own = c->thread == me && c->mode != CU_STREAM_CAPTURE_MODE_RELAXED;
    bool global_elsewhere =
        c->thread != me && c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL && tl_mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
    if (own || global_elsewhere) {
      invalidate(c.get());
      refused = true;
    }
  }
  return refused ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

CUresult refuse_if_capturing(CUstream s) {
  std::lock_guard l(D().mutex);
  Membership* m = membership(s);
  if (m == nullptr) return CUDA_SUCCESS;
  invalidate(m->capture);
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult refuse_context_sync() {
  std::lock_guard l(D().mutex);
  if (A().captures.empty()) return CUDA_SUCCESS;
  for (auto& [id, c] : A().captures) invalidate(c.get());
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

bool capture_event_record(CUevent e, CUstream s, CUresult* result) {
  std::lock_guard l(D().mutex);
  Membership* m = membership(s);
  A().events_of_ended_captures.erase(e);
  if (m == nullptr) {
    A().captured_events.erase(e);
    return false;
  }
  A().captured_events[e] = CapturedEvent{m->capture->id, m->frontier};
  *result = m->capture->invalidated ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
  return true;
}

bool capture_event_wait(CUstream s, CUevent e, CUresult* result) {
  std::lock_guard l(D().mutex);
  Membership* m = membership(s);
  if (A().events_of_ended_captures.count(e)) {
    *result = CUDA_ERROR_INVALID_VALUE;
    return true;
  }
  auto ce = A().captured_events.find(e);
  if (ce == A().captured_events.end()) {
    if (m == nullptr) return false;
    invalidate(m->capture);  // a graph cannot depend on work outside it
    *result = CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    return true;
  }
  Capture* c = A().captures.at(ce->second.capture).get();  // ended captures' events are above
  if (m == nullptr) {  // a fork: the stream joins the capture
    c->members.insert(s);
    A().capturing[s] = Membership{c, ce->second.frontier};
    D().stream(s)->capturing = true;
    D().stream(s)->capture_graph = c->graph;
    *result = c->invalidated ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
    return true;
  }
  if (m->capture != c) {  // both captures are invalidated
    invalidate(m->capture);
    invalidate(c);
    *result = CUDA_ERROR_STREAM_CAPTURE_MERGE;
    return true;
  }
  for (CUgraphNode n : ce->second.frontier)
    if (std::find(m->frontier.begin(), m->frontier.end(), n) == m->frontier.end()) m->frontier.push_back(n);
  *result = c->invalidated ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
  return true;
}

CUresult refuse_captured_event(CUevent e) {
  std::lock_guard l(D().mutex);
  if (A().events_of_ended_captures.count(e)) return CUDA_ERROR_INVALID_VALUE;
  auto ce = A().captured_events.find(e);
  if (ce == A().captured_events.end()) return CUDA_SUCCESS;
  Capture* c = A().captures.at(ce->second.capture).get();  // the capture goes on
  if (c->invalidated) return CUDA_ERROR_INVALID_VALUE;
  invalidate(c);
  return CUDA_ERROR_CAPTURED_EVENT;
}

// ---- test helpers ----

CUfunction make_kernel(std::vector<std::size_t> parameter_sizes, std::function<void(void* const* params)> body) {
  std::lock_guard l(D().mutex);
  auto f = new_handle<CUfunction>();
  A().kernels[f] = Kernel{std::move(parameter_sizes), std::move(body)};
  return f;
}

void kernel_access(std::uintptr_t begin, std::size_t bytes, bool write, const char* what) {
  D().access(tl_replay_stream, begin, bytes, write, what);
}

std::optional<CUgraphEdgeData> edge_between(CUgraphNode from, CUgraphNode to) {
  std::lock_guard l(D().mutex);
  auto it = A().nodes.find(to);
  if (it == A().nodes.end()) return std::nullopt;
  for (std::size_t i = 0; i < it->second.deps.size(); ++i)
    if (it->second.deps[i] == from) return it->second.edges[i];
  return std::nullopt;
}

std::optional<CUlaunchAttributeValue> kernel_node_attribute(CUgraphNode node, CUlaunchAttributeID id) {
  std::lock_guard l(D().mutex);
  auto it = A().nodes.find(node);
  if (it == A().nodes.end()) return std::nullopt;
  auto a = it->second.attributes.find(id);
  if (a == it->second.attributes.end()) return std::nullopt;
  return a->second;
}

std::size_t node_count(CUgraph graph) {
  std::lock_guard l(D().mutex);
  auto it = A().graphs.find(graph);
  return it == A().graphs.end() ? 0 : it->second.nodes.size();
}

void set_conditional(CUgraphConditionalHandle handle, unsigned value) {
  std::lock_guard l(D().mutex);
  A().conditions[handle].value = value;
}

void defer_graph_replays(bool on) {
  std::lock_guard l(D().mutex);
  A().defer = on;
}

std::size_t pending_replays() {
  std::lock_guard l(D().mutex);
  return A().pending.size();
}

void run_pending_replays() {
  for (;;) {
    std::pair<CUgraphExec, CUstream> next;
    {
      std::lock_guard l(D().mutex);
      if (A().pending.empty()) break;
      next = A().pending.front();
      A().pending.erase(A().pending.begin());
    }
    launch_now(next.first, next.second);
    finish_replay(next.first);
  }
  std::vector<std::pair<CUhostFn, void*>> host;
  {
    std::lock_guard l(D().mutex);
    host.swap(A().pending_host_functions);
  }
  for (auto [fn, data] : host) run_host_function(fn, data);
}

void end_every_capture() {
  std::lock_guard l(D().mutex);
  if (!g_area) return;
  for (auto& [id, c] : A().captures) {
    leave_capture(c.get());
    destroy_graph(c->graph);
  }
  A().captures.clear();
}

void stream_destroyed_while_capturing(CUstream s) {
  std::lock_guard l(D().mutex);
  if (!g_area) return;
  Membership* m = membership(s);
  if (m == nullptr) return;
  Capture* c = m->capture;
  invalidate(c);
  if (c->origin != s) {  // a fork: it leaves the capture, which fails at its end
    c->members.erase(s);
    A().capturing.erase(s);
    return;
  }
  // The origin: nobody can end the capture any more; it goes with its partial graph.
  leave_capture(c);
  destroy_graph(c->graph);
  A().captures.erase(c->id);
}

bool defer_host_function_behind_replays(CUhostFn fn, void* data) {
  std::lock_guard l(D().mutex);
  if (!g_area || !A().defer || A().pending.empty()) return false;
  A().pending_host_functions.push_back({fn, data});
  return true;
}

void register_graphs(Driver& d) {
  g_area = std::make_unique<Area>();
  tl_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  using E = EntryId;
  d.implement<E::StreamBeginCapture>(&StreamBeginCapture);
  d.implement<E::StreamEndCapture>(&StreamEndCapture);
  d.implement<E::StreamIsCapturing>(&StreamIsCapturing);
  d.implement<E::StreamGetCaptureInfo>(&StreamGetCaptureInfo);
  d.implement<E::ThreadExchangeStreamCaptureMode>(&ThreadExchangeStreamCaptureMode);
  d.implement<E::GraphCreate>(&GraphCreate);
  d.implement<E::GraphDestroy>(&GraphDestroy);
  d.implement<E::GraphClone>(&GraphClone);
  d.implement<E::GraphGetNodes>(&GraphGetNodes);
  d.implement<E::GraphNodeGetType>(&GraphNodeGetType);
  d.implement<E::GraphInstantiateWithFlags>(&GraphInstantiateWithFlags);
  d.implement<E::GraphInstantiateWithParams>(&GraphInstantiateWithParams);
  d.implement<E::GraphExecDestroy>(&GraphExecDestroy);
  d.implement<E::GraphLaunch>(&GraphLaunch);
  d.implement<E::GraphUpload>(&GraphUpload);
  d.implement<E::GraphExecUpdate>(&GraphExecUpdate);
  d.implement<E::GraphKernelNodeGetParams>(&GraphKernelNodeGetParams);
  d.implement<E::GraphKernelNodeSetParams>(&GraphKernelNodeSetParams);
  d.implement<E::GraphKernelNodeSetAttribute>(&GraphKernelNodeSetAttribute);
  d.implement<E::GraphDestroyNode>(&GraphDestroyNode);
  d.implement<E::GraphExecKernelNodeSetParams>(&GraphExecKernelNodeSetParams);
  d.implement<E::GraphDebugDotPrint>(&GraphDebugDotPrint);
  d.implement<E::GraphAddKernelNode>(&GraphAddKernelNode);
  d.implement<E::GraphAddMemcpyNode>(&GraphAddMemcpyNode);
  d.implement<E::GraphAddMemsetNode>(&GraphAddMemsetNode);
  d.implement<E::GraphAddHostNode>(&GraphAddHostNode);
  d.implement<E::GraphAddEventRecordNode>(&GraphAddEventRecordNode);
  d.implement<E::GraphAddEventWaitNode>(&GraphAddEventWaitNode);
  d.implement<E::GraphAddChildGraphNode>(&GraphAddChildGraphNode);
  d.implement<E::GraphAddEmptyNode>(&GraphAddEmptyNode);
  d.implement<E::GraphAddNode>(&GraphAddNode);
  d.implement<E::GraphConditionalHandleCreate>(&GraphConditionalHandleCreate);
  d.implement<E::GraphAddDependencies>(&GraphAddDependencies);
  d.implement<E::GraphGetEdges>(&GraphGetEdges);
}

}  // namespace cudakit::fake
