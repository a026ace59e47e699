// Internal: one allocation, shared by its owner (DeviceBuffer, PinnedBuffer or
// HostRegistration), every view of it (views share their buffer's tracking) and every
// graph that touches it (DESIGN 4, 6). Reference counted; freed stream-ordered when the
// last holder lets go.
//
// Page-locked host memory is tracked like device memory: an asynchronous copy reads or
// writes it on a stream, so a copy into it on one stream and a copy out of it on another
// must be ordered, and it must not be freed (or unregistered) while a copy still uses it.
// For those kinds `pointer` holds the host address.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "cudakit/detail/capture_counts.hpp"
#include "cudakit/export.hpp"
#include "cudakit/detail/ref.hpp"
#include "cudakit/detail/stream_state.hpp"
#include "cudakit/stream.hpp"
#include "cudakit/tracking.hpp"

namespace cudakit::detail {

/// How the memory was obtained, and so how it is freed.
enum class AllocationKind : std::uint8_t {
  pool,   // cuMemAllocAsync / cuMemAllocFromPoolAsync, freed with cuMemFreeAsync
  plain,  // cuMemAlloc, freed with cuMemFree (after the streams that used it finish)
  pinned_host,      // cuMemHostAlloc, freed with cuMemFreeHost (after the streams that used it finish)
  registered_host,  // cuMemHostRegister of user memory, undone with cuMemHostUnregister (likewise)
  virtual_range,    // an address reservation and the chunks mapped in it (GrowableBuffer): unmapped,
                    // released and given back after the streams that used it finish
  managed,          // cuMemAllocManaged, freed with cuMemFree (after the streams that used it finish)
  resource,         // a memory resource's allocate_async, freed with its deallocate_async (memory_resource.hpp)
  external,         // memory another owner releases (ExternalRelease): shared between processes
};

/// How an allocation of kind `external` is given back: memory of a shareable pool, or
/// memory imported from another process (shareable_pool.hpp, imported_buffer.hpp). Owned by its allocation, and
/// called once, after every stream that used the memory.
struct CUDAKIT_API ExternalRelease {
  virtual ~ExternalRelease() = default;
  /// Whether release() is stream-ordered (it is then called on a stream ordered after
  /// every user; otherwise after those streams finished their work).
  virtual bool stream_ordered() const noexcept = 0;
  /// Gives the memory back; `stream` is null when the release is not stream-ordered.
  /// Throws DriverError when the driver fails (the allocation parks it).
  virtual void release(CUstream stream) = 0;
};

/// Whether memory of this kind is freed stream-ordered (else after its users finish). An
/// `external` allocation's release says it itself (ExternalRelease::stream_ordered).
constexpr bool is_stream_ordered(AllocationKind kind) noexcept {
  return kind == AllocationKind::pool || kind == AllocationKind::resource;
}

struct ResourceModel;  // memory_resource.hpp

struct Allocation;
/// The reservation and physical chunks behind a virtual_range allocation
/// (src/memory/virtual_range.hpp); the allocation owns it.
struct VirtualRange;

/// Keeps `allocation` alive for as long as the graph of `capture` may run, and remembers
/// how the capture used it (the graph's launches are tracked by it). Called for every
/// tracked use on a capturing stream (Note [Tracking inside a capture] in allocation.cpp);
/// installed by the layer that makes graphs, which owns what a graph keeps and is the only
/// one that begins captures.
using CapturedBufferHook = void (*)(CaptureState* capture, Allocation* allocation, Access access);
CUDAKIT_API extern CapturedBufferHook keep_buffer_for_capture;

// Aligned to a cache line, with what every launch and use reads (pointer, device, owner,
// count) first: a launch of eight tracked buffers touches one line per buffer.
struct CUDAKIT_API Allocation {
  alignas(64) CUdeviceptr pointer = 0;  // the struct starts a cache line
  std::size_t bytes = 0;
  int device = -1;
  AllocationKind kind = AllocationKind::pool;

 private:
  std::atomic<std::int32_t> refs_{1};
  // Single-stream mode: the one stream that used the allocation (and wrote it last). It
  // holds a tracker slot (tracker_retain), released by hand: an atomic, read without the
  // lock by use()'s fast path, cannot be a TrackerRef.
  std::atomic<StreamState*> owner_{nullptr};

 public:
  VirtualRange* virtual_range = nullptr;  // kind virtual_range only
  /// The resource the memory came from (AllocationKind::resource), kept alive until the
  /// memory went back to it (DESIGN 4).
  std::shared_ptr<ResourceModel> resource;

  /// Orders a use on `stream` after the uses it conflicts with (DESIGN 5). Call before
  /// submitting the work. The fast path is for the single-stream case. The stream is
  /// taken by reference: a StreamRef is 24 bytes, and a copy per call (for use_slow) would
  /// be written and read back through memory on the fast path too.
  void use(const StreamRef& stream, Access access) {
    if (use_needs_nothing(stream)) [[likely]]
      return;
    use_slow(stream, access);
  }

  /// Whether a use on `stream` needs nothing (use()'s fast path): the allocation is used
  /// on that cudakit stream alone, and no capture is in progress. Without a branch per
  /// test (every load is valid whatever the others find), so a caller can fold it into one.
  bool use_needs_nothing(const StreamRef& stream) const noexcept {
    StreamState* s = stream.state();
    return (s != nullptr) & (owner_.load(std::memory_order_acquire) == s) &
           (active_captures.load(std::memory_order_relaxed) == 0);
  }

  /// Creates an allocation already owned by `stream` (its allocating stream); the Ref
  /// holds its first reference.
  static Ref<Allocation> create(CUdeviceptr pointer, std::size_t bytes, int device, AllocationKind kind,
                                StreamRef stream);
  /// Creates an allocation of kind `external`, released by `release` (which it owns from
  /// now on, even when this throws).
  static Ref<Allocation> create_external(CUdeviceptr pointer, std::size_t bytes, int device, ExternalRelease* release,
                                         StreamRef stream);
  /// The release of an `external` allocation (null for the other kinds).
  ExternalRelease* external_release() const noexcept { return external_; }

  /// Whether its owner is its only holder: no view keeps it (views hold none), no graph,
  /// capture or pending release. Only the owner's thread may ask, and the answer holds
  /// while that thread does not hand out a reference (only a holder can make another).
  bool held_by_owner_alone() const noexcept { return refs_.load(std::memory_order_acquire) == 1; }

  /// For tests and diagnostics: whether the allocation is tracked across streams now.
  bool is_shared_across_streams() const;

  /// Blocks the calling thread until the work submitted so far to every stream that used
  /// the allocation has completed (host access to page-locked memory after async copies).
  void synchronize_users() const;

 private:
  friend void retain(Allocation* a) noexcept;
  friend void release(Allocation* a) noexcept;
  Allocation() = default;
  ~Allocation();
  // Allocation objects are made and dropped with every buffer: a small per-thread cache
  // of their memory keeps the general-purpose allocator off that path (tracking.cpp).
  static void* operator new(std::size_t size);
  static void operator delete(void* p, std::size_t size) noexcept;
  void use_slow(const StreamRef& stream, Access access);
  void destroy() noexcept;

  ExternalRelease* external_ = nullptr;  // owned; kind `external` only

  // Tracked mode (owner_ is null): guarded by mutex_.
  mutable std::mutex mutex_;
  // Whether the allocation is tracked across streams: written under mutex_, and read
  // without it on the repeated-read path, where it only says whether the synced slots
  // are worth a scan (their acquire loads carry the ordering).
  std::atomic<bool> shared_{false};
  TrackerRef last_writer_;
  std::vector<TrackerRef> readers_;  // streams that read since the last write, each ordered after it
  // Lock-free copy of readers_ for the repeated-read fast path.
  static constexpr int synced_slots = 16;
  std::atomic<StreamState*> synced_readers_[synced_slots] = {};
};

/// One more reference to `a` (its owner, a view, a graph: Ref<Allocation>).
inline void retain(Allocation* a) noexcept { a->refs_.fetch_add(1, std::memory_order_relaxed); }
/// One less; the last frees the memory, stream-ordered after every use.
inline void release(Allocation* a) noexcept {
  // The only reference (the usual case: a buffer nobody shared) needs no atomic
  // decrement: no other thread holds one through which it could retain.
  if (a->refs_.load(std::memory_order_acquire) == 1 || a->refs_.fetch_sub(1, std::memory_order_acq_rel) == 1)
    a->destroy();
}

}  // namespace cudakit::detail
