// Cross-stream ordering of allocations (DESIGN 5) and their stream-ordered frees.
#include <optional>
#include <string>

#include "cudakit/detail/allocation.hpp"
#include "cudakit/detail/capture_guard.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "detail/capture_state.hpp"
#include "detail/deferred.hpp"
#include "detail/device_state.hpp"
#include "detail/event_pool.hpp"
#include "detail/host_ranges.hpp"

namespace cudakit::detail {

using driver::cu;

thread_local int manual_ordering_depth = 0;
std::atomic<int> active_captures{0};
CaptureUseHook capture_use_hook = nullptr;

namespace {

bool alive(const StreamState* s) { return s != nullptr && s->alive.load(std::memory_order_acquire); }

// `to` waits for the work submitted to `from` so far: one pooled event, one wait. `to` is
// never capturing here: uses on capturing streams go to the capture (capture.cpp). When
// `from` is capturing now, its live tracking names only work from before its capture,
// which its capture fence stands for (Note [Tracking inside a capture]).
void order(StreamState* to, StreamState* from) {
  if (to == from || !alive(from)) return;  // a dead stream's work has completed (stream_state.hpp)
  wait_for_stream_work(to->handle, to->device, from);
}

}  // namespace

StreamState* stream_state_of(StreamRef stream) {
  stream.require_handle("buffer use");
  if (StreamState* s = stream.state()) return s;
  return borrowed_stream_state(stream.handle(), stream.device_ordinal());
}

Allocation* Allocation::create(CUdeviceptr pointer, std::size_t bytes, int device, AllocationKind kind,
                               StreamRef stream) {
  auto* a = new Allocation;
  a->pointer = pointer;
  a->bytes = bytes;
  a->device = device;
  a->kind = kind;
  if (stream) {
    StreamState* s = stream_state_of(stream);
    tracker_retain(s);
    a->owner_.store(s, std::memory_order_release);
  }
  return a;
}

Allocation::~Allocation() {
  if (StreamState* o = owner_.load(std::memory_order_relaxed)) tracker_release(o);
  if (last_writer_ != nullptr) tracker_release(last_writer_);
  for (StreamState* r : readers_) tracker_release(r);
}

bool Allocation::is_shared_across_streams() const {
  std::lock_guard lock(mutex_);
  return shared_;
}

void Allocation::use_slow(StreamRef stream, Access access) {
  StreamState* s = stream_state_of(stream);
  if (active_captures.load(std::memory_order_acquire) != 0) {
    if (void* capture = s->capture.load(std::memory_order_acquire); capture != nullptr) {
      // Work on a capturing stream runs only when the graph is launched: the graph
      // records the use (and keeps this allocation alive) and orders it at launch.
      if (capture_use_hook != nullptr) capture_use_hook(capture, this, stream, access);
      return;
    }
  }
  if (manual_ordering_depth != 0) return;

  if (access == Access::read && shared_) {
    // Repeated reads on a stream that already waited for the current write: no lock.
    for (const auto& slot : synced_readers_)
      if (slot.load(std::memory_order_acquire) == s) return;
  }

  std::lock_guard lock(mutex_);
  if (!shared_) {
    StreamState* owner = owner_.load(std::memory_order_relaxed);
    if (owner == nullptr) {  // first use of an allocation nobody owns yet
      tracker_retain(s);
      owner_.store(s, std::memory_order_release);
      return;
    }
    if (owner == s) return;
    // Hand-off from the single stream: the owner is the last writer (allocation and
    // upload count as writes; reads on the owner are ordered through it as well).
    shared_ = true;
    last_writer_ = owner;  // the owner's tracker reference moves here
    owner_.store(nullptr, std::memory_order_release);
  }

  if (access == Access::read) {
    if (last_writer_ == s) return;
    for (StreamState* r : readers_)
      if (r == s) return;
    if (last_writer_ != nullptr) order(s, last_writer_);
    tracker_retain(s);
    readers_.push_back(s);
    for (auto& slot : synced_readers_) {
      StreamState* expected = nullptr;
      if (slot.compare_exchange_strong(expected, s, std::memory_order_acq_rel)) break;
    }
    return;
  }

  // A write waits for the last writer and every reader, then owns the allocation alone.
  if (last_writer_ != nullptr) order(s, last_writer_);
  for (StreamState* r : readers_) order(s, r);
  for (auto& slot : synced_readers_) slot.store(nullptr, std::memory_order_release);
  for (StreamState* r : readers_) tracker_release(r);
  readers_.clear();
  if (last_writer_ != nullptr) tracker_release(last_writer_);
  last_writer_ = nullptr;
  shared_ = false;
  tracker_retain(s);
  owner_.store(s, std::memory_order_release);
}

void Allocation::synchronize_users() const {
  std::vector<StreamState*> users;
  {
    std::lock_guard lock(mutex_);
    if (StreamState* o = owner_.load(std::memory_order_relaxed)) users.push_back(o);
    if (last_writer_ != nullptr) users.push_back(last_writer_);
    users.insert(users.end(), readers_.begin(), readers_.end());
  }
  // A stream state stays valid while the tracker names it; the caller is the one thread
  // mutating this allocation (like a standard container), so no one drops it meanwhile.
  for (StreamState* u : users) {
    PinnedStream pinned(u);  // its owner may destroy it meanwhile
    if (!pinned) continue;
    // A capturing stream's live work is what came before its capture: its capture fence
    // (synchronizing the stream itself would be refused and invalidate the capture).
    if (u->capture.load(std::memory_order_acquire) != nullptr) {
      if (CUevent fence = u->capture_fence.load(std::memory_order_acquire))
        check(cu.EventSynchronize(fence), "cuEventSynchronize", Resource::of(ResourceKind::stream, u->handle, u->device));
      continue;
    }
    check(cu.StreamSynchronize(u->handle), "cuStreamSynchronize", Resource::of(ResourceKind::stream, u->handle, u->device));
  }
}

void Allocation::destroy() noexcept {
  // A free now could invalidate this thread's capture (cuMemFree is unsafe during one):
  // free at the next safe point instead (Note [Capture and unsafe calls]).
  if (unsafe_calls_would_invalidate_a_capture()) {
    defer_to_safe_point([this] { destroy(); });
    return;
  }
  const bool host = kind == AllocationKind::pinned_host || kind == AllocationKind::registered_host;
  Resource res = Resource::of(kind == AllocationKind::pinned_host       ? ResourceKind::pinned_buffer
                              : kind == AllocationKind::registered_host ? ResourceKind::host_registration
                                                                        : ResourceKind::buffer,
                              reinterpret_cast<const void*>(pointer), device);
  try {
    // Page-locked ranges leave the registry first, so no new copy treats them as pinned.
    if (host) unregister_host_range(reinterpret_cast<const void*>(pointer));
    // Choose a live stream to free on, ordered after every other stream that used the
    // allocation. Streams that died finished their work first (stream_state.hpp); a
    // stream that is capturing now is waited for through its capture fence.
    StreamState* on = nullptr;
    std::vector<StreamState*> users;
    {
      std::lock_guard lock(mutex_);
      if (StreamState* o = owner_.load(std::memory_order_relaxed)) users.push_back(o);
      if (last_writer_ != nullptr) users.push_back(last_writer_);
      users.insert(users.end(), readers_.begin(), readers_.end());
    }
    // The stream freed on is pinned until the free is submitted: it may belong to another
    // thread, which may destroy it at any moment (this free may run on any thread, e.g.
    // a graph's deferred release). Its owner then waits for the pin.
    std::optional<PinnedStream> on_pinned;
    for (StreamState* u : users)
      if (u->capture.load(std::memory_order_acquire) == nullptr) {
        PinnedStream p(u);
        if (!p) continue;
        on = u;
        on_pinned.emplace(std::move(p));
        break;
      }
    CUstream stream = on != nullptr ? on->handle : service_stream(device);
    bool waited = false;
    for (StreamState* u : users)
      if (u != on && alive(u)) {
        wait_for_stream_work(stream, device, u);
        waited = true;
      }
    if (kind == AllocationKind::pool) {
      check(cu.MemFreeAsync(pointer, stream), "cuMemFreeAsync", res);
    } else {
      // cuMemFree, cuMemFreeHost and cuMemHostUnregister are not stream-ordered: wait for
      // the streams that used the memory first (a copy may still read or write it).
      if (on != nullptr || waited) check(cu.StreamSynchronize(stream), "cuStreamSynchronize", res);
      ContextRef(library_context(device), device).make_current();
      switch (kind) {
        case AllocationKind::plain: check(cu.MemFree(pointer), "cuMemFree", res); break;
        case AllocationKind::pinned_host:
          check(cu.MemFreeHost(reinterpret_cast<void*>(pointer)), "cuMemFreeHost", res);
          break;
        case AllocationKind::registered_host:
          check(cu.MemHostUnregister(reinterpret_cast<void*>(pointer)), "cuMemHostUnregister", res);
          break;
        case AllocationKind::pool: break;
      }
    }
  } catch (const DriverError& e) {
    park_error({e.code(), host ? "host memory free" : "buffer free", e.what()});
  } catch (const std::exception& e) {
    park_error({CUDA_SUCCESS, host ? "host memory free" : "buffer free", e.what()});
  }
  delete this;
}

}  // namespace cudakit::detail
