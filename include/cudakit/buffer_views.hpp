// BufferViews<T, ...>: what every buffer that owns device memory offers alike.
//
// DeviceBuffer, GrowableBuffer and ManagedBuffer differ in where their memory comes from
// and how it changes size, but each holds one allocation (tracking state, detail/
// allocation.hpp) and a count of elements, and each is read the same way: its size, its
// address, and views (DeviceSpan) that share the buffer's ordering. They inherit those
// from this base, so the views behave identically whatever made the memory.
//
// A moved-from buffer throws EmptyHandle from every use that needs its memory (the
// address, the views); each buffer names itself in that error, which is why the base
// takes the function that throws it. The queries size(), empty() and device_ordinal()
// never throw.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "cudakit/detail/allocation.hpp"
#include "cudakit/device_span.hpp"
#include "cudakit/error.hpp"

namespace cudakit {

/// The size, address and views of a buffer owning `size()` elements of T in device
/// memory; `throw_moved_from` throws the buffer's own EmptyHandle for a use after a move.
template <class T, void (*throw_moved_from)()>
class BufferViews {
 public:
  /// The element type.
  using value_type = T;

  /// The number of elements, the same in bytes, and whether it is 0.
  std::size_t size() const noexcept { return count_; }
  std::size_t size_bytes() const noexcept { return count_ * sizeof(T); }
  bool empty() const noexcept { return count_ == 0; }

  /// The device address (0 when empty), the same as a typed pointer for raw kernel
  /// arguments and libraries (work through them is not tracked: order it yourself;
  /// read-only from a const buffer), and the device's ordinal (-1 when empty or
  /// moved-from). The address and pointer throw EmptyHandle for a moved-from buffer.
  CUdeviceptr device_pointer() const {
    const detail::Allocation* a = usable_allocation();
    return a ? a->pointer : CUdeviceptr{0};
  }
  T* data() { return reinterpret_cast<T*>(device_pointer()); }
  const T* data() const { return reinterpret_cast<const T*>(device_pointer()); }
  int device_ordinal() const noexcept { return allocation_ ? allocation_->device : -1; }

  /// A view of the whole buffer (read-only from a const buffer), sharing its ordering;
  /// EmptyHandle for a moved-from buffer. The subspan, first and last views are
  /// DeviceSpan's, and throw InvalidArgument as they do when out of range.
  DeviceSpan<T> span() { return {usable_allocation(), 0, count_}; }
  DeviceSpan<const T> span() const { return {usable_allocation(), 0, count_}; }
  operator DeviceSpan<T>() { return span(); }
  operator DeviceSpan<const T>() const { return span(); }
  DeviceSpan<T> subspan(std::size_t offset, std::size_t count) { return span().subspan(offset, count); }
  DeviceSpan<const T> subspan(std::size_t offset, std::size_t count) const { return span().subspan(offset, count); }
  DeviceSpan<T> subspan(std::size_t offset) { return span().subspan(offset); }
  DeviceSpan<const T> subspan(std::size_t offset) const { return span().subspan(offset); }
  DeviceSpan<T> first(std::size_t count) { return span().first(count); }
  DeviceSpan<const T> first(std::size_t count) const { return span().first(count); }
  DeviceSpan<T> last(std::size_t count) { return span().last(count); }
  DeviceSpan<const T> last(std::size_t count) const { return span().last(count); }

  /// Throws EmptyHandle when the buffer was moved from.
  void require_not_moved_from() const {
    if (moved_from_) [[unlikely]]
      throw_moved_from();
  }
  /// Internal: the allocation (tracking state) behind the buffer; null when it holds no
  /// memory (never throws: for code that must not, such as destructors).
  detail::Allocation* allocation() const noexcept { return allocation_.get(); }

 protected:
  BufferViews() = default;
  BufferViews(detail::Ref<detail::Allocation> allocation, std::size_t count) noexcept
      : allocation_(std::move(allocation)), count_(count) {}
  // A move leaves the source moved-from: its uses throw until it is assigned again.
  BufferViews(BufferViews&& other) noexcept
      : allocation_(std::move(other.allocation_)), count_(std::exchange(other.count_, 0)),
        moved_from_(std::exchange(other.moved_from_, true)) {}
  BufferViews& operator=(BufferViews&& other) noexcept {
    if (this != &other) {
      release();  // this buffer's memory goes first, as reset() would free it
      allocation_ = std::move(other.allocation_);
      count_ = std::exchange(other.count_, 0);
      moved_from_ = std::exchange(other.moved_from_, true);
    }
    return *this;
  }
  BufferViews(const BufferViews&) = delete;
  BufferViews& operator=(const BufferViews&) = delete;
  ~BufferViews() = default;

  // Frees the memory (stream-ordered, after every use) and leaves an empty buffer, usable
  // again also when it was moved from.
  void release() noexcept {
    allocation_.reset();
    count_ = 0;
    moved_from_ = false;
  }
  // The allocation for a use: EmptyHandle when moved from, null when empty.
  detail::Allocation* usable_allocation() const {
    require_not_moved_from();
    return allocation_.get();
  }
  // `count` elements in bytes; InvalidArgument, naming the buffer, when they overflow.
  static std::size_t bytes_for(const char* buffer_name, std::size_t count) {
    if (count > static_cast<std::size_t>(-1) / sizeof(T))
      throw InvalidArgument(std::string(buffer_name) + " of " + std::to_string(count) + " elements of " +
                            std::to_string(sizeof(T)) + " bytes overflows size_t");
    return count * sizeof(T);
  }

  detail::Ref<detail::Allocation> allocation_;
  std::size_t count_ = 0;
  bool moved_from_ = false;
};

}  // namespace cudakit
