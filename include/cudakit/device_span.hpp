// DeviceSpan<T>: a non-owning view of a whole device buffer or a sub-range of it. A view
// shares its buffer's cross-stream tracking (DESIGN 5): work on a view orders against work
// on the buffer and on every other view of it.
//
// DeviceSpan<const T> is a read-only view: copies and typed launches only read it.
// A view does not keep its buffer alive; like std::span, it must not outlive it
// (graphs are different: a graph keeps alive every buffer its work touches).
//
// Thread safety: a view is a value; see DeviceBuffer for the rules on the memory.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <string>
#include <type_traits>

#include "cudakit/detail/allocation.hpp"
#include "cudakit/error.hpp"

namespace cudakit {

/// A view of `size()` elements of T in one device buffer (see above); trivially
/// copyable, never owns. Nothing here calls the driver.
template <class T>
class DeviceSpan {
  static_assert(std::is_trivially_copyable_v<std::remove_const_t<T>>,
                "device memory holds trivially copyable types only");

 public:
  /// T as given (const for a read-only view), and T without const, as in std::span.
  using element_type = T;
  using value_type = std::remove_const_t<T>;

  /// An empty view of nothing: size 0, device_pointer 0; using it orders nothing.
  DeviceSpan() = default;
  /// Internal: a view of `count` elements at element `offset` of `allocation`.
  DeviceSpan(detail::Allocation* allocation, std::size_t offset, std::size_t count) noexcept
      : allocation_(allocation), offset_(offset), count_(count) {}

  /// A read-only view of the same elements (a view of const elements is one already; a
  /// template, so that DeviceSpan<const T> declares no conversion to its own type).
  template <class U = T>
    requires(std::is_same_v<U, T> && !std::is_const_v<U>)
  operator DeviceSpan<const U>() const noexcept {
    return {allocation_, offset_, count_};
  }

  /// The number of elements, the same in bytes, and whether it is 0.
  std::size_t size() const noexcept { return count_; }
  std::size_t size_bytes() const noexcept { return count_ * sizeof(T); }
  bool empty() const noexcept { return count_ == 0; }

  /// The device address of the first element (0 for an empty view of nothing).
  CUdeviceptr device_pointer() const noexcept {
    return allocation_ ? allocation_->pointer + offset_ * sizeof(T) : CUdeviceptr{0};
  }
  /// The same address as a typed pointer, for raw kernel arguments and libraries.
  T* data() const noexcept { return reinterpret_cast<T*>(device_pointer()); }
  /// The buffer's device; -1 for a view of nothing.
  int device_ordinal() const noexcept { return allocation_ ? allocation_->device : -1; }

  /// `count` elements from `offset`. InvalidArgument names both and the size when the
  /// range does not fit.
  DeviceSpan subspan(std::size_t offset, std::size_t count) const {
    if (offset > count_ || count > count_ - offset)
      throw InvalidArgument("subspan(" + std::to_string(offset) + ", " + std::to_string(count) +
                            ") is out of range for a device view of " + std::to_string(count_) + " elements");
    return {allocation_, offset_ + offset, count};
  }
  /// The elements from `offset` to the end; InvalidArgument when `offset` > size().
  DeviceSpan subspan(std::size_t offset) const {
    if (offset > count_)
      throw InvalidArgument("subspan(" + std::to_string(offset) + ") is out of range for a device view of " +
                            std::to_string(count_) + " elements");
    return {allocation_, offset_ + offset, count_ - offset};
  }
  /// The first or last `count` elements; InvalidArgument when `count` > size().
  DeviceSpan first(std::size_t count) const { return subspan(0, count); }
  DeviceSpan last(std::size_t count) const {
    if (count > count_) return subspan(count_ + 1, 0);  // throws with the sizes
    return subspan(count_ - count, count);
  }

  /// Internal: the allocation whose tracking this view shares (null when empty).
  detail::Allocation* allocation() const noexcept { return allocation_; }
  /// Orders a use of this view on `stream` (DESIGN 5). Copies and launches call it.
  void use(StreamRef stream, Access access) const {
    if (allocation_ != nullptr) allocation_->use(stream, std::is_const_v<T> ? Access::read : access);
  }

 private:
  detail::Allocation* allocation_ = nullptr;
  std::size_t offset_ = 0;  // in elements
  std::size_t count_ = 0;
};

}  // namespace cudakit
