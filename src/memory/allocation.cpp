// Cross-stream ordering of allocations (DESIGN 5) and their stream-ordered frees.
#include <algorithm>
#include <memory>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cudakit/detail/allocation.hpp"
#include "cudakit/detail/capture_counts.hpp"
#include "cudakit/detail/capture_guard.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "cudakit/memory_resource.hpp"
#include "driver/checked_call.hpp"
#include "stream/capture_state.hpp"
#include "stream/deferred.hpp"
#include "device/device_state.hpp"
#include "stream/event_pool.hpp"
#include "memory/host_ranges.hpp"
#include "memory/virtual_range.hpp"
#include "memory/pool_counters.hpp"
#include "stream/stream_state_of.hpp"

namespace cudakit::detail {

using driver::cu;

thread_local int manual_ordering_depth = 0;
CapturedBufferHook keep_buffer_for_capture = nullptr;

namespace {

bool alive(const StreamState* s) { return s != nullptr && s->marks.alive(); }

// `to` waits for the work submitted to `from` so far: one pooled event, one wait. `to` is
// never capturing here: uses on capturing streams go to the capture (use_in_capture). When
// `from` is capturing now, its live tracking names only work from before its capture,
// which its capture fence stands for (Note [Tracking inside a capture]).
void order(StreamState* to, StreamState* from) {
  if (to == from || !alive(from)) return;  // a dead stream's work has completed (stream_state.hpp)
  wait_for_stream_work(to->handle, to->device, from);
}

// Note [Tracking inside a capture]. Work on a capturing stream runs only when the graph
// is launched, perhaps never, perhaps a thousand times, perhaps on another stream. So a
// use inside a capture must not change the buffer's live tracking (its last writer stays
// the stream that really wrote it), and must not wait for anything recorded before the
// capture (the driver refuses that: STREAM_CAPTURE_ISOLATION). Instead the capture
//   - records the buffer in the graph's resources (kept alive; ordered at each launch,
//     graph_exec.cpp), through the hook the graph layer installs, and
//   - orders uses across the capture's own streams, like live tracking does across live
//     streams: an event recorded on one captured stream and waited on another, which the
//     driver turns into a graph edge. The capture's books (src/stream/capture_state.hpp)
//     keep, per buffer, the captured stream that wrote it last and those that read it since.
// A stream outside the capture that must wait for a capturing stream's earlier work waits
// on that stream's capture fence, recorded just before the stream entered the capture.

bool contains(const std::vector<StreamState*>& v, const StreamState* s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// The capture of `s` that a use of `allocation` goes to: this thread's, or none (the use
// is live). Only the thread that owns the capture may submit to its streams (DESIGN 9).
CaptureState* capture_of_use(StreamState* s, const Allocation* allocation) {
  return capture_owned_here(s, [&] {
    std::ostringstream what;
    what << "a use of buffer 0x" << std::hex << allocation->pointer;
    return what.str();
  });
}

// A use of `allocation` on stream `s`, which is in capture `c`, this thread's (Note
// [Tracking inside a capture]).
void use_in_capture(CaptureState* c, Allocation* allocation, StreamState* s, Access access) {
  keep_buffer_for_capture(c, allocation, access);
  if (manual_ordering_depth != 0) return;
  CaptureState::Order& o = c->order[allocation];
  if (access == Access::read) {
    if (o.writer == s || contains(o.readers, s)) return;
    if (o.writer != nullptr) order_after(s->handle, o.writer->handle, o.writer->device);
    o.readers.push_back(s);
    return;
  }
  if (o.writer != nullptr && o.writer != s) order_after(s->handle, o.writer->handle, o.writer->device);
  for (StreamState* r : o.readers)
    if (r != s) order_after(s->handle, r->handle, r->device);
  o.readers.clear();
  o.writer = s;
}

}  // namespace

// ---- the memory of Allocation objects ----
//
// Every DeviceBuffer makes one Allocation and drops it again, often on the same thread in
// a loop (allocate, use, free). A per-thread stack of freed blocks serves the next one
// without the general-purpose allocator; a block freed on another thread joins that
// thread's stack (the blocks are plain memory of one size). The stack is bounded, and it
// hands its blocks back when its thread ends; past that point (thread_local destructors
// run in an unspecified order), blocks go straight to the general-purpose allocator.
// Under AddressSanitizer the cache is off, so that a use after free is still caught.

#if defined(__SANITIZE_ADDRESS__)
#define CUDAKIT_ALLOCATION_BLOCK_CACHE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUDAKIT_ALLOCATION_BLOCK_CACHE 0
#endif
#endif
#ifndef CUDAKIT_ALLOCATION_BLOCK_CACHE
#define CUDAKIT_ALLOCATION_BLOCK_CACHE 1
#endif

namespace {
struct AllocationBlockCache {
  static constexpr int capacity = 32;
  void* blocks[capacity] = {};
  int count = 0;
  ~AllocationBlockCache();
};
thread_local constinit bool block_cache_gone = false;  // trivially destructible: valid until the thread ends
thread_local AllocationBlockCache block_cache;
AllocationBlockCache::~AllocationBlockCache() {
  block_cache_gone = true;
  while (count > 0) ::operator delete(blocks[--count], std::align_val_t{alignof(Allocation)});
}
}  // namespace

void* Allocation::operator new(std::size_t size) {
  if (CUDAKIT_ALLOCATION_BLOCK_CACHE && size == sizeof(Allocation) && !block_cache_gone) {
    AllocationBlockCache& c = block_cache;
    if (c.count > 0) return c.blocks[--c.count];
  }
  return ::operator new(size, std::align_val_t{alignof(Allocation)});
}

void Allocation::operator delete(void* p, std::size_t size) noexcept {
  if (p == nullptr) return;
  if (CUDAKIT_ALLOCATION_BLOCK_CACHE && size == sizeof(Allocation) && !block_cache_gone) {
    AllocationBlockCache& c = block_cache;
    if (c.count < AllocationBlockCache::capacity) {
      c.blocks[c.count++] = p;
      return;
    }
  }
  ::operator delete(p, std::align_val_t{alignof(Allocation)});
}

Ref<Allocation> Allocation::create(CUdeviceptr pointer, std::size_t bytes, int device, AllocationKind kind,
                                   StreamRef stream) {
  // Everything that can throw comes before the allocation holds the memory: when this
  // throws, the caller still owns the memory and frees it, once.
  StreamState* s = stream ? stream_state_of(stream) : nullptr;
  Ref<Allocation> a(new Allocation, adopt);
  a->bytes = bytes;
  a->device = device;
  a->kind = kind;
  if (s != nullptr) {
    tracker_retain(s);
    a->owner_.store(s, std::memory_order_release);
  }
  a->pointer = pointer;
  return a;
}

Ref<Allocation> Allocation::create_external(CUdeviceptr pointer, std::size_t bytes, int device,
                                            ExternalRelease* release, StreamRef stream) {
  std::unique_ptr<ExternalRelease> owned(release);
  Ref<Allocation> a = create(pointer, bytes, device, AllocationKind::external, stream);
  a->external_ = owned.release();
  return a;
}

Allocation::~Allocation() {
  delete external_;
  if (StreamState* o = owner_.load(std::memory_order_relaxed)) tracker_release(o);
}

bool Allocation::is_shared_across_streams() const {
  std::lock_guard lock(mutex_);
  return shared_.load(std::memory_order_relaxed);
}

void Allocation::use_slow(const StreamRef& stream, Access access) {
  StreamState* s = stream_state_of(stream);
  if (active_captures.load(std::memory_order_acquire) != 0) {
    if (CaptureState* capture = capture_of_use(s, this); capture != nullptr) {
      // Work on a capturing stream runs only when the graph is launched: the graph
      // records the use (and keeps this allocation alive) and orders it at launch.
      use_in_capture(capture, this, s, access);
      return;
    }
  }
  if (manual_ordering_depth != 0) return;

  if (access == Access::read && shared_.load(std::memory_order_relaxed)) {
    // Repeated reads on a stream that already waited for the current write: no lock.
    for (const auto& slot : synced_readers_)
      if (slot.load(std::memory_order_acquire) == s) return;
  }

  std::lock_guard lock(mutex_);
  if (!shared_.load(std::memory_order_relaxed)) {
    StreamState* owner = owner_.load(std::memory_order_relaxed);
    if (owner == nullptr) {  // first use of an allocation nobody owns yet
      tracker_retain(s);
      owner_.store(s, std::memory_order_release);
      return;
    }
    if (owner == s) return;
    // Hand-off from the single stream: the owner is the last writer (allocation and
    // upload count as writes; reads on the owner are ordered through it as well).
    shared_.store(true, std::memory_order_relaxed);
    last_writer_ = TrackerRef(owner, adopt);  // the owner's tracker slot moves here
    owner_.store(nullptr, std::memory_order_release);
  }

  if (access == Access::read) {
    if (last_writer_ == s) return;
    for (const TrackerRef& r : readers_)
      if (r == s) return;
    if (last_writer_) order(s, last_writer_.get());
    readers_.emplace_back(s);
    for (auto& slot : synced_readers_) {
      StreamState* expected = nullptr;
      if (slot.compare_exchange_strong(expected, s, std::memory_order_acq_rel)) break;
    }
    return;
  }

  // A write waits for the last writer and every reader, then owns the allocation alone.
  if (last_writer_) order(s, last_writer_.get());
  for (const TrackerRef& r : readers_) order(s, r.get());
  for (auto& slot : synced_readers_) slot.store(nullptr, std::memory_order_release);
  readers_.clear();
  last_writer_.reset();
  shared_.store(false, std::memory_order_relaxed);
  tracker_retain(s);
  owner_.store(s, std::memory_order_release);
}

void Allocation::synchronize_users() const {
  std::vector<StreamState*> users;
  {
    std::lock_guard lock(mutex_);
    if (StreamState* o = owner_.load(std::memory_order_relaxed)) users.push_back(o);
    if (last_writer_) users.push_back(last_writer_.get());
    for (const TrackerRef& r : readers_) users.push_back(r.get());
  }
  // A stream state stays valid while the tracker names it; the caller is the one thread
  // mutating this allocation (like a standard container), so no one drops it meanwhile.
  for (StreamState* u : users) {
    // Its owner may destroy it, or begin a capture on it, meanwhile: pinned, then looked
    // at (Note [Pins and marks]).
    PinnedStream pinned(u);
    if (!pinned) continue;
    // A capturing stream's live work is what came before its capture: its capture fence
    // (synchronizing the stream itself would be refused and invalidate the capture).
    if (pinned.capturing()) {
      if (CUevent fence = u->capture_fence.load(std::memory_order_acquire))
        checked_call(cu.EventSynchronize, Resource::of(ResourceKind::stream, u->handle, u->device), fence);
      continue;
    }
    if (CUresult r = cu.StreamSynchronize(u->handle); r != CUDA_SUCCESS) {
      Resource res = Resource::of(ResourceKind::stream, u->handle, u->device);
      res.last_launch = last_launch_of(u);  // a kernel's fault surfaces here
      check(r, cu.StreamSynchronize.name(), res);
    }
  }
}

// ---- destruction: choose the stream, order after every user, free by kind ----
//
// The last reference is gone when destroy() runs, so no other thread touches the tracking
// state: it is read without the mutex and without copying (a buffer's destruction is a hot
// path: pool allocate + free must stay within 1.1x the raw driver's).

namespace {

// The streams that used an allocation: its owner, or its last writer and readers.
struct Users {
  StreamState* owner;
  StreamState* last_writer;
  const std::vector<TrackerRef>& readers;

  bool only_the_owner() const noexcept { return owner != nullptr && last_writer == nullptr && readers.empty(); }
  template <class F>
  void each(F&& f) const {
    if (owner != nullptr) f(owner);
    if (last_writer != nullptr) f(last_writer);
    for (const TrackerRef& r : readers) f(r.get());
  }
};

Resource resource_of(AllocationKind kind, CUdeviceptr pointer, int device) {
  ResourceKind what = kind == AllocationKind::pinned_host       ? ResourceKind::pinned_buffer
                      : kind == AllocationKind::registered_host ? ResourceKind::host_registration
                                                                : ResourceKind::buffer;
  return Resource::of(what, reinterpret_cast<const void*>(pointer), device);
}

// The usual case, with nothing else to decide: pool memory that only its own stream used,
// which is alive and not capturing, is freed there (one pin and the free). False, having
// done nothing, in every other case.
bool free_on_the_only_stream(const Users& users, CUdeviceptr pointer, int device) noexcept {
  if (!users.only_the_owner()) return false;
  // Pinned first, then looked at (Note [Pins and marks]): another thread may own the
  // stream and destroy it meanwhile, or begin a capture on it (the free would land in that
  // graph); neither can happen while the pin is held and the stream was seen alive and
  // not capturing.
  PinnedStream pinned(users.owner);
  if (!pinned || pinned.capturing()) return false;
  CUresult r = cu.MemFreeAsync(pointer, users.owner->handle);
  if (PoolCounters* c = default_pool_counters(device)) c->freed();
  if (r != CUDA_SUCCESS) [[unlikely]]
    park_driver_error(r, cu.MemFreeAsync.name(), resource_of(AllocationKind::pool, pointer, device), "buffer free");
  return true;
}

// Where a free is submitted: a live user that is not capturing, pinned until the free is
// submitted (it may belong to another thread, which may destroy it or begin a capture on
// it at any moment, and this free may run on any thread, e.g. a graph's deferred release:
// Note [Pins and marks]);
// else the device's service stream, where a stream is needed; else no stream.
struct FreeStream {
  StreamState* user = nullptr;
  std::optional<PinnedStream> pin;
  CUstream handle = nullptr;
};

// Whether the release is stream-ordered: a pool or resource free, or an external release
// that says it is.
bool releases_stream_ordered(const Allocation& a) {
  if (a.kind == AllocationKind::external) return a.external_release()->stream_ordered();
  return is_stream_ordered(a.kind);
}

FreeStream choose_free_stream(const Users& users, bool ordered_release, int device) {
  FreeStream on;
  users.each([&](StreamState* u) {
    if (on.user != nullptr) return;
    PinnedStream p(u);
    if (!p || p.capturing()) return;  // dead, or its work now lands in a graph
    on.user = u;
    on.handle = u->handle;
    on.pin.emplace(std::move(p));
  });
  if (on.user != nullptr) return on;
  // The service stream only where a stream is needed: a pool free is stream-ordered, and
  // other streams' work is waited for on it. Memory no live stream used (a pinned buffer
  // never copied) is freed without one: creating it could fail and leave the memory
  // unfreed.
  bool need_stream = ordered_release;
  users.each([&](StreamState* u) { need_stream = need_stream || alive(u); });
  if (!need_stream) return on;
  try {
    on.handle = service_stream(device);
  } catch (const DriverError&) {
    // On a dead context the service stream cannot be made: nothing runs any more, so
    // release on no stream rather than not at all (free_by_kind).
    if (poison_of(device) == nullptr) throw;
  }
  return on;
}

// cuCtxSynchronize on the device's library context: true when it succeeded.
bool context_finished_its_work(int device) noexcept {
  try {
    ContextRef(library_context(device), device).make_current();
    return cu.CtxSynchronize() == CUDA_SUCCESS;
  } catch (...) {
    return false;
  }
}

// Orders the free after the work of every stream that used the memory: true when the
// memory may be released now. Streams that died finished their work first
// (stream_state.hpp); a stream that is capturing now is waited for through its capture
// fence. When a wait fails, the failure is parked; then on a dead context (a sticky
// error, DESIGN 7) nothing runs any more and the memory is released all the same
// ("release what they can"), while on a live one work may still use it, so it is kept
// unless the whole context finished its work: a leak rather than a use after free.
bool order_after_every_user(const Users& users, const FreeStream& on, bool ordered_release, int device,
                            const Resource& res, const char* origin) {
  try {
    bool waited = false;
    users.each([&](StreamState* u) {
      if (u == on.user || !alive(u)) return;
      wait_for_stream_work(on.handle, device, u);
      waited = true;
    });
    // cuMemFree, cuMemFreeHost and cuMemHostUnregister are not stream-ordered: wait for
    // the streams that used the memory first (a copy may still read or write it).
    if (!ordered_release && (on.user != nullptr || waited))
      check(cu.StreamSynchronize(on.handle), cu.StreamSynchronize.name(), res);
    return true;
  } catch (const DriverError& e) {
    park_error({e.code(), origin, e.what()});
    if (poison_of(device) != nullptr || context_finished_its_work(device)) return true;
    park_error({e.code(), origin,
                "the memory at " + describe(res) + " is kept (a leak): the work that used it could not be "
                "waited for, and freeing it now could pull it from under that work"});
    return false;
  }
}

// The release itself, as the memory was obtained. A pool free is stream-ordered on
// `stream`, null only on a dead context (no service stream could be made): then it is
// released with cuMemFree, which needs no stream (never stream handle 0: DESIGN 1); the
// driver refuses it with the sticky error, and that error is what is reported.
// A resource's memory goes back to the resource, stream-ordered likewise; external memory
// to its owner, on `stream` when its release is stream-ordered.
void free_by_kind(const Allocation& a, CUstream stream, const Resource& res) {
  const AllocationKind kind = a.kind;
  const CUdeviceptr pointer = a.pointer;
  const int device = a.device;
  if (kind == AllocationKind::resource) {
    a.resource->deallocate_async(reinterpret_cast<void*>(pointer), a.bytes, default_alignment, StreamRef(stream, device));
    return;
  }
  if (kind == AllocationKind::external) {
    ExternalRelease* external = a.external_release();
    external->release(external->stream_ordered() ? stream : nullptr);
    return;
  }
  if (kind == AllocationKind::pool) {
    if (PoolCounters* c = default_pool_counters(device)) c->freed();  // gone from the books, freed or not
    if (stream == nullptr) {
      check(cu.MemFree(pointer), cu.MemFree.name(), res);
      return;
    }
    check(cu.MemFreeAsync(pointer, stream), cu.MemFreeAsync.name(), res);
    return;
  }
  try {
    ContextRef(library_context(device), device).make_current();
  } catch (const DriverError&) {
    if (poison_of(device) == nullptr) throw;  // on a dead context, try the release anyway
  }
  void* host = reinterpret_cast<void*>(pointer);
  switch (kind) {
    case AllocationKind::plain:
    case AllocationKind::managed: check(cu.MemFree(pointer), cu.MemFree.name(), res); break;
    case AllocationKind::pinned_host: check(cu.MemFreeHost(host), cu.MemFreeHost.name(), res); break;
    case AllocationKind::registered_host: check(cu.MemHostUnregister(host), cu.MemHostUnregister.name(), res); break;
    case AllocationKind::pool:
    case AllocationKind::virtual_range:  // release_virtual_range
    case AllocationKind::resource:
    case AllocationKind::external: break;
  }
}

}  // namespace

void Allocation::destroy() noexcept {
  // A free now could invalidate this thread's capture (cuMemFree is unsafe during one):
  // free at the next safe point instead (Note [Capture and unsafe calls]).
  if (unsafe_calls_would_invalidate_a_capture()) {
    defer_to_safe_point([this] { destroy(); });
    return;
  }
  const Users users{owner_.load(std::memory_order_relaxed), last_writer_.get(), readers_};
  if (kind == AllocationKind::pool && free_on_the_only_stream(users, pointer, device)) {
    delete this;
    return;
  }
  const bool host = kind == AllocationKind::pinned_host || kind == AllocationKind::registered_host;
  const char* origin = host ? "host memory free" : "buffer free";
  const Resource res = resource_of(kind, pointer, device);
  try {
    // Page-locked ranges leave the registry first, so no new copy treats them as pinned.
    if (host) unregister_host_range(reinterpret_cast<const void*>(pointer));
    const bool ordered = releases_stream_ordered(*this);
    FreeStream on = choose_free_stream(users, ordered, device);
    if (order_after_every_user(users, on, ordered, device, res, origin)) {
      if (kind == AllocationKind::virtual_range) release_virtual_range(virtual_range, device);
      else free_by_kind(*this, on.handle, res);
    }
  } catch (const DriverError& e) {
    park_error({e.code(), origin, e.what()});
  } catch (const std::exception& e) {
    park_error({CUDA_SUCCESS, origin, e.what()});
  }
  delete this;
}

}  // namespace cudakit::detail
