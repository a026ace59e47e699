// What graphs keep alive, and its release at a safe point (DESIGN 4 and 6).
//
// Note [Graph lifetimes]. A graph's buffers must stay allocated until its last replay
// finished, even when the user dropped every handle long before. cudakit holds them
// itself, not through the driver:
//   - a Graph (its GraphCore) holds a Ref to its GraphResources; a graph is never
//     launched itself, so that reference goes when the last Graph owner or executable
//     holding the core lets go;
//   - a GraphExec holds a Ref to the resources of the graph it runs (the one it
//     was instantiated or last updated from) and remembers the stream of its last
//     launch. Launches of one executable run in order (a CUDA rule), so once the work
//     queued on that stream so far has completed, every launch has. When the executable
//     is destroyed, or an update replaces its graph, a host function on the device's
//     service stream, ordered after that stream, queues the release of the old reference
//     (graph_exec.cpp, release_after_last_launch);
//   - an embedded (child) or cloned graph's resources are held by the parent's or the
//     clone's (GraphResources::add_child).
// A CUDA user object per graph holding its resources would make the driver track each
// launch's completion itself, which costs 1.7 to 10 us more per replay of a 10-node graph
// and 6 to 8% more per instantiation on the H200 (docs/graphs.md). Raw use of Graph::handle() outside cudakit (instantiating it with
// the driver directly) must therefore keep the Graph alive until that work completed.
// Releases can be driver calls (cuMemFreeAsync), which may not be made while this
// thread captures or inside a driver callback, so they go through a queue that cudakit
// drains at its next safe point.
#include <mutex>
#include <string>

#include "device/capture_tolerant_scope.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "stream/deferred.hpp"
#include "graph/graph_resources.hpp"

namespace cudakit::detail {

using driver::cu;

void release_at_safe_point(Ref<GraphResources> resources) noexcept {
  if (!resources) return;
  GraphResources* held = resources.detach();
  defer_to_safe_point([held] { Ref<GraphResources>(held, adopt).reset(); });
}

// ---- GraphResources ----

// A reference is only ever taken from one already held, so the increment publishes
// nothing (relaxed); the last decrement acquires every holder's writes before the delete.
void retain(GraphResources* r) noexcept { r->refs_.fetch_add(1, std::memory_order_relaxed); }

void release(GraphResources* r) noexcept {
  if (r->refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete r;
}

void GraphResources::add_use(Allocation* allocation, Access access) {
  if (allocation == nullptr) return;
  std::lock_guard lock(mutex_);
  uses_.reserve(uses_.size() + 1);
  auto [it, inserted] = index_.try_emplace(allocation, uses_.size());
  if (inserted) {
    uses_.push_back({Ref<Allocation>(allocation), access});
  } else if (access == Access::write) {
    uses_[it->second].access = Access::write;
  }
}

void GraphResources::add_uses(const std::vector<BufferUse>& uses) {
  for (const BufferUse& u : uses) add_use(u.allocation, u.access);
}

HostCallback* GraphResources::add_callback(std::unique_ptr<HostCallback> callback) {
  std::lock_guard lock(mutex_);
  callbacks_.push_back(std::move(callback));
  return callbacks_.back().get();
}

void GraphResources::add_child(GraphResources* child) {
  if (child == nullptr || child == this) return;
  std::vector<BufferUse> uses = child->uses();
  {
    std::lock_guard lock(mutex_);
    children_.emplace_back(child);
  }
  add_uses(uses);
}

void GraphResources::keep(std::shared_ptr<const void> object) {
  std::lock_guard lock(mutex_);
  kept_.push_back(std::move(object));
}

std::vector<BufferUse> GraphResources::uses() const {
  std::lock_guard lock(mutex_);
  std::vector<BufferUse> out;
  out.reserve(uses_.size());
  for (const HeldUse& u : uses_) out.push_back({u.allocation.get(), u.access});
  return out;
}

std::size_t GraphResources::use_count() const {
  std::lock_guard lock(mutex_);
  return uses_.size();
}

// ---- GraphCore ----

void retain(GraphCore* core) noexcept { core->refs.fetch_add(1, std::memory_order_relaxed); }

void release(GraphCore* core) noexcept {
  if (core->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  CUresult r = CUDA_SUCCESS;
  try {
    CaptureTolerantScope tolerant;  // destroying a graph beside a capture leaves it valid
    r = cu.GraphDestroy(core->handle);
  } catch (...) {
    r = CUDA_ERROR_UNKNOWN;
  }
  if (r != CUDA_SUCCESS)
    park_driver_error(r, cu.GraphDestroy.name(), Resource::of(ResourceKind::graph, core->handle, core->device), "~Graph");
  // Freeing the buffers is a driver call, which must not happen while this thread
  // captures (cuMemFree would invalidate the capture): the release waits for a safe point.
  release_at_safe_point(std::move(core->resources));
  delete core;
  run_deferred_tasks_if_any();
}

}  // namespace cudakit::detail

namespace cudakit {
void run_deferred_releases() noexcept { detail::run_deferred_tasks(); }
}  // namespace cudakit
