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
#include "detail/deferred.hpp"
#include "detail/device_state.hpp"
#include "detail/graph_resources.hpp"

namespace cudakit {

using driver::cu;

namespace detail {
/// Checks a packed argument list against the kernel's parameter info, where this driver
/// has cuFuncGetParamInfo (DESIGN 10). `call` names the operation for the message.
void check_kernel_arguments(CUfunction function, const PackedArguments& arguments, const char* call);
}  // namespace detail

namespace {

Resource graph_resource(CUgraph g, int device) { return Resource::of(ResourceKind::graph, g, device); }

CUcontext context_of(int device) {
  CUcontext ctx = detail::library_context(device);
  ContextRef(ctx, device).make_current();
  return ctx;
}

}  // namespace

namespace detail {

void check_kernel_arguments(CUfunction function, const PackedArguments& arguments, const char* call) {
  if (function == nullptr) throw InvalidArgument(std::string(call) + ": the kernel function is null");
  if (!driver::has(driver::EntryId::FuncGetParamInfo)) return;
  for (std::size_t i = 0; i <= arguments.size(); ++i) {
    std::size_t offset = 0, size = 0;
    CUresult r = cu.FuncGetParamInfo(function, i, &offset, &size);
    if (i == arguments.size()) {
      if (r == CUDA_SUCCESS)
        throw InvalidArgument(std::string(call) + ": the kernel takes more than the " +
                              std::to_string(arguments.size()) + " argument(s) given");
      return;
    }
    if (r == CUDA_ERROR_INVALID_VALUE)
      throw InvalidArgument(std::string(call) + ": the kernel takes " + std::to_string(i) + " argument(s), " +
                            std::to_string(arguments.size()) + " were given");
    if (r != CUDA_SUCCESS) return;  // this driver cannot tell us: leave the check to the launch
    if (size != arguments.size_of(i))
      throw InvalidArgument(std::string(call) + ": argument " + std::to_string(i) + " of the kernel is " +
                            std::to_string(size) + " bytes, the value given is " +
                            std::to_string(arguments.size_of(i)) + " bytes");
  }
}

}  // namespace detail

// ---- GraphNode ----

CUgraphNodeType GraphNode::type() const {
  if (handle_ == nullptr) detail::throw_empty_handle("GraphNode");
  CUgraphNodeType t = CU_GRAPH_NODE_TYPE_EMPTY;
  check(cu.GraphNodeGetType(handle_, &t), "cuGraphNodeGetType", Resource::none());
  return t;
}

// ---- GraphRef: inspection ----

void GraphRef::require_handle(const char* call) const {
  if (handle_ == nullptr) [[unlikely]]
    throw EmptyHandle(std::string(call) + ": use of an empty Graph (moved-from or default-constructed)");
}

std::size_t GraphRef::node_count() const {
  require_handle("cuGraphGetNodes");
  std::size_t n = 0;
  check(cu.GraphGetNodes(handle_, nullptr, &n), "cuGraphGetNodes", graph_resource(handle_, device_));
  return n;
}

std::vector<GraphNode> GraphRef::nodes() const {
  std::size_t n = node_count();
  std::vector<CUgraphNode> raw(n);
  if (n != 0) check(cu.GraphGetNodes(handle_, raw.data(), &n), "cuGraphGetNodes", graph_resource(handle_, device_));
  std::vector<GraphNode> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) out.emplace_back(raw[i]);
  return out;
}

std::vector<GraphNode> GraphRef::kernel_nodes() const {
  std::vector<GraphNode> out;
  for (GraphNode n : nodes())
    if (n.type() == CU_GRAPH_NODE_TYPE_KERNEL) out.push_back(n);
  return out;
}

void GraphRef::write_dot(const std::string& path, bool verbose) const {
  require_handle("cuGraphDebugDotPrint");
  check(cu.GraphDebugDotPrint(handle_, path.c_str(), verbose ? CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE : 0),
        "cuGraphDebugDotPrint", graph_resource(handle_, device_));
}

std::string GraphRef::dot(bool verbose) const {
  require_handle("cuGraphDebugDotPrint");
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
  require_handle("cuGraphAddEmptyNode");
  CUgraphNode node = nullptr;
  check(cu.GraphAddEmptyNode(&node, handle_, after.data(), after.size()), "cuGraphAddEmptyNode",
        graph_resource(handle_, device_));
  return GraphNode(node);
}

GraphNode GraphRef::add_kernel(const KernelNodeConfig& kernel, const PackedArguments& arguments,
                               const Dependencies& after) const {
  require_handle("cuGraphAddKernelNode");
  detail::check_kernel_arguments(kernel.function, arguments, "add_kernel");
  Resource res = graph_resource(handle_, device_);
  check_not_poisoned("cuGraphAddKernelNode", res);
  context_of(device_);
  resources_->add_uses(arguments.buffers());  // before the node exists: never a node without its buffers
  CUDA_KERNEL_NODE_PARAMS p{};
  p.func = kernel.function;
  p.gridDimX = kernel.grid[0];
  p.gridDimY = kernel.grid[1];
  p.gridDimZ = kernel.grid[2];
  p.blockDimX = kernel.block[0];
  p.blockDimY = kernel.block[1];
  p.blockDimZ = kernel.block[2];
  p.sharedMemBytes = kernel.shared_memory_bytes;
  p.kernelParams = arguments.pointers();
  CUgraphNode node = nullptr;
  check(cu.GraphAddKernelNode(&node, handle_, after.data(), after.size(), &p), "cuGraphAddKernelNode", res);
  return GraphNode(node);
}

GraphNode GraphRef::add_copy_node(CUdeviceptr destination, detail::Allocation* destination_allocation,
                                  CUdeviceptr source, detail::Allocation* source_allocation, const void* host_source,
                                  void* host_destination, std::size_t bytes, const Dependencies& after) const {
  require_handle("cuGraphAddMemcpyNode");
  if (bytes == 0) return add_empty(after);
  Resource res = graph_resource(handle_, device_);
  check_not_poisoned("cuGraphAddMemcpyNode", res);
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
  check(cu.GraphAddMemcpyNode(&node, handle_, after.data(), after.size(), &p, ctx), "cuGraphAddMemcpyNode", res);
  return GraphNode(node);
}

GraphNode GraphRef::add_fill_node(CUdeviceptr destination, detail::Allocation* allocation, unsigned value,
                                  unsigned element_size, std::size_t count, const Dependencies& after) const {
  require_handle("cuGraphAddMemsetNode");
  if (count == 0) return add_empty(after);
  Resource res = graph_resource(handle_, device_);
  check_not_poisoned("cuGraphAddMemsetNode", res);
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
  check(cu.GraphAddMemsetNode(&node, handle_, after.data(), after.size(), &p, ctx), "cuGraphAddMemsetNode", res);
  return GraphNode(node);
}

GraphNode GraphRef::add_host_node(std::unique_ptr<detail::HostCallback> callback, const Dependencies& after) const {
  require_handle("cuGraphAddHostNode");
  if (conditional_body_)
    throw InvalidArgument("add_host: a conditional node's body cannot hold host nodes (a CUDA rule); put the host "
                          "node after the conditional node");
  Resource res = graph_resource(handle_, device_);
  callback->device = device_;
  detail::HostCallback* owned = resources_->add_callback(std::move(callback));
  CUDA_HOST_NODE_PARAMS p{};
  p.fn = &detail::run_graph_host_callback;
  p.userData = owned;
  CUgraphNode node = nullptr;
  check(cu.GraphAddHostNode(&node, handle_, after.data(), after.size(), &p), "cuGraphAddHostNode", res);
  return GraphNode(node);
}

GraphNode GraphRef::add_event_record(EventRef event, const Dependencies& after) const {
  require_handle("cuGraphAddEventRecordNode");
  if (!event) detail::throw_empty_handle("Event");
  if (conditional_body_)
    throw InvalidArgument("add_event_record: a conditional node's body cannot hold event nodes (a CUDA rule)");
  CUgraphNode node = nullptr;
  check(cu.GraphAddEventRecordNode(&node, handle_, after.data(), after.size(), event.handle()),
        "cuGraphAddEventRecordNode", graph_resource(handle_, device_));
  return GraphNode(node);
}

GraphNode GraphRef::add_event_wait(EventRef event, const Dependencies& after) const {
  require_handle("cuGraphAddEventWaitNode");
  if (!event) detail::throw_empty_handle("Event");
  if (conditional_body_)
    throw InvalidArgument("add_event_wait: a conditional node's body cannot hold event nodes (a CUDA rule)");
  CUgraphNode node = nullptr;
  check(cu.GraphAddEventWaitNode(&node, handle_, after.data(), after.size(), event.handle()),
        "cuGraphAddEventWaitNode", graph_resource(handle_, device_));
  return GraphNode(node);
}

GraphNode GraphRef::add_child(const GraphRef& child, const Dependencies& after) const {
  require_handle("cuGraphAddChildGraphNode");
  child.require_handle("cuGraphAddChildGraphNode");
  if (child.device_ != device_)
    throw InvalidArgument("add_child: the child graph belongs to device " + std::to_string(child.device_) +
                          " and this graph to device " + std::to_string(device_));
  resources_->add_child(child.resources_);
  CUgraphNode node = nullptr;
  check(cu.GraphAddChildGraphNode(&node, handle_, after.data(), after.size(), child.handle_),
        "cuGraphAddChildGraphNode", graph_resource(handle_, device_));
  return GraphNode(node);
}

// ---- conditional nodes ----

ConditionalHandle GraphRef::make_condition(unsigned default_value, ConditionStart start) const {
  require_handle("cuGraphConditionalHandleCreate");
  driver::require(driver::EntryId::GraphConditionalHandleCreate, "conditional graph nodes");
  CUcontext ctx = context_of(device_);
  CUgraphConditionalHandle h = 0;
  check(cu.GraphConditionalHandleCreate(&h, handle_, ctx, default_value,
                                        start == ConditionStart::default_each_launch ? CU_GRAPH_COND_ASSIGN_DEFAULT : 0),
        "cuGraphConditionalHandleCreate", graph_resource(handle_, device_));
  return ConditionalHandle{h};
}

ConditionalNode GraphRef::add_conditional(ConditionalHandle condition, CUgraphConditionalNodeType type,
                                                unsigned bodies, const Dependencies& after) const {
  require_handle("cuGraphAddNode");
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
  check(cu.GraphAddNode(&node, handle_, after.data(), after.size(), &p), "cuGraphAddNode",
        graph_resource(handle_, device_));
  ConditionalNode out;
  out.node = GraphNode(node);
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
  check_not_poisoned("cuGraphCreate", res);
  context_of(device);
  CUgraph g = nullptr;
  check(cu.GraphCreate(&g, 0), "cuGraphCreate", res);
  return g;
}
}  // namespace

Graph::Graph(CUgraph handle, int device, detail::GraphResources* resources)
    : GraphRef(handle, device, resources, false) {
  try {
    detail::attach_to_graph(handle, resources);  // Note [Graph lifetimes]
    core_ = new detail::GraphCore;
  } catch (...) {
    CUresult r = cu.GraphDestroy(handle);
    if (r != CUDA_SUCCESS) park_driver_error(r, "cuGraphDestroy", graph_resource(handle, device), "Graph");
    detail::run_deferred_tasks_if_any();
    throw;
  }
  core_->handle = handle;
  core_->device = device;
  core_->resources = resources;
}

namespace {
Graph make_empty_graph(Device device) {
  CUgraph g = create_graph(device.ordinal());
  auto* resources = new detail::GraphResources(device.ordinal());
  std::unique_ptr<detail::GraphResources, void (*)(detail::GraphResources*)> held(
      resources, [](detail::GraphResources* r) { r->release(); });
  return Graph(g, device.ordinal(), resources);
}
}  // namespace

Graph::Graph(Device device) : Graph(make_empty_graph(device)) {}

Graph Graph::clone() const {
  require_handle("cuGraphClone");
  CUgraph copy = nullptr;
  check(cu.GraphClone(&copy, handle_), "cuGraphClone", graph_resource(handle_, device_));
  auto* resources = new detail::GraphResources(device_);
  std::unique_ptr<detail::GraphResources, void (*)(detail::GraphResources*)> held(
      resources, [](detail::GraphResources* r) { r->release(); });
  try {
    resources->add_child(resources_);
  } catch (...) {
    cu.GraphDestroy(copy);
    throw;
  }
  return Graph(copy, device_, resources);
}

void Graph::reset() noexcept {
  if (core_ != nullptr) detail::release(std::exchange(core_, nullptr));
  static_cast<GraphRef&>(*this) = GraphRef{};
}

}  // namespace cudakit
