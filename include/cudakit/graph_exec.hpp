// Executable graphs: instantiate, launch, update (DESIGN 6).
//
//   cudakit::GraphExec exec = graph.instantiate();
//   for (int i = 0; i < steps; ++i) exec.launch(stream);
//
// Launch and tracking: before each launch, every buffer the graph touches is ordered on
// the launch stream as a read or a write (DESIGN 5 and 6), so a later use of that buffer
// on another stream waits for the replay, and the replay waits for earlier work on
// other streams. While the buffers stay on the launch stream this costs nothing.
// A graph launched by device code (InstantiateOptions::device_launch) is not tracked:
// order it by hand.
//
// Lifetimes: an executable keeps alive what its graph touches (through the driver's user
// object references, released only after its last launch completed) and the graph
// itself (so node handles stay valid for update_kernel_arguments). Destroying an
// executable with launches still queued is safe.
//
// Updates: update(graph) swaps in the parameters of a graph with the same topology
// (cuGraphExecUpdate); a graph that differs throws GraphUpdateError naming the node and
// the reason, and leaves the executable as it was. update_kernel_arguments() changes one
// kernel node's arguments (new scalars, other buffers of the same shape) without
// re-instantiating; the new buffers are kept alive and tracked like the graph's own.
//
// Thread safety: an executable is used by one thread at a time (a CUDA rule): a launch,
// upload or update that finds another in progress on another thread throws
// InvalidArgument instead of racing. Different executables are independent.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

#include "cudakit/export.hpp"
#include "cudakit/graph.hpp"
#include "cudakit/kernel.hpp"
#include "cudakit/kernel_args.hpp"
#include "cudakit/stream.hpp"

namespace cudakit {

namespace detail {
struct ExecState;
}

/// Options for instantiation (cuGraphInstantiateWithParams).
struct CUDAKIT_API InstantiateOptions {
  /// Upload the executable to the device on this stream right away
  /// (CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD); empty: upload at the first launch.
  StreamRef upload_on{};
  /// Free the graph's unfreed memory allocations before each relaunch
  /// (CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH).
  bool auto_free_on_launch = false;
  /// Allow launches from device code (CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH).
  bool device_launch = false;
  /// Honour per-node launch priorities (CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY).
  bool use_node_priority = false;
};

/// Owns an executable graph (cuGraphInstantiateWithParams) and holds its graph's kept-
/// alive resources until it is destroyed and its launches completed. Move-only.
class CUDAKIT_API GraphExec {
 public:
  /// Instantiates `graph`. Throws GraphInstantiateError naming the reason and the node
  /// that caused it.
  explicit GraphExec(const Graph& graph, const InstantiateOptions& options = {});

  /// An empty owner (what a moved-from one becomes): calls that need the executable
  /// throw EmptyHandle.
  GraphExec() = default;
  GraphExec(GraphExec&& other) noexcept : state_(std::exchange(other.state_, nullptr)) {}
  GraphExec& operator=(GraphExec&& other) noexcept {
    if (this != &other) {
      reset();
      state_ = std::exchange(other.state_, nullptr);
    }
    return *this;
  }
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  /// Destroys the executable; queued launches still complete, and what they touch stays
  /// allocated until they have.
  ~GraphExec() { reset(); }

  /// The driver's handle (null when empty), the device's ordinal (-1 when empty), and
  /// whether the owner holds an executable.
  CUgraphExec handle() const noexcept;
  int device_ordinal() const noexcept;
  explicit operator bool() const noexcept { return state_ != nullptr; }

  /// Launches on `stream` (any stream of the graph's device). Not on a stream that a
  /// cudakit capture is capturing: embed the Graph with add_child instead.
  void launch(StreamRef stream);
  /// Uploads the executable to the device on `stream`, so the first launch is as fast as
  /// the later ones.
  void upload(StreamRef stream);

  /// The number of nodes in the graph it was instantiated from (or last updated from).
  std::size_t node_count() const;

  /// Updates the executable in place from `graph` (cuGraphExecUpdate). Throws
  /// GraphUpdateError, naming the node and the reason, when the topology, a node type or
  /// a kernel's function changed in a way an update cannot express; the executable is
  /// then unchanged. A sticky error while it queues the release of the replaced graph's
  /// resources is thrown after the update took effect (other errors there are parked).
  void update(const Graph& graph);

  /// Replaces the arguments of kernel node `node` (a node of the graph this executable
  /// was instantiated from) for later launches (cuGraphExecKernelNodeSetParams). The
  /// kernel and launch shape stay; the new arguments' buffers are kept alive (until the
  /// executable is destroyed and its last launch completed) and tracked at each launch.
  /// `args` bind to `kernel`'s parameters as in launch(); `kernel` must be the node's.
  template <class... Params, class... Args>
  void update_kernel_arguments(GraphNode node, const Kernel<void(Params...)>& kernel, Args&&... args) {
    if constexpr (detail::node_arguments_bind(detail::type_list<Params...>{}, detail::type_list<Args...>{})) {
      detail::BoundNodeArguments<Params...> bound(std::index_sequence_for<Params...>{}, args...);
      update_kernel_node(node, kernel.handle(), bound.pointers, bound.uses, sizeof...(Params), nullptr);
    }
  }
  /// The same with an untyped list, checked against the kernel's parameter info where the
  /// driver has it (count and sizes).
  void update_kernel_arguments(GraphNode node, const KernelArgs& args);

 private:
  void update_kernel_node(GraphNode node, CUfunction expected, void** params, const detail::BufferUse* uses,
                          std::size_t count, const std::size_t* sizes);
  void reset() noexcept;
  detail::ExecState& checked(const char* call) const;
  detail::ExecState* state_ = nullptr;
};

inline GraphExec Graph::instantiate() const { return GraphExec(*this); }
inline GraphExec Graph::instantiate(const InstantiateOptions& options) const { return GraphExec(*this, options); }

}  // namespace cudakit
