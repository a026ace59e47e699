// What graphs keep alive, the user objects that tie it to the driver's lifetimes, and the
// deferred queue that frees it at safe points (DESIGN 4 and 6).
//
// Note [Graph lifetimes]. A graph's buffers must stay allocated until its last replay
// finished, even when the user dropped every handle long before. The driver knows when
// that is: a CUDA user object retained by the graph is released once the graph and every
// executable instantiated from it are destroyed and their launches completed (the
// driver also moves references correctly through cuGraphExecUpdate and child graphs).
// Its destructor runs on a driver thread, where no CUDA call may be made, and freeing a
// buffer is a CUDA call (cuMemFreeAsync). So the destructor only queues the release, and
// cudakit drains the queue at its next safe point.
#include <mutex>
#include <string>

#include "cudakit/detail/capture_guard.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "detail/deferred.hpp"
#include "detail/graph_resources.hpp"

namespace cudakit::detail {

using driver::cu;

// ---- the deferred queue ----

std::atomic<bool> deferred_tasks_pending{false};

namespace {
struct DeferredQueue {
  std::mutex mutex;
  std::vector<std::function<void()>> tasks;
};
DeferredQueue& deferred_queue() {
  static auto* q = new DeferredQueue;  // never destroyed: driver threads may queue during exit
  return *q;
}
thread_local bool draining = false;
}  // namespace

void defer_to_safe_point(std::function<void()> task) noexcept {
  try {
    auto& q = deferred_queue();
    std::lock_guard lock(q.mutex);
    q.tasks.push_back(std::move(task));
    deferred_tasks_pending.store(true, std::memory_order_release);
  } catch (...) {
    park_error({CUDA_SUCCESS, "deferred release", "could not queue a release for a safe point; what it holds leaks"});
  }
}

void run_deferred_tasks() noexcept {
  if (draining || unsafe_calls_would_invalidate_a_capture()) return;
  draining = true;
  auto& q = deferred_queue();
  for (;;) {
    std::vector<std::function<void()>> tasks;
    {
      std::lock_guard lock(q.mutex);
      tasks.swap(q.tasks);
      deferred_tasks_pending.store(false, std::memory_order_relaxed);
    }
    if (tasks.empty()) break;
    for (auto& task : tasks) {
      try {
        task();
      } catch (const std::exception& e) {
        park_error({CUDA_SUCCESS, "deferred release", e.what()});
      } catch (...) {
        park_error({CUDA_SUCCESS, "deferred release", "a deferred release threw an exception that is not a std::exception"});
      }
    }
  }
  draining = false;
}

// ---- GraphResources ----

void GraphResources::release() noexcept {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

GraphResources::~GraphResources() {
  for (const BufferUse& u : uses_) u.allocation->release();
  callbacks_.clear();
  kept_.clear();
  for (GraphResources* child : children_) child->release();
}

void GraphResources::add_use(Allocation* allocation, Access access) {
  if (allocation == nullptr) return;
  std::lock_guard lock(mutex_);
  uses_.reserve(uses_.size() + 1);
  auto [it, inserted] = index_.try_emplace(allocation, uses_.size());
  if (inserted) {
    allocation->retain();
    uses_.push_back({allocation, access});
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
    children_.reserve(children_.size() + 1);
    child->retain();
    children_.push_back(child);
  }
  add_uses(uses);
}

void GraphResources::keep(std::shared_ptr<const void> object) {
  std::lock_guard lock(mutex_);
  kept_.push_back(std::move(object));
}

std::vector<BufferUse> GraphResources::uses() const {
  std::lock_guard lock(mutex_);
  return uses_;
}

std::size_t GraphResources::use_count() const {
  std::lock_guard lock(mutex_);
  return uses_.size();
}

// ---- user objects ----

namespace {
// Runs on a driver thread: no CUDA call here (Note [Graph lifetimes]).
void CUDA_CB user_object_destroyed(void* resources) {
  auto* r = static_cast<GraphResources*>(resources);
  defer_to_safe_point([r] { r->release(); });
}
}  // namespace

void attach_to_graph(CUgraph graph, GraphResources* resources) {
  Resource res = Resource::of(ResourceKind::graph, graph, resources->device());
  CUuserObject object = nullptr;
  resources->retain();  // the user object's reference
  CUresult r = cu.UserObjectCreate(&object, resources, &user_object_destroyed, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC);
  if (r != CUDA_SUCCESS) {
    resources->release();
    check(r, "cuUserObjectCreate", res);
  }
  r = cu.GraphRetainUserObject(graph, object, 1, CU_GRAPH_USER_OBJECT_MOVE);
  if (r != CUDA_SUCCESS) {
    // Raise the retain's error first, then drop our reference (its destructor queues the
    // release): with a sticky code the error raised first poisons the device, and it
    // must be this one. Releasing first made the release's failure the poison, so the
    // retain threw ContextPoisoned carrying cuUserObjectRelease (the fault sweep found it).
    try {
      check(r, "cuGraphRetainUserObject", res);
    } catch (...) {
      CUresult d = cu.UserObjectRelease(object, 1);
      if (d != CUDA_SUCCESS) park_driver_error(d, "cuUserObjectRelease", res, "graph user object");
      throw;
    }
  }
}

void CUDA_CB run_graph_host_callback(void* data) noexcept {
  auto* callback = static_cast<HostCallback*>(data);
  try {
    callback->run();
  } catch (const std::exception& e) {
    park_error({CUDA_SUCCESS, "graph host node", std::string("a graph's host callback threw: ") + e.what()});
  } catch (...) {
    park_error({CUDA_SUCCESS, "graph host node", "a graph's host callback threw an exception that is not a std::exception"});
  }
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
    park_driver_error(r, "cuGraphDestroy", Resource::of(ResourceKind::graph, core->handle, core->device), "~Graph");
  delete core;
  run_deferred_tasks_if_any();
}

}  // namespace cudakit::detail

namespace cudakit {
void run_deferred_releases() noexcept { detail::run_deferred_tasks(); }
}  // namespace cudakit
