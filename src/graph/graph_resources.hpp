// Internal: what a graph keeps alive (DESIGN 4 and 6): the buffers its nodes touch, with
// how they touch them (for launch-time tracking), the callables of its host nodes, and
// the resources of graphs embedded in it.
//
// Reference counted. Held by the graph's GraphCore, by every executable that runs the
// graph until its last launch completed, by the resources of graphs that embed or clone
// it, and briefly by cudakit code that works on it (Note [Graph lifetimes] in
// graph_resources.cpp). The last release frees the buffers (stream-ordered after every
// stream that used them, tracking.cpp) and the callables.
#pragma once

#include <cuda.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cudakit/detail/allocation.hpp"
#include "cudakit/detail/ref.hpp"
#include "cudakit/graph.hpp"
#include "cudakit/stream.hpp"

namespace cudakit::detail {

class GraphResources {
 public:
  explicit GraphResources(int device) : device_(device) {}
  GraphResources(const GraphResources&) = delete;
  GraphResources& operator=(const GraphResources&) = delete;

  int device() const noexcept { return device_; }

  /// Keeps `allocation` alive and remembers its use (a write wins over a read).
  void add_use(Allocation* allocation, Access access);
  void add_uses(const std::vector<BufferUse>& uses);
  /// Owns `callback`; returns the pointer a host node is given.
  HostCallback* add_callback(std::unique_ptr<HostCallback> callback);
  /// Keeps `child` alive (a reference of its own) and takes over its uses (an embedded or
  /// cloned graph).
  void add_child(GraphResources* child);
  /// Keeps anything else alive: a kernel's handle, which keeps its module loaded.
  void keep(std::shared_ptr<const void> object);

  /// The uses now, for an executable's launch-time tracking.
  std::vector<BufferUse> uses() const;
  std::size_t use_count() const;

 private:
  friend void retain(GraphResources* r) noexcept;
  friend void release(GraphResources* r) noexcept;
  ~GraphResources() = default;

  // A buffer the graph touches, held, and how it touches it.
  struct HeldUse {
    Ref<Allocation> allocation;
    Access access;
  };

  int device_;
  std::atomic<int> refs_{1};
  mutable std::mutex mutex_;
  std::vector<Ref<GraphResources>> children_;
  std::vector<std::shared_ptr<const void>> kept_;
  std::vector<std::unique_ptr<HostCallback>> callbacks_;
  // Released first (members go in reverse order): the buffers, then what runs or names them.
  std::vector<HeldUse> uses_;
  std::unordered_map<Allocation*, std::size_t> index_;  // allocation -> position in uses_
};

/// One more reference (Ref<GraphResources> counts with these).
void retain(GraphResources* r) noexcept;
/// One less; the last frees what is held. Call on a cudakit thread, never in a driver
/// callback (an allocation's release may call the driver): release_at_safe_point.
void release(GraphResources* r) noexcept;

/// Releases `resources` at cudakit's next safe point (run_deferred_tasks): from a driver
/// callback, or where this thread may capture. The queue carries the reference as a raw
/// pointer (detached here, adopted when the task runs), so a task that cannot be queued
/// leaks what it holds, reported, instead of releasing it where that is unsafe.
void release_at_safe_point(Ref<GraphResources> resources) noexcept;

/// The graph handle a Graph owner and its executables share, so that node handles stay
/// valid for as long as an executable may name them (DESIGN 4). The last reference
/// destroys the graph and queues the release of its resources for a safe point.
/// Counted by retain and release (declared in graph.hpp, for the Graph's Ref).
struct GraphCore {
  CUgraph handle = nullptr;
  int device = -1;
  Ref<GraphResources> resources;
  std::atomic<int> refs{1};
};

/// A raw kernel's arguments (their sizes) against its parameter info, where this driver
/// has cuFuncGetParamInfo and knows the function; InvalidArgument on a mismatch.
void check_raw_arguments(CUfunction function, int device, const std::size_t* sizes, std::size_t count);

}  // namespace cudakit::detail
