// Internal: the pinned staging buffers behind copies from and to pageable host memory.
//
// Why: the driver may read a pageable source after cuMemcpyHtoDAsync returns, or block
// for it, and it says neither which nor when. cudakit wants both of these instead: a
// pageable range may be reused as soon as the copy call returns, and the copy still
// overlaps with other work. So a pageable upload is cut into chunks; each is copied
// (memcpy, on the calling thread) into a page-locked staging buffer, which an
// asynchronous cuMemcpyHtoDAsync then reads. The user's range is fully read when the
// call returns. A pageable download copies into staging buffers asynchronously, then
// either waits for each (download(): blocking anyway) or leaves a host callback on the
// stream that copies the chunk out (the asynchronous copy()).
//
// The rule that keeps it correct: every use of a staging buffer on a stream ends with
// its event recorded on that stream, and a buffer is handed out again only once that
// event completed (cuEventQuery or cuEventSynchronize). A buffer is never written by the
// host while a copy may still read it, nor read while a copy may still write it.
//
// Per device (events belong to one context): up to `max_chunks` buffers of
// `chunk_bytes`, created on demand, kept for the life of the process (or until
// release_idle_staging). A buffer belongs to exactly one holder at a time: a lease
// (a copy using it), the thread that used it last, or the device's shared list.
//   - The thread that used it last keeps it: the next pageable copy on that thread takes
//     it back with one atomic exchange, no lock and no other thread involved. A thread
//     serving requests in a loop reuses one buffer, warm in its caches.
//   - Otherwise the shared list (a mutex): an idle buffer first, then the oldest one in
//     flight if its copy completed, then a new buffer while the pool may grow, then
//     buffers that idle threads keep, and only then a wait for the oldest one in flight.
//     No driver call waits while the mutex is held.
// While every buffer is in use, a copy waits for one; so a pageable copy larger than the
// pool, on a stream that cannot progress until the calling thread does something else,
// blocks: use a PinnedBuffer there.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <utility>

#include "cudakit/stream.hpp"

namespace cudakit::detail {

struct StagingChunk;

/// The default staging buffer size and count per device.
inline constexpr std::size_t default_staging_chunk_bytes = std::size_t(1) << 20;
inline constexpr int default_staging_max_chunks = 16;

/// One staging buffer, held by one thread until it goes back to the pool (destructor).
class StagingLease {
 public:
  StagingLease() = default;
  StagingLease(int device, StagingChunk* chunk) noexcept : device_(device), chunk_(chunk) {}
  StagingLease(StagingLease&& other) noexcept
      : device_(other.device_), chunk_(std::exchange(other.chunk_, nullptr)), stream_(other.stream_),
        recorded_(other.recorded_) {}
  StagingLease& operator=(StagingLease&& other) noexcept {
    if (this != &other) {
      give_back();
      device_ = other.device_;
      chunk_ = std::exchange(other.chunk_, nullptr);
      stream_ = other.stream_;
      recorded_ = other.recorded_;
    }
    return *this;
  }
  StagingLease(const StagingLease&) = delete;
  StagingLease& operator=(const StagingLease&) = delete;
  ~StagingLease() { give_back(); }

  explicit operator bool() const noexcept { return chunk_ != nullptr; }
  void* host() const noexcept;
  std::size_t capacity() const noexcept;

  /// Work that uses the buffer was submitted to `stream` (call right after submitting).
  void submitted(CUstream stream) noexcept { stream_ = stream; }
  /// Records the buffer's event on that stream, after all of the work that uses it.
  void record();
  /// Blocks until the recorded work on `stream` completed; the host may then use the
  /// buffer. A failure names `stream` and its last launch: a kernel's fault surfaces here.
  void wait(StreamRef stream);

 private:
  void give_back() noexcept;
  int device_ = -1;
  StagingChunk* chunk_ = nullptr;
  CUstream stream_ = nullptr;
  bool recorded_ = false;
};

/// A staging buffer of the pool of `stream`'s device, for a copy on `stream`. With
/// `may_block` false, returns an empty lease instead of waiting for another thread to
/// give a buffer back.
StagingLease acquire_staging(StreamRef stream, bool may_block);

/// The size of each staging buffer now.
std::size_t staging_chunk_bytes() noexcept;

/// Unit tests: smaller buffers and fewer of them, to reach every path with small copies.
/// Call while no copy runs; reset_staging_for_testing() restores the defaults.
void set_staging_limits_for_testing(std::size_t chunk_bytes, int max_chunks);
/// Unit tests: how many staging buffers device `device`'s pool has made.
int staging_chunk_count(int device);

/// Unit tests: told of every host-side access cudakit makes to staging memory, so the
/// fake driver's ordering model sees them (`stream` is the stream whose host callback
/// makes the access, null for the calling thread). Null in production.
using HostAccessHook = void (*)(CUstream stream, const void* begin, std::size_t bytes, bool write, const char* what);
extern HostAccessHook host_access_hook;
inline void note_host_access(CUstream stream, const void* begin, std::size_t bytes, bool write, const char* what) {
  if (host_access_hook != nullptr) [[unlikely]]
    host_access_hook(stream, begin, bytes, write, what);
}

}  // namespace cudakit::detail
