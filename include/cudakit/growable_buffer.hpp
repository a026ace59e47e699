// GrowableBuffer<T>: device memory that grows and shrinks in place. Its address never
// changes, so pointers into it, views of it and graphs that captured it stay valid.
//
//   cudakit::GrowableBuffer<float> cache(device, 1 << 30);   // room for 2^30 floats, none mapped
//   cache.resize(4096);                                      // maps physical memory for them
//   launch(stream, kernel, cfg, cache);                      // tracked like a DeviceBuffer
//   cache.resize(1 << 20);                                   // grows: the same address
//   cache.resize(16);                                        // shrinks: memory goes back
//
// It is built on the driver's virtual memory management: the constructor reserves an
// address range for the most elements the buffer will ever hold (cuMemAddressReserve;
// addresses cost nothing until memory is mapped), and growing maps physical memory at its
// end (cuMemCreate, cuMemMap, cuMemSetAccess), in multiples of the device's allocation
// granularity (granularity(), 2 MiB on current GPUs). Shrinking unmaps whole chunks past
// the new size and gives them back (cuMemUnmap, cuMemRelease); what remains mapped is
// capacity(). Growing never copies, unlike allocating a bigger buffer and copying into it.
//
// Use it for memory whose final size is unknown and whose address must not change: a KV
// cache that grows with the sequence, an arena, a buffer that graphs captured. A buffer
// of known size is a DeviceBuffer (a pool allocation is cheaper to make).
//
// Ordering and lifetime are those of a DeviceBuffer (DESIGN 5, 6): copies, fills, launches
// and declared work order it across streams, and a graph that captured it keeps it alive.
// A shrink waits (blocking the host) for every stream that used the buffer before it
// unmaps anything. While a graph, or a capture in progress, holds the buffer, a shrink
// keeps the chunks past the new size mapped (the graph may still touch them); they are
// given back when the graph lets go: at the next resize, shrink_to_fit, or when the
// buffer goes. Growing again first reuses them.
//
// Views (span(), subspan()) cover the size when they were made; like std::vector's
// iterators, a view past the new size after a shrink must not be used.
//
// Errors: growth the device cannot back throws OutOfMemory (bytes asked, free, total) and
// leaves the buffer as it was. resize() beyond max_size() throws InvalidArgument. A device
// without virtual memory management throws FeatureUnavailable from the constructor.
//
// Peers: a kernel on another device may use the buffer once enable_peer_access(peer, this
// buffer's device) succeeded; chunks mapped after that give the peer access by
// themselves, allow_access_from() gives it to those mapped before.
//
// Thread safety: one thread at a time mutates a buffer (resize, reserve, shrink_to_fit,
// allow_access_from), like a standard container; work on streams uses it like a
// DeviceBuffer.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

#include "cudakit/buffer_views.hpp"
#include "cudakit/export.hpp"
#include "cudakit/detail/allocation.hpp"
#include "cudakit/device.hpp"
#include "cudakit/device_span.hpp"
#include "cudakit/error.hpp"

namespace cudakit {

namespace detail {
/// Reserves addresses for `max_bytes` on `device` (rounded up to the granularity).
CUDAKIT_API Ref<Allocation> reserve_virtual_range(int device, std::size_t max_bytes);
/// Bytes mapped now, bytes reserved, and the granularity of the range.
CUDAKIT_API std::size_t virtual_range_mapped(const Allocation* range) noexcept;
CUDAKIT_API std::size_t virtual_range_reserved(const Allocation* range) noexcept;
CUDAKIT_API std::size_t virtual_range_granularity(const Allocation* range) noexcept;
/// Maps memory until at least `bytes` are mapped; on failure nothing changed.
CUDAKIT_API void map_virtual_range(Allocation* range, std::size_t bytes);
/// Unmaps the chunks wholly past `bytes` (retires them while others hold the range).
CUDAKIT_API void unmap_virtual_range(Allocation* range, std::size_t bytes);
/// Gives device `peer` access to every chunk mapped now and later.
CUDAKIT_API void allow_virtual_range_access(Allocation* range, int peer);
/// EmptyHandle for the use of a moved-from GrowableBuffer; InvalidArgument for a size
/// past the reservation.
[[noreturn]] CUDAKIT_API void throw_moved_from_growable_buffer();
[[noreturn]] CUDAKIT_API void throw_beyond_reservation(const char* operation, std::size_t count, std::size_t max_count,
                                                       std::size_t element_bytes);
}  // namespace detail

/// Device memory that grows and shrinks without moving (see above). Move-only.
template <class T>
class GrowableBuffer : public BufferViews<T, &detail::throw_moved_from_growable_buffer> {
  static_assert(std::is_trivially_copyable_v<T> && !std::is_const_v<T>,
                "GrowableBuffer holds non-const trivially copyable types");
  using Views = BufferViews<T, &detail::throw_moved_from_growable_buffer>;
  using Views::allocation_;
  using Views::count_;

 public:
  /// An empty buffer with no reservation (max_size() 0).
  GrowableBuffer() = default;
  /// Reserves addresses for `max_count` elements on `device`; none mapped, size 0.
  /// InvalidArgument for 0 elements or a size that overflows; FeatureUnavailable when the
  /// device lacks virtual memory management; OutOfMemory when no address range is left.
  GrowableBuffer(const Device& device, std::size_t max_count)
      : Views(detail::reserve_virtual_range(device.ordinal(), bytes_for(max_count)), 0),
        max_count_(detail::virtual_range_reserved(allocation_.get()) / sizeof(T)) {}

  /// Takes `other`'s reservation; `other` is then moved-from: its uses throw EmptyHandle.
  GrowableBuffer(GrowableBuffer&& other) noexcept
      : Views(std::move(other)), max_count_(std::exchange(other.max_count_, 0)) {}
  /// Gives this buffer's reservation back (as reset()) and takes `other`'s.
  GrowableBuffer& operator=(GrowableBuffer&& other) noexcept {
    Views::operator=(std::move(other));
    max_count_ = std::exchange(other.max_count_, 0);
    return *this;
  }

  /// Elements that fit in the memory mapped now (>= size()).
  std::size_t capacity() const noexcept {
    return allocation_ ? detail::virtual_range_mapped(allocation_.get()) / sizeof(T) : 0;
  }
  /// The most elements the reservation holds.
  std::size_t max_size() const noexcept { return max_count_; }
  /// The step in bytes that mapping and unmapping go by.
  std::size_t granularity() const noexcept {
    return allocation_ ? detail::virtual_range_granularity(allocation_.get()) : 0;
  }
  /// False for a buffer without a reservation (default-constructed, moved-from, reset).
  explicit operator bool() const noexcept { return static_cast<bool>(allocation_); }

  /// Makes the size `count`: maps memory when it grows (new elements are uninitialized),
  /// unmaps the chunks wholly past it when it shrinks (waiting for the streams that used
  /// the buffer first). The address stays. OutOfMemory leaves the buffer as it was;
  /// InvalidArgument past max_size().
  void resize(std::size_t count) {
    this->require_not_moved_from();
    if (count > max_count_) detail::throw_beyond_reservation("GrowableBuffer::resize", count, max_count_, sizeof(T));
    if (count > count_) detail::map_virtual_range(allocation_.get(), count * sizeof(T));
    else detail::unmap_virtual_range(allocation_.get(), count * sizeof(T));
    count_ = count;
  }
  /// Maps memory for `count` elements without changing the size (InvalidArgument past
  /// max_size(); OutOfMemory leaves the buffer as it was).
  void reserve(std::size_t count) {
    this->require_not_moved_from();
    if (count > max_count_) detail::throw_beyond_reservation("GrowableBuffer::reserve", count, max_count_, sizeof(T));
    detail::map_virtual_range(allocation_.get(), count * sizeof(T));
  }
  /// Unmaps what the size does not need (waiting for the streams that used the buffer).
  void shrink_to_fit() {
    this->require_not_moved_from();
    if (allocation_) detail::unmap_virtual_range(allocation_.get(), count_ * sizeof(T));
  }
  /// Gives `peer` access to this buffer's memory, now and as it grows. InvalidArgument
  /// unless enable_peer_access(peer, this buffer's device) succeeded first.
  void allow_access_from(const Device& peer) {
    this->require_not_moved_from();
    if (allocation_) detail::allow_virtual_range_access(allocation_.get(), peer.ordinal());
  }

  /// Gives everything back (after every stream and graph that used it) and leaves the
  /// buffer empty, without a reservation.
  void reset() noexcept {
    this->release();
    max_count_ = 0;
  }

 private:
  static std::size_t bytes_for(std::size_t count) {
    if (count == 0) throw InvalidArgument("GrowableBuffer: a reservation of 0 elements (reserve at least one)");
    return Views::bytes_for("GrowableBuffer", count);
  }
  std::size_t max_count_ = 0;
};

}  // namespace cudakit
