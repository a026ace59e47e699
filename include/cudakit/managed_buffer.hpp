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
class ManagedBuffer {
  static_assert(std::is_trivially_copyable_v<T> && !std::is_const_v<T>,
                "ManagedBuffer holds non-const trivially copyable types");

 public:
  /// The element type.
  using value_type = T;

  /// An empty buffer.
  ManagedBuffer() = default;
  /// `count` elements for `stream`'s device, left as the driver gives them (or zero-filled
  /// on `stream`). OutOfMemory when the device cannot back them, or when they are more
  /// than its free memory and `options` do not allow oversubscription; InvalidArgument
  /// when the bytes overflow; FeatureUnavailable when the device has no managed memory.
  ManagedBuffer(StreamRef stream, std::size_t count, Uninitialized, ManagedOptions options = {})
      : allocation_(detail::allocate_managed_memory(stream, bytes_for(count), false, options)), count_(count) {}
  /// The same, zero-filled on `stream`.
  ManagedBuffer(StreamRef stream, std::size_t count, Zeroed, ManagedOptions options = {})
      : allocation_(detail::allocate_managed_memory(stream, bytes_for(count), true, options)), count_(count) {}

  ManagedBuffer(ManagedBuffer&& other) noexcept
      : allocation_(std::move(other.allocation_)), count_(std::exchange(other.count_, 0)),
        moved_from_(std::exchange(other.moved_from_, true)) {}
  ManagedBuffer& operator=(ManagedBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      allocation_ = std::move(other.allocation_);
      count_ = std::exchange(other.count_, 0);
      moved_from_ = std::exchange(other.moved_from_, true);
    }
    return *this;
  }
  ManagedBuffer(const ManagedBuffer&) = delete;
  ManagedBuffer& operator=(const ManagedBuffer&) = delete;
  ~ManagedBuffer() { reset(); }

  /// The number of elements, the same in bytes, whether it is 0, and whether the buffer
  /// holds memory.
  std::size_t size() const noexcept { return count_; }
  std::size_t size_bytes() const noexcept { return count_ * sizeof(T); }
  bool empty() const noexcept { return count_ == 0; }
  explicit operator bool() const noexcept { return allocation_ || count_ != 0; }

  /// The address every device and the host use (0 when empty), typed, and the device it
  /// was made for (-1 when empty).
  CUdeviceptr device_pointer() const { return usable_allocation() ? allocation_->pointer : CUdeviceptr{0}; }
  T* data() { return reinterpret_cast<T*>(device_pointer()); }
  const T* data() const { return reinterpret_cast<const T*>(device_pointer()); }
  int device_ordinal() const noexcept { return allocation_ ? allocation_->device : -1; }

  /// The elements as host memory. Touch them only once the streams that used the buffer
  /// finished (wait_for_users()); the pages migrate to the host on first touch.
  std::span<T> host() { return {data(), count_}; }
  std::span<const T> host() const { return {data(), count_}; }
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
  void advise(ManagedAdvice advice) { detail::advise_managed(usable_allocation(), device_pointer(), size_bytes(), advice, device_ordinal()); }
  void advise(ManagedAdvice advice, const Device& device) {
    detail::advise_managed(usable_allocation(), device_pointer(), size_bytes(), advice, device.ordinal());
  }
  /// The same advice for the host.
  void advise_host(ManagedAdvice advice) { detail::advise_managed(usable_allocation(), device_pointer(), size_bytes(), advice, -1); }

  /// A view of the whole buffer, sharing its ordering.
  DeviceSpan<T> span() { return {usable_allocation(), 0, count_}; }
  DeviceSpan<const T> span() const { return {usable_allocation(), 0, count_}; }
  operator DeviceSpan<T>() { return span(); }
  operator DeviceSpan<const T>() const { return span(); }
  DeviceSpan<T> subspan(std::size_t offset, std::size_t count) { return span().subspan(offset, count); }
  DeviceSpan<const T> subspan(std::size_t offset, std::size_t count) const { return span().subspan(offset, count); }

  /// Frees the memory (after every stream that used it) and leaves the buffer empty.
  void reset() noexcept {
    allocation_.reset();
    count_ = 0;
    moved_from_ = false;
  }
  /// Throws EmptyHandle when the buffer was moved from.
  void require_not_moved_from() const {
    if (moved_from_) [[unlikely]]
      detail::throw_moved_from_managed_buffer();
  }
  /// Internal: the allocation (tracking state); null when empty.
  detail::Allocation* allocation() const noexcept { return allocation_.get(); }

 private:
  void prefetch(StreamRef stream, int device) {
    detail::prefetch_managed(usable_allocation(), device_pointer(), size_bytes(), stream, device);
  }
  detail::Allocation* usable_allocation() const {
    require_not_moved_from();
    return allocation_.get();
  }
  static std::size_t bytes_for(std::size_t count) {
    if (count > static_cast<std::size_t>(-1) / sizeof(T))
      throw InvalidArgument("ManagedBuffer of " + std::to_string(count) + " elements of " + std::to_string(sizeof(T)) +
                            " bytes overflows size_t");
    return count * sizeof(T);
  }
  detail::Ref<detail::Allocation> allocation_;
  std::size_t count_ = 0;
  bool moved_from_ = false;
};

}  // namespace cudakit
