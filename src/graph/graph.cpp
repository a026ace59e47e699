// Graphs: the owner, inspection, and explicit building (graph.hpp).
#include "cudakit/graph.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "driver/checked_call.hpp"
#include "stream/deferred.hpp"
#include "device/device_state.hpp"
#include "graph/graph_resources.hpp"
#include "stream/host_callbacks.hpp"
#include "launch/driver_launch_config.hpp"

namespace cudakit {

using driver::cu;

namespace {

Resource graph_resource(CUgraph g, int device) { return Resource::of(ResourceKind::graph, g, device); }

// Clusters, cooperative launches and priorities are attributes of the node (the driver
// documents them as valid for graph nodes). A node whose attributes the driver refused
// is removed again: never a node that would run without what it was asked for.
// Programmatic dependent launch is not among them: in a graph it is the type of the
// node's incoming edges (add_programmatic_edges).
void remove_node(CUgraphNode node, const Resource& res) {
  CUresult d = cu.GraphDestroyNode(node);
  if (d != CUDA_SUCCESS) park_driver_error(d, cu.GraphDestroyNode.name(), res, "add_kernel");
}

// Raises the failure `r` of `call`, removing the node on the way out. The failure is
// raised first, so that a sticky one poisons the device with itself, not with the
// removal's echo of it.
void fail_and_remove_node(CUresult r, const char* call, CUgraphNode node, const Resource& res) {
  try {
    check(r, call, res);
  } catch (...) {
    remove_node(node, res);
    throw;
  }
}

void set_kernel_node_attributes(CUgraphNode node, const detail::DriverLaunchConfig& launch, const Resource& res) {
  for (const CUlaunchAttribute& a : launch.attributes()) {
    if (a.id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION) continue;
    CUresult r = cu.GraphKernelNodeSetAttribute(node, a.id, &a.value);
    if (r == CUDA_SUCCESS) continue;
    fail_and_remove_node(r, cu.GraphKernelNodeSetAttribute.name(), node, res);
  }
}

// A programmatic dependent's dependencies, split by what the edge to each can be: a
// kernel node's is programmatic (the dependent may start once every block of it has
// triggered, cudaTriggerProgrammaticLaunchCompletion, or exited; it must wait,
// cudaGridDependencySynchronize, before reading what that kernel wrote); any other node's
// is a full dependency (the driver allows programmatic edges between kernels only).
struct SplitDependencies {
  std::vector<CUgraphNode> kernels;
  std::vector<CUgraphNode> others;
};

SplitDependencies split_for_programmatic_edges(const Dependencies& after, const Resource& res) {
  SplitDependencies split;
  for (std::size_t i = 0; i < after.size(); ++i) {
    CUgraphNodeType type{};
    checked_call(cu.GraphNodeGetType, res, after.data()[i], &type);
    (type == CU_GRAPH_NODE_TYPE_KERNEL ? split.kernels : split.others).push_back(after.data()[i]);
  }
  return split;
}

// The programmatic edges into `node`; a node whose edges the driver refused is removed.
void add_programmatic_edges(CUgraph graph, CUgraphNode node, const std::vector<CUgraphNode>& from,
                            const Resource& res) {
  if (from.empty()) return;
  std::vector<CUgraphNode> to(from.size(), node);
  CUgraphEdgeData edge{};
  edge.from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC;
  edge.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
  std::vector<CUgraphEdgeData> edges(from.size(), edge);
  CUresult r = cu.GraphAddDependencies(graph, from.data(), to.data(), edges.data(), from.size());
  if (r == CUDA_SUCCESS) return;
  fail_and_remove_node(r, cu.GraphAddDependencies.name(), node, res);
}

CUcontext context_of(int device) {
  CUcontext ctx = detail::library_context(device);
  ContextRef(ctx, device).make_current();
  return ctx;
}

}  // namespace

// A raw kernel's arguments against its parameter info, where this driver has
// cuFuncGetParamInfo and knows the function (DESIGN 10).
void detail::check_raw_arguments(CUfunction function, int device, const std::size_t* sizes, std::size_t count) {
  if (!driver::has(driver::EntryId::FuncGetParamInfo)) return;
  for (std::size_t i = 0; i <= count; ++i) {
    std::size_t offset = 0, size = 0;
    CUresult r = cu.FuncGetParamInfo(function, i, &offset, &size);
    // A sticky error is no "cannot tell" (nor the end of the list): the context is dead,
    // and this call must say so, before the next one fails naming itself.
    if (is_sticky(r)) check(r, cu.FuncGetParamInfo.name(), Resource::of(ResourceKind::kernel, function, device));
    if (i == count) {
      if (r == CUDA_SUCCESS)
        throw InvalidArgument("add_kernel: the kernel takes more than the " + std::to_string(count) +
                              " argument(s) given");
      return;
    }
    if (r == CUDA_ERROR_INVALID_VALUE)
      throw InvalidArgument("add_kernel: the kernel takes " + std::to_string(i) + " argument(s), " +
                            std::to_string(count) + " were given");
    if (r != CUDA_SUCCESS) return;  // this driver cannot tell: the driver checks at instantiation
    if (size != sizes[i])
      throw InvalidArgument("add_kernel: argument " + std::to_string(i + 1) + " of the kernel is " +
                            std::to_string(size) + " bytes, the value given is " + std::to_string(sizes[i]) + " bytes");
  }
}

// ---- GraphNode ----

CUgraphNodeType GraphNode::type() const {
  if (handle_ == nullptr) detail::throw_empty_handle("GraphNode");
  Resource res = Resource::of(ResourceKind::graph_node, handle_, device_);
  check_not_poisoned(cu.GraphNodeGetType.name(), res);
  CUgraphNodeType t = CU_GRAPH_NODE_TYPE_EMPTY;
  checked_call(cu.GraphNodeGetType, res, handle_, &t);
  return t;
}

// ---- GraphRef: inspection ----

void GraphRef::require_handle(const char* call) const {
  if (handle_ == nullptr) [[unlikely]]
    throw EmptyHandle(std::string(call) + ": use of an empty Graph (moved-from or default-constructed)");
  // Every operation on a graph starts here, so here it fails on a poisoned device before
  // the driver sees the call, carrying the original error (DESIGN 7).
  check_not_poisoned(call, graph_resource(handle_, device_));
}

std::size_t GraphRef::node_count() const {
  require_handle(cu.GraphGetNodes.name());
  std::size_t n = 0;
  checked_call(cu.GraphGetNodes, graph_resource(handle_, device_), handle_, nullptr, &n);
  return n;
}

std::vector<GraphNode> GraphRef::nodes() const {
  std::size_t n = node_count();
  std::vector<CUgraphNode> raw(n);
  if (n != 0) checked_call(cu.GraphGetNodes, graph_resource(handle_, device_), handle_, raw.data(), &n);
  std::vector<GraphNode> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) out.emplace_back(raw[i], device_);
  return out;
}

std::vector<GraphEdge> GraphRef::edges() const {
  require_handle(cu.GraphGetEdges.name());
  driver::require(driver::EntryId::GraphGetEdges, "GraphRef::edges (edges with their types)");
  Resource res = graph_resource(handle_, device_);
  std::size_t n = 0;
  checked_call(cu.GraphGetEdges, res, handle_, nullptr, nullptr, nullptr, &n);
  std::vector<CUgraphNode> from(n), to(n);
  std::vector<CUgraphEdgeData> data(n);
  if (n != 0) checked_call(cu.GraphGetEdges, res, handle_, from.data(), to.data(), data.data(), &n);
  std::vector<GraphEdge> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i)
    out.push_back({GraphNode(from[i], device_), GraphNode(to[i], device_),
                   data[i].type == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC});
  return out;
}

std::vector<GraphNode> GraphRef::kernel_nodes() const {
  std::vector<GraphNode> out;
  for (GraphNode n : nodes())
    if (n.type() == CU_GRAPH_NODE_TYPE_KERNEL) out.push_back(n);
  return out;
}

void GraphRef::write_dot(const std::string& path, bool verbose) const {
  require_handle(cu.GraphDebugDotPrint.name());
  checked_call(cu.GraphDebugDotPrint, graph_resource(handle_, device_),
               handle_, path.c_str(), verbose ? CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE : 0);
}

std::string GraphRef::dot(bool verbose) const {
  require_handle(cu.GraphDebugDotPrint.name());
  std::string path = (std::filesystem::temp_directory_path() / "cudakit-graph-XXXXXX").string();
  int fd = ::mkstemp(path.data());
  if (fd < 0) throw Error("GraphRef::dot: cannot create a temporary file in " + std::filesystem::temp_directory_path().string());
  ::close(fd);
  struct Remove {
    std::string path;
    ~Remove() { std::remove(path.c_str()); }
  } remove{path};
  write_dot(path, verbose);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// ---- GraphRef: building ----

void GraphRef::check_same_size(std::size_t destination, std::size_t source, const char* call) {
  if (destination != source)
    throw InvalidArgument(std::string(call) + ": the destination has " + std::to_string(destination) +
                          " elements and the source " + std::to_string(source) + "; a copy needs equal extents");
}

GraphNode GraphRef::add_empty(const Dependencies& after) const {
  require_handle(cu.GraphAddEmptyNode.name());
  CUgraphNode node = nullptr;
  checked_call(cu.GraphAddEmptyNode, graph_resource(handle_, device_), &node, handle_, after.data(), after.size());
  return GraphNode(node, device_);
}

GraphNode GraphRef::add_kernel_node(const Function* function, CUfunction raw, const LaunchConfig& config,
                                    void** params, const detail::BufferUse* uses, std::size_t count,
                                    const std::size_t* sizes, const Dependencies& after) const {
  require_handle(cu.GraphAddKernelNode.name());
  CUfunction handle = function != nullptr ? function->handle() : raw;
  if (handle == nullptr) throw InvalidArgument("add_kernel: the kernel is empty (a null function)");
  if (function != nullptr && function->device_ordinal() != device_)
    throw InvalidArgument("add_kernel: kernel '" + function->name() + "' is loaded on device " +
                          std::to_string(function->device_ordinal()) + ", the graph belongs to device " +
                          std::to_string(device_));
  // A typed or Function node gets the checks a launch gets (the limits are known); a raw
  // CUfunction's limits are not, and the driver checks it at instantiation.
  if (function != nullptr) detail::check_launch_config(function->state(), config);
  if (config.shared_memory_bytes > 0xffffffffu) throw InvalidArgument("add_kernel: dynamic shared memory too large");
  for (std::size_t i = 0; i < count; ++i)
    if (uses[i].allocation != nullptr && uses[i].allocation->device != device_)
      throw InvalidArgument("add_kernel: argument " + std::to_string(i + 1) + " is a buffer on device " +
                            std::to_string(uses[i].allocation->device) + ", the graph belongs to device " +
                            std::to_string(device_));
  if (function == nullptr && sizes != nullptr) detail::check_raw_arguments(handle, device_, sizes, count);
  Resource res = graph_resource(handle_, device_);
  check_not_poisoned(cu.GraphAddKernelNode.name(), res);
  if (config.programmatic_dependent_launch)
    driver::require(driver::EntryId::GraphAddDependencies, "a programmatic dependent kernel node (programmatic edges)");
  context_of(device_);
  // A programmatic dependent is added after its full dependencies only; its edges from
  // kernel nodes follow as programmatic ones.
  SplitDependencies split;
  if (config.programmatic_dependent_launch) split = split_for_programmatic_edges(after, res);
  // The node's buffers and module are kept before the node exists: never a node without them.
  for (std::size_t i = 0; i < count; ++i) resources_->add_use(uses[i].allocation, uses[i].access);
  if (function != nullptr) resources_->keep(std::make_shared<const Function>(*function));
  const detail::DriverLaunchConfig launch(config, nullptr);
  CUDA_KERNEL_NODE_PARAMS p = launch.kernel_node_params(handle, count == 0 ? nullptr : params);
  CUgraphNode node = nullptr;
  if (config.programmatic_dependent_launch)
    checked_call(cu.GraphAddKernelNode, res, &node, handle_, split.others.empty() ? nullptr : split.others.data(),
                 split.others.size(), &p);
  else
    checked_call(cu.GraphAddKernelNode, res, &node, handle_, after.data(), after.size(), &p);
  set_kernel_node_attributes(node, launch, res);
  if (config.programmatic_dependent_launch) add_programmatic_edges(handle_, node, split.kernels, res);
  return GraphNode(node, device_);
}

namespace {
struct UntypedArguments {
  std::vector<void*> pointers;
  std::vector<detail::BufferUse> uses;
  std::vector<std::size_t> sizes;
  explicit UntypedArguments(const KernelArgs& args) {
    const auto& entries = args.entries();
    for (std::size_t i = 0; i < entries.size(); ++i) {
      pointers.push_back(args.value_pointer(i));
      uses.push_back({entries[i].allocation, entries[i].access});
      sizes.push_back(entries[i].size);
    }
  }
};
}  // namespace

GraphNode GraphRef::add_kernel(const Function& function, const LaunchConfig& config, const KernelArgs& args,
                               const Dependencies& after) const {
  UntypedArguments a(args);
  detail::check_untyped_arguments(function.state(), a.sizes);
  return add_kernel_node(&function, nullptr, config, a.pointers.data(), a.uses.data(), a.pointers.size(), nullptr,
                         after);
}

GraphNode GraphRef::add_kernel(const RawKernelNode& kernel, const KernelArgs& args, const Dependencies& after) const {
  UntypedArguments a(args);
  LaunchConfig config;
  config.grid = kernel.grid;
  config.block = kernel.block;
  config.shared_memory_bytes = kernel.shared_memory_bytes;
  return add_kernel_node(nullptr, kernel.function, config, a.pointers.data(), a.uses.data(), a.pointers.size(),
                         a.sizes.data(), after);
}

GraphNode GraphRef::add_copy_node(CUdeviceptr destination, detail::Allocation* destination_allocation,
                                  CUdeviceptr source, detail::Allocation* source_allocation, const void* host_source,
                                  void* host_destination, std::size_t bytes, const Dependencies& after) const {
  require_handle(cu.GraphAddMemcpyNode.name());
  if (bytes == 0) return add_empty(after);
  Resource res = graph_resource(handle_, device_);
  check_not_poisoned(cu.GraphAddMemcpyNode.name(), res);
  CUcontext ctx = context_of(device_);
  resources_->add_use(source_allocation, Access::read);
  resources_->add_use(destination_allocation, Access::write);
  CUDA_MEMCPY3D p{};
  if (host_source != nullptr) {
    p.srcMemoryType = CU_MEMORYTYPE_HOST;
    p.srcHost = host_source;
  } else {
    p.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    p.srcDevice = source;
  }
  if (host_destination != nullptr) {
    p.dstMemoryType = CU_MEMORYTYPE_HOST;
    p.dstHost = host_destination;
  } else {
    p.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    p.dstDevice = destination;
  }
  p.WidthInBytes = bytes;
  p.Height = 1;
  p.Depth = 1;
  CUgraphNode node = nullptr;
  checked_call(cu.GraphAddMemcpyNode, res, &node, handle_, after.data(), after.size(), &p, ctx);
  return GraphNode(node, device_);
}

GraphNode GraphRef::add_fill_node(CUdeviceptr destination, detail::Allocation* allocation, unsigned value,
                                  unsigned element_size, std::size_t count, const Dependencies& after) const {
  require_handle(cu.GraphAddMemsetNode.name());
  if (count == 0) return add_empty(after);
  Resource res = graph_resource(handle_, device_);
  check_not_poisoned(cu.GraphAddMemsetNode.name(), res);
  CUcontext ctx = context_of(device_);
  resources_->add_use(allocation, Access::write);
  CUDA_MEMSET_NODE_PARAMS p{};
  p.dst = destination;
  p.pitch = 0;
  p.value = value;
  p.elementSize = element_size;
  p.width = count;
  p.height = 1;
  CUgraphNode node = nullptr;
  checked_call(cu.GraphAddMemsetNode, res, &node, handle_, after.data(), after.size(), &p, ctx);
  return GraphNode(node, device_);
}

GraphNode GraphRef::add_host_node(std::unique_ptr<detail::HostCallback> callback, const Dependencies& after) const {
  require_handle(cu.GraphAddHostNode.name());
  if (conditional_body_)
    throw InvalidArgument("add_host: a conditional node's body cannot hold host nodes (a CUDA rule); put the host "
                          "node after the conditional node");
  Resource res = graph_resource(handle_, device_);
  callback->device = device_;
  detail::HostCallback* owned = resources_->add_callback(std::move(callback));
  CUDA_HOST_NODE_PARAMS p{};
  p.fn = &detail::run_kept_host_callback;
  p.userData = owned;
  CUgraphNode node = nullptr;
  checked_call(cu.GraphAddHostNode, res, &node, handle_, after.data(), after.size(), &p);
  return GraphNode(node, device_);
}

GraphNode GraphRef::add_event_record(EventRef event, const Dependencies& after) const {
  require_handle(cu.GraphAddEventRecordNode.name());
  if (!event) detail::throw_empty_handle("Event");
  if (conditional_body_)
    throw InvalidArgument("add_event_record: a conditional node's body cannot hold event nodes (a CUDA rule)");
  CUgraphNode node = nullptr;
  checked_call(cu.GraphAddEventRecordNode, graph_resource(handle_, device_),
               &node, handle_, after.data(), after.size(), event.handle());
  return GraphNode(node, device_);
}

GraphNode GraphRef::add_event_wait(EventRef event, const Dependencies& after) const {
  require_handle(cu.GraphAddEventWaitNode.name());
  if (!event) detail::throw_empty_handle("Event");
  if (conditional_body_)
    throw InvalidArgument("add_event_wait: a conditional node's body cannot hold event nodes (a CUDA rule)");
  CUgraphNode node = nullptr;
  checked_call(cu.GraphAddEventWaitNode, graph_resource(handle_, device_),
               &node, handle_, after.data(), after.size(), event.handle());
  return GraphNode(node, device_);
}

GraphNode GraphRef::add_child(const GraphRef& child, const Dependencies& after) const {
  require_handle(cu.GraphAddChildGraphNode.name());
  child.require_handle(cu.GraphAddChildGraphNode.name());
  if (child.device_ != device_)
    throw InvalidArgument("add_child: the child graph belongs to device " + std::to_string(child.device_) +
                          " and this graph to device " + std::to_string(device_));
  resources_->add_child(child.resources_);
  CUgraphNode node = nullptr;
  checked_call(cu.GraphAddChildGraphNode, graph_resource(handle_, device_),
               &node, handle_, after.data(), after.size(), child.handle_);
  return GraphNode(node, device_);
}

// ---- conditional nodes ----

ConditionalHandle GraphRef::make_condition(unsigned default_value, ConditionStart start) const {
  require_handle(cu.GraphConditionalHandleCreate.name());
  driver::require(driver::EntryId::GraphConditionalHandleCreate, "conditional graph nodes");
  CUcontext ctx = context_of(device_);
  CUgraphConditionalHandle h = 0;
  checked_call(cu.GraphConditionalHandleCreate, graph_resource(handle_, device_),
               &h, handle_, ctx, default_value,
               start == ConditionStart::default_each_launch ? CU_GRAPH_COND_ASSIGN_DEFAULT : 0);
  return ConditionalHandle{h};
}

ConditionalNode GraphRef::add_conditional(ConditionalHandle condition, CUgraphConditionalNodeType type,
                                                unsigned bodies, const Dependencies& after) const {
  require_handle(cu.GraphAddNode.name());
  driver::require(driver::EntryId::GraphConditionalHandleCreate, "conditional graph nodes");
  driver::require(driver::EntryId::GraphAddNode, "conditional graph nodes");
  CUcontext ctx = context_of(device_);
  CUgraphNodeParams p{};
  p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  p.conditional.handle = condition.value;
  p.conditional.type = type;
  p.conditional.size = bodies;
  p.conditional.ctx = ctx;
  CUgraphNode node = nullptr;
  checked_call(cu.GraphAddNode, graph_resource(handle_, device_), &node, handle_, after.data(), after.size(), &p);
  ConditionalNode out;
  out.node = GraphNode(node, device_);
  // The bodies belong to the node; what they touch is kept alive with this graph's.
  out.body = GraphRef(p.conditional.phGraph_out[0], device_, resources_, true);
  if (bodies == 2) out.else_body = GraphRef(p.conditional.phGraph_out[1], device_, resources_, true);
  return out;
}

ConditionalNode GraphRef::add_if(ConditionalHandle condition, const Dependencies& after) const {
  return add_conditional(condition, CU_GRAPH_COND_TYPE_IF, 1, after);
}

ConditionalNode GraphRef::add_if_else(ConditionalHandle condition, const Dependencies& after) const {
  return add_conditional(condition, CU_GRAPH_COND_TYPE_IF, 2, after);
}

ConditionalNode GraphRef::add_while(ConditionalHandle condition, const Dependencies& after) const {
  return add_conditional(condition, CU_GRAPH_COND_TYPE_WHILE, 1, after);
}

// ---- Graph ----

namespace {
CUgraph create_graph(int device) {
  Resource res = Resource::of_device(device);
  check_not_poisoned(cu.GraphCreate.name(), res);
  context_of(device);
  CUgraph g = nullptr;
  checked_call(cu.GraphCreate, res, &g, 0);
  return g;
}
}  // namespace

Graph::Graph(CUgraph handle, int device, detail::Ref<detail::GraphResources> resources)
    : GraphRef(handle, device, resources.get(), false) {
  try {
    core_ = detail::make_ref<detail::GraphCore>();
  } catch (...) {
    CUresult r = cu.GraphDestroy(handle);
    if (r != CUDA_SUCCESS) park_driver_error(r, cu.GraphDestroy.name(), graph_resource(handle, device), "Graph");
    detail::run_deferred_tasks_if_any();
    throw;
  }
  core_->handle = handle;
  core_->device = device;
  core_->resources = std::move(resources);  // the core's reference (Note [Graph lifetimes])
}

namespace {
Graph make_empty_graph(Device device) {
  auto resources = detail::make_ref<detail::GraphResources>(device.ordinal());
  CUgraph g = create_graph(device.ordinal());
  return Graph(g, device.ordinal(), std::move(resources));
}
}  // namespace

Graph::Graph(Device device) : Graph(make_empty_graph(device)) {}

Graph Graph::clone() const {
  require_handle(cu.GraphClone.name());
  CUgraph copy = nullptr;
  checked_call(cu.GraphClone, graph_resource(handle_, device_), &copy, handle_);
  detail::Ref<detail::GraphResources> resources;
  try {
    resources = detail::make_ref<detail::GraphResources>(device_);
    resources->add_child(resources_);
  } catch (...) {
    cu.GraphDestroy(copy);
    throw;
  }
  return Graph(copy, device_, std::move(resources));
}

void Graph::reset() noexcept {
  core_.reset();
  static_cast<GraphRef&>(*this) = GraphRef{};
}

}  // namespace cudakit
