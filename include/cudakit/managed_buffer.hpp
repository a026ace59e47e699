// ManagedBuffer<T>: managed (unified) memory, which the host and every device address with
// one pointer and the driver migrates between them on demand (cuMemAllocManaged).
//
//   cudakit::ManagedBuffer<float> table(stream, n, cudakit::uninitialized);
//   table.prefetch_to_host(stream);                          // migrate before the host writes it
//   stream.synchronize();
//   std::ranges::copy(values, table.host().begin());         // the host writes it in place
//   table.advise(cudakit::ManagedAdvice::read_mostly);       // read-duplicated on every device
//   table.prefetch_to(stream, device);                       // migrate before the kernels run
//   launch(stream, kernel, cfg, table);                      // tracked like a DeviceBuffer
//
// Use it where the host and the device both touch the data and the access pattern is
// sparse or not known in advance, or for data larger than one device can hold (with
// oversubscription, see below). For data that a device works on, a DeviceBuffer with
// explicit copies is faster: a page fault on the device costs microseconds, and prefetches
// only avoid them when they come early enough.
//
// Ordering and lifetime are those of a DeviceBuffer (DESIGN 5, 6): copies, fills, launches
// and declared work order it across streams, a graph that captured it keeps it alive, and
// it is freed (cuMemFree) after every stream that used it finished. A prefetch is a use on
// its stream (a read: it moves the data, it does not change it). The host is not a stream:
// before the host touches host(), the work that uses the buffer must have finished
// (wait_for_users(), or synchronize the streams).
//
// Oversubscription: by default, a buffer larger than the device's free memory (cuMemGetInfo)
// is refused with OutOfMemory. The driver would accept it and page memory in and out
// under every kernel, and on a shared GPU that stalls other processes' work as well.
// ManagedOptions{.oversubscribe = true} allows it, for a program that means to.
//
// Thread safety: as a DeviceBuffer (device_buffer.hpp).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "cudakit/buffer_views.hpp"
#include "cudakit/export.hpp"
#include "cudakit/detail/allocation.hpp"
#include "cudakit/device.hpp"
#include "cudakit/device_span.hpp"
#include "cudakit/error.hpp"
#include "cudakit/memory_init.hpp"
#include "cudakit/stream.hpp"

namespace cudakit {

/// How a managed buffer is made.
struct ManagedOptions {
  /// Allow a buffer larger than the device's free memory (see above).
  bool oversubscribe = false;
};

/// The hints cuMemAdvise gives the driver about a managed range.
enum class ManagedAdvice {
  read_mostly,            ///< mostly read: each reader gets its own copy of the pages
  not_read_mostly,        ///< undoes read_mostly
  preferred_location,     ///< keep the pages at the given place when possible
  no_preferred_location,  ///< undoes preferred_location
  accessed_by,            ///< keep the pages mapped for the given device (no faults from it)
  not_accessed_by,        ///< undoes accessed_by
};

namespace detail {
/// Allocates `bytes` of managed memory for `stream`'s device (refusing more than its free
/// memory unless `options` allow), zero-filled on `stream` when asked.
CUDAKIT_API Ref<Allocation> allocate_managed_memory(StreamRef stream, std::size_t bytes, bool zero, ManagedOptions options);
/// cuMemPrefetchAsync of [pointer, pointer + bytes) to device `device` (-1: the host) on
/// `stream`, ordered as a read of `allocation`.
CUDAKIT_API void prefetch_managed(Allocation* allocation, CUdeviceptr pointer, std::size_t bytes, StreamRef stream,
                                  int device);
/// cuMemAdvise of the range for device `device` (-1: the host).
CUDAKIT_API void advise_managed(const Allocation* allocation, CUdeviceptr pointer, std::size_t bytes,
                                ManagedAdvice advice, int device);
[[noreturn]] CUDAKIT_API void throw_moved_from_managed_buffer();
}  // namespace detail

/// Owns `size()` elements of T in managed memory (see above). Move-only.
template <class T>
class ManagedBuffer : public BufferViews<T, &detail::throw_moved_from_managed_buffer> {
  static_assert(std::is_trivially_copyable_v<T> && !std::is_const_v<T>,
                "ManagedBuffer holds non-const trivially copyable types");
  using Views = BufferViews<T, &detail::throw_moved_from_managed_buffer>;
  using Views::allocation_;
  using Views::count_;
  using Views::usable_allocation;

 public:
  /// An empty buffer.
  ManagedBuffer() = default;
  /// `count` elements for `stream`'s device, left as the driver gives them (or zero-filled
  /// on `stream`). OutOfMemory when the device cannot back them, or when they are more
  /// than its free memory and `options` do not allow oversubscription; InvalidArgument
  /// when the bytes overflow; FeatureUnavailable when the device has no managed memory.
  ManagedBuffer(StreamRef stream, std::size_t count, Uninitialized, ManagedOptions options = {})
      : Views(detail::allocate_managed_memory(stream, Views::bytes_for("ManagedBuffer", count), false, options), count) {}
  /// The same, zero-filled on `stream`.
  ManagedBuffer(StreamRef stream, std::size_t count, Zeroed, ManagedOptions options = {})
      : Views(detail::allocate_managed_memory(stream, Views::bytes_for("ManagedBuffer", count), true, options), count) {}

  /// Takes `other`'s memory; `other` is then moved-from: its uses throw EmptyHandle.
  ManagedBuffer(ManagedBuffer&& other) noexcept = default;
  /// Frees this buffer's memory (as reset()) and takes `other`'s.
  ManagedBuffer& operator=(ManagedBuffer&& other) noexcept = default;

  /// Whether the buffer holds memory. Its address (device_pointer(), data()) is the one
  /// every device and the host use.
  explicit operator bool() const noexcept { return allocation_ || count_ != 0; }

  /// The elements as host memory. Touch them only once the streams that used the buffer
  /// finished (wait_for_users()); the pages migrate to the host on first touch.
  std::span<T> host() { return {this->data(), count_}; }
  std::span<const T> host() const { return {this->data(), count_}; }
  /// Blocks until every stream that used the buffer finished the work submitted so far.
  void wait_for_users() const {
    if (usable_allocation()) allocation_->synchronize_users();
  }

  /// Migrates the elements to `device` (or the host) on `stream`, ordered after the last
  /// write to the buffer; later work on `stream` finds them there.
  void prefetch_to(StreamRef stream, const Device& device) { prefetch(stream, device.ordinal()); }
  void prefetch_to_host(StreamRef stream) { prefetch(stream, -1); }
  /// Tells the driver how the elements are used, for `device` (the buffer's own where the
  /// advice names none) or the host. Not stream-ordered: it takes effect at once.
  void advise(ManagedAdvice advice) { detail::advise_managed(usable_allocation(), this->device_pointer(), this->size_bytes(), advice, this->device_ordinal()); }
  void advise(ManagedAdvice advice, const Device& device) {
    detail::advise_managed(usable_allocation(), this->device_pointer(), this->size_bytes(), advice, device.ordinal());
  }
  /// The same advice for the host.
  void advise_host(ManagedAdvice advice) { detail::advise_managed(usable_allocation(), this->device_pointer(), this->size_bytes(), advice, -1); }

  /// Frees the memory (after every stream that used it) and leaves the buffer empty.
  void reset() noexcept { this->release(); }

 private:
  void prefetch(StreamRef stream, int device) {
    detail::prefetch_managed(usable_allocation(), this->device_pointer(), this->size_bytes(), stream, device);
  }
};

}  // namespace cudakit
