// The queue of work that waits for a safe point (deferred.hpp): filled from any thread,
// driver threads included, and drained by cudakit threads where unsafe calls cannot
// invalidate a capture.
#include "stream/deferred.hpp"

#include <exception>
#include <mutex>
#include <utility>
#include <vector>

#include "cudakit/detail/capture_counts.hpp"
#include "cudakit/error.hpp"

namespace cudakit::detail {

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
// A task may free something whose release drains the queue again: the outer drain runs
// what that one would have.
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

}  // namespace cudakit::detail
