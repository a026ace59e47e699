// CUDA graphs: the Graph owner, the GraphRef view, and explicit building (DESIGN 4 and 6).
//
// A Graph comes from a capture (capture.hpp) or is built node by node:
//
//   cudakit::Graph g(device);
//   auto fill = g.add_fill(y.span(), 0.0f);
//   auto run  = g.add_kernel({fill}, saxpy, LaunchConfig{grid_for(n, 256), 256}, 2.0f, x, y, n);
//   auto done = g.add_host([&] { ++replays; }, {run});
//   cudakit::GraphExec exec = g.instantiate();     // graph_exec.hpp
//
// A typed kernel node binds its arguments exactly as launch() does (compile-time checks;
// `const T*` parameters read their buffer, `T*` parameters write it); an untyped one takes
// a Function and a KernelArgs list, checked against the kernel's parameter info.
//
// Lifetimes: a graph keeps alive every buffer its nodes touch, the module of every kernel
// it launches and every callable its host nodes run (DESIGN 4). The Graph holds them, and
// so does every executable made from it until its last launch has completed; cudakit then
// frees them at its next safe point (run_deferred_releases). Host memory given to host
// copies and events given to event nodes are not owned: they must outlive the graph and
// its executables. A graph instantiated or launched with the raw driver (through
// handle()) is outside this: keep the Graph alive until that work has completed.
//
// A GraphRef is a non-owning view: the body of a conditional node is one (its parent
// owns it), and so is a ref taken from a Graph. It must not outlive its owner.
//
// Thread safety: one thread builds a graph at a time; a built graph may be instantiated,
// cloned and inspected from several threads.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cudakit/export.hpp"
#include "cudakit/detail/node_arguments.hpp"
#include "cudakit/detail/ref.hpp"
#include "cudakit/device.hpp"
#include "cudakit/device_span.hpp"
#include "cudakit/event.hpp"
#include "cudakit/kernel.hpp"
#include "cudakit/kernel_args.hpp"
#include "cudakit/launch.hpp"
#include "cudakit/launch_config.hpp"
#include "cudakit/stream.hpp"
#include "cudakit/tracking.hpp"

namespace cudakit {

class GraphExec;
struct InstantiateOptions;

namespace detail {
class GraphResources;
struct GraphCore;
// The count of the graph handle a Graph and its executables share (Ref<GraphCore>); the
// last release destroys the graph (graph_resources.cpp).
CUDAKIT_API void retain(GraphCore* core) noexcept;
CUDAKIT_API void release(GraphCore* core) noexcept;
}  // namespace detail

/// One node of a graph (a non-owning handle; its graph owns it).
class CUDAKIT_API GraphNode {
 public:
  /// An empty node handle.
  GraphNode() = default;
  /// Wraps a raw node handle (nothing is checked); `device` is the ordinal of its graph's
  /// device, named in errors and checked for poisoning (-1: unknown).
  explicit GraphNode(CUgraphNode handle, int device = -1) noexcept : handle_(handle), device_(device) {}
  /// The driver's handle (null when empty), and whether there is one.
  CUgraphNode handle() const noexcept { return handle_; }
  explicit operator bool() const noexcept { return handle_ != nullptr; }
  /// The node's type (cuGraphNodeGetType). Throws EmptyHandle, ContextPoisoned, DriverError.
  CUgraphNodeType type() const;
  /// Same handle.
  friend bool operator==(const GraphNode& a, const GraphNode& b) noexcept { return a.handle_ == b.handle_; }

 private:
  CUgraphNode handle_ = nullptr;
  int device_ = -1;
};

/// An edge of a graph: `to` runs after `from`. A programmatic edge (between two kernel
/// nodes) lets `to` start once every block of `from` has triggered its dependents or
/// exited; `to` then waits for `from`'s completion and memory before it reads what `from`
/// wrote (include/cudakit/device/programmatic_launch.cuh). Any other edge is a full
/// dependency: `to` starts after `from` completed.
struct CUDAKIT_API GraphEdge {
  GraphNode from;
  GraphNode to;
  bool programmatic = false;
};

/// The nodes a new node depends on: `{}` (none), `{a, b}`, or a vector.
/// Implicit from each of those, so `{a, b}` works where one is expected.
class CUDAKIT_API Dependencies {
 public:
  /// No dependency: the node is a root.
  Dependencies() = default;
  /// One node, a list, or a vector of nodes (copied).
  Dependencies(GraphNode node) : nodes_{node.handle()} {}
  Dependencies(std::initializer_list<GraphNode> nodes) {
    for (GraphNode n : nodes) nodes_.push_back(n.handle());
  }
  /// A vector of nodes (copied).
  Dependencies(const std::vector<GraphNode>& nodes) {
    for (GraphNode n : nodes) nodes_.push_back(n.handle());
  }
  /// The raw handles as the driver takes them (null when none), and how many.
  const CUgraphNode* data() const noexcept { return nodes_.empty() ? nullptr : nodes_.data(); }
  std::size_t size() const noexcept { return nodes_.size(); }

 private:
  std::vector<CUgraphNode> nodes_;
};

/// A kernel node from a raw CUfunction (one cudakit did not load): what it launches and
/// its shape. The graph cannot keep its module loaded: that is the caller's part.
struct CUDAKIT_API RawKernelNode {
  CUfunction function = nullptr;
  Dim3 grid;
  Dim3 block;
  unsigned shared_memory_bytes = 0;
};

/// The condition of conditional nodes (cuGraphConditionalHandleCreate). Device code sets
/// it with cudaGraphSetConditional(handle, value); it is a plain 64-bit value to pass as
/// a kernel argument.
struct CUDAKIT_API ConditionalHandle {
  CUgraphConditionalHandle value = 0;
};

/// How a condition starts each launch.
enum class ConditionStart {
  /// Set to the default value at the start of every launch (CU_GRAPH_COND_ASSIGN_DEFAULT).
  default_each_launch,
  /// Keeps the value the last launch left (set only by device code).
  keep_last_value,
};

struct ConditionalNode;

/// A non-owning view of a graph (see above), through which nodes are added and the graph
/// inspected. Calls that need the graph throw EmptyHandle on an empty ref and
/// DriverError when the driver fails.
class CUDAKIT_API GraphRef {
 public:
  /// An empty ref.
  GraphRef() = default;

  /// The driver's handle (null when empty), the device's ordinal (-1 when empty), and
  /// whether the ref has a graph.
  CUgraph handle() const noexcept { return handle_; }
  int device_ordinal() const noexcept { return device_; }
  explicit operator bool() const noexcept { return handle_ != nullptr; }

  /// How many nodes the graph has (nodes of child graphs and conditional bodies count as
  /// one: their parent node).
  std::size_t node_count() const;
  /// The nodes, in the driver's order (the order they were added or captured in).
  std::vector<GraphNode> nodes() const;
  /// The kernel nodes only, in the same order: the handles for argument updates.
  std::vector<GraphNode> kernel_nodes() const;
  /// The edges, with their types (cuGraphGetEdges, CUDA 12.3 drivers and newer; older ones
  /// throw FeatureUnavailable). A capture keeps a programmatic dependent launch's edge from
  /// the kernel before it on its stream as a programmatic edge.
  std::vector<GraphEdge> edges() const;

  /// The graph in Graphviz DOT (cuGraphDebugDotPrint), for debugging. `verbose` adds every
  /// node's parameters.
  std::string dot(bool verbose = true) const;
  /// Writes the DOT text to `path`.
  void write_dot(const std::string& path, bool verbose = true) const;

  // ---- explicit building (each returns the new node) ----

  /// A node that does nothing: a join point for dependencies.
  GraphNode add_empty(const Dependencies& after = {}) const;
  /// A typed kernel node: `args` bind to the kernel's parameters as in launch() (checked
  /// at compile time); the buffers are kept alive and tracked, the kernel's module stays
  /// loaded. The configuration is checked as a launch's is (InvalidArgument naming the
  /// kernel, the value and the limit). Clusters, cooperative launches and priorities
  /// become the node's attributes (a priority takes effect when the executable is
  /// instantiated with InstantiateOptions::use_node_priority). Programmatic dependent
  /// launch becomes the type of the node's edges: its edges from kernel nodes in `after`
  /// are programmatic (CUDA 12.3 drivers and newer: FeatureUnavailable before), its edges
  /// from other nodes full dependencies; the kernel must wait before it reads what those
  /// kernels wrote (docs/launch.md).
  template <class... Params, class... Args>
  GraphNode add_kernel(const Dependencies& after, const Kernel<void(Params...)>& kernel, const LaunchConfig& config,
                       Args&&... args) const {
    if constexpr (detail::node_arguments_bind(detail::type_list<Params...>{}, detail::type_list<Args...>{})) {
      detail::BoundNodeArguments<Params...> bound(std::index_sequence_for<Params...>{}, args...);
      return add_kernel_node(&kernel, nullptr, config, bound.pointers, bound.uses, sizeof...(Params), nullptr, after);
    } else {
      return {};
    }
  }
  /// The same, depending on nothing.
  template <class... Params, class... Args>
  GraphNode add_kernel(const Kernel<void(Params...)>& kernel, const LaunchConfig& config, Args&&... args) const {
    return add_kernel(Dependencies{}, kernel, config, std::forward<Args>(args)...);
  }
  /// An untyped kernel node: the list is checked against the kernel's parameter info
  /// (count and sizes, CUDA 12.4+); buffers are tracked as the list says.
  GraphNode add_kernel(const Function& function, const LaunchConfig& config, const KernelArgs& args,
                       const Dependencies& after = {}) const;
  /// A kernel node from a raw CUfunction; the list's buffers are kept alive and tracked.
  GraphNode add_kernel(const RawKernelNode& kernel, const KernelArgs& args, const Dependencies& after = {}) const;
  /// A device-to-device copy node. The extents must match.
  template <class T>
  GraphNode add_copy(DeviceSpan<T> destination, std::type_identity_t<DeviceSpan<const T>> source,
                     const Dependencies& after = {}) const {
    static_assert(!std::is_const_v<T>, "the destination of a copy must be writable");
    check_same_size(destination.size(), source.size(), "add_copy");
    return add_copy_node(destination.device_pointer(), destination.allocation(), source.device_pointer(),
                         source.allocation(), nullptr, nullptr, destination.size_bytes(), after);
  }
  /// A host-to-device copy node. The host memory is not owned: it must outlive the graph.
  template <class T>
  GraphNode add_copy(DeviceSpan<T> destination, std::type_identity_t<std::span<const T>> source,
                     const Dependencies& after = {}) const {
    static_assert(!std::is_const_v<T>, "the destination of a copy must be writable");
    check_same_size(destination.size(), source.size(), "add_copy");
    return add_copy_node(destination.device_pointer(), destination.allocation(), 0, nullptr, source.data(), nullptr,
                         destination.size_bytes(), after);
  }
  /// A device-to-host copy node. The host memory is not owned: it must outlive the graph.
  template <class T>
  GraphNode add_copy(std::span<T> destination, std::type_identity_t<DeviceSpan<const T>> source,
                     const Dependencies& after = {}) const {
    static_assert(!std::is_const_v<T>, "the destination of a copy must be writable");
    check_same_size(destination.size(), source.size(), "add_copy");
    return add_copy_node(0, nullptr, source.device_pointer(), source.allocation(), nullptr, destination.data(),
                         source.size_bytes(), after);
  }
  /// A node that sets every element of `destination` to `value` (elements of 1, 2 or 4 bytes).
  template <class T>
  GraphNode add_fill(DeviceSpan<T> destination, std::type_identity_t<T> value, const Dependencies& after = {}) const {
    static_assert(!std::is_const_v<T>, "the destination of a fill must be writable");
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4,
                  "a fill node sets elements of 1, 2 or 4 bytes (cuGraphAddMemsetNode)");
    unsigned bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    return add_fill_node(destination.device_pointer(), destination.allocation(), bits, sizeof(T), destination.size(),
                         after);
  }
  /// A host node: runs `fn` on a driver thread at each launch, after its dependencies. `fn`
  /// must not call CUDA; an exception it throws is parked (error.hpp). The graph owns `fn`.
  /// Not allowed in a conditional body (a CUDA rule).
  template <class F>
  GraphNode add_host(F&& fn, const Dependencies& after = {}) const {
    using Fn = std::decay_t<F>;
    return add_host_node(std::make_unique<detail::HostCallbackOf<Fn>>(Fn(std::forward<F>(fn))), after);
  }
  /// Records `event` at this point of each launch. The event must outlive the graph.
  GraphNode add_event_record(EventRef event, const Dependencies& after = {}) const;
  /// Waits for `event` (recorded outside the graph) at this point of each launch.
  GraphNode add_event_wait(EventRef event, const Dependencies& after = {}) const;
  /// Embeds a copy of `child` (cuGraphAddChildGraphNode). This graph keeps alive what the
  /// child's nodes touch; later changes to `child` do not reach the copy.
  GraphNode add_child(const GraphRef& child, const Dependencies& after = {}) const;

  // ---- conditional nodes (CUDA 12.3 drivers and newer) ----

  /// A condition for this graph's conditional nodes. Throws FeatureUnavailable on drivers
  /// without conditional nodes.
  ConditionalHandle make_condition(unsigned default_value = 0,
                                   ConditionStart start = ConditionStart::default_each_launch) const;
  /// Runs `body` once when the condition is nonzero at this point of the launch.
  ConditionalNode add_if(ConditionalHandle condition, const Dependencies& after = {}) const;
  /// Runs `body` when the condition is nonzero, `else_body` otherwise.
  ConditionalNode add_if_else(ConditionalHandle condition, const Dependencies& after = {}) const;
  /// Runs `body` again and again while the condition is nonzero (checked before each run);
  /// a kernel in the body must eventually set it to zero.
  ConditionalNode add_while(ConditionalHandle condition, const Dependencies& after = {}) const;

  /// Internal: a view of `handle` whose resources are `resources`.
  GraphRef(CUgraph handle, int device, detail::GraphResources* resources, bool conditional_body) noexcept
      : handle_(handle), device_(device), resources_(resources), conditional_body_(conditional_body) {}
  /// Internal: what this graph keeps alive.
  detail::GraphResources* resources() const noexcept { return resources_; }

 protected:
  void require_handle(const char* call) const;

  CUgraph handle_ = nullptr;
  int device_ = -1;
  detail::GraphResources* resources_ = nullptr;
  bool conditional_body_ = false;

 private:
  static void check_same_size(std::size_t destination, std::size_t source, const char* call);
  // `function` (may be null for a raw node) is kept alive; `config` is checked for what a
  // node can hold; `sizes` (may be null) are checked against the parameter info.
  GraphNode add_kernel_node(const Function* function, CUfunction raw, const LaunchConfig& config, void** params,
                            const detail::BufferUse* uses, std::size_t count, const std::size_t* sizes,
                            const Dependencies& after) const;
  GraphNode add_copy_node(CUdeviceptr destination, detail::Allocation* destination_allocation, CUdeviceptr source,
                          detail::Allocation* source_allocation, const void* host_source, void* host_destination,
                          std::size_t bytes, const Dependencies& after) const;
  GraphNode add_fill_node(CUdeviceptr destination, detail::Allocation* allocation, unsigned value,
                          unsigned element_size, std::size_t count, const Dependencies& after) const;
  GraphNode add_host_node(std::unique_ptr<detail::HostCallback> callback, const Dependencies& after) const;
  ConditionalNode add_conditional(ConditionalHandle condition, CUgraphConditionalNodeType type, unsigned bodies,
                              const Dependencies& after) const;
};

/// A conditional node and the body graphs it owns (add_if, add_if_else, add_while). Build
/// the bodies through their refs; what they touch is kept alive with the parent graph.
struct CUDAKIT_API ConditionalNode {
  GraphNode node;
  GraphRef body;       ///< runs when the condition is nonzero (if) / while it is nonzero
  GraphRef else_body;  ///< add_if_else only: runs when the condition is zero
};

/// Owns a graph (cuGraphCreate or a capture) and what its nodes keep alive (see above;
/// executables made from it hold that too, until their last launch completed). Move-only; the GraphRef calls work on it directly.
class CUDAKIT_API Graph : public GraphRef {
 public:
  /// An empty graph on `device`, to build node by node. Throws DriverError.
  explicit Graph(Device device);

  /// An empty owner (what a moved-from one becomes): calls that need the graph throw
  /// EmptyHandle.
  Graph() = default;
  Graph(Graph&& other) noexcept : GraphRef(std::exchange(static_cast<GraphRef&>(other), GraphRef{})),
                                  core_(std::move(other.core_)) {}
  Graph& operator=(Graph&& other) noexcept {
    if (this != &other) {
      reset();
      static_cast<GraphRef&>(*this) = std::exchange(static_cast<GraphRef&>(other), GraphRef{});
      core_ = std::move(other.core_);
    }
    return *this;
  }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  /// Destroys the graph. Executables made from it stay valid and keep what they need.
  ~Graph() { reset(); }

  /// A non-owning view, valid while this owner lives.
  GraphRef ref() const noexcept { return *this; }

  /// An independent copy (cuGraphClone) that keeps alive the same buffers.
  Graph clone() const;
  /// Instantiates an executable (graph_exec.hpp has the options and the type).
  GraphExec instantiate() const;
  GraphExec instantiate(const InstantiateOptions& options) const;

  /// Internal: adopts a graph cudakit made (capture end), with what it keeps alive.
  Graph(CUgraph handle, int device, detail::Ref<detail::GraphResources> resources);
  /// Internal: the shared handle executables hold, so node handles stay valid for them.
  detail::GraphCore* core() const noexcept { return core_.get(); }

 private:
  void reset() noexcept;
  detail::Ref<detail::GraphCore> core_;
};

/// Frees the buffers and callables of graphs whose last use ended (their graph and
/// executables are destroyed and their launches completed). cudakit also does this at
/// every graph launch, capture end, graph or executable destruction and buffer
/// allocation; call it in a program that does none of these for a long time. Does
/// nothing while this thread captures in a mode that forbids frees. Never throws.
CUDAKIT_API void run_deferred_releases() noexcept;

}  // namespace cudakit
