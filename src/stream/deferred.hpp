// Internal: work that must wait for a safe point (Note [Capture and unsafe calls] in
// capture_guard.hpp).
//
// Two kinds of work land here:
//   - releases handed over by the driver: the host function that follows an executable's
//     last launch runs on a driver thread, where no CUDA call may be made, so it only
//     queues the release (Note [Graph lifetimes] in graph_resources.cpp);
//   - a graph's resources when its last owner goes (the thread may be capturing);
//   - frees that would be unsafe now: a buffer released on a thread that captures in a
//     mode that forbids cuMemFree (and so every free, to keep one rule).
// The queue is drained at safe points: capture end, graph launch, graph and executable
// destruction, buffer allocation, and cudakit::run_deferred_releases().
#pragma once

#include <atomic>
#include <functional>

namespace cudakit::detail {

extern std::atomic<bool> deferred_tasks_pending;

/// Queues `task` for the next safe point. Safe on driver threads (takes a mutex, makes no
/// CUDA call). Never throws: a task that cannot be queued is parked as an error (and
/// what it would release leaks).
void defer_to_safe_point(std::function<void()> task) noexcept;

/// Runs the queued tasks, unless this thread may not make unsafe calls now.
void run_deferred_tasks() noexcept;

/// The cheap form for hot paths: one relaxed load when nothing is queued.
inline void run_deferred_tasks_if_any() noexcept {
  if (deferred_tasks_pending.load(std::memory_order_relaxed)) [[unlikely]]
    run_deferred_tasks();
}

}  // namespace cudakit::detail
