// PackedArguments: a kernel's argument list, packed for the driver, that also says which
// buffers the kernel touches and how (issue 5, points 5 and 7).
//
// Graph kernel nodes and kernel-argument updates of an executable take one. Each argument
// is copied into the pack (the driver reads `kernelParams`: one pointer per argument).
// Device memory passed as a DeviceSpan or DeviceBuffer becomes its device pointer and a
// recorded use, so the graph keeps that buffer alive and a launch orders it (DESIGN 4, 6):
//
//   PackedArguments args(2.0f, x_span_const, y_buffer, n);
//     DeviceSpan<const float> x  -> const float*, read
//     DeviceBuffer<float>& y     -> float*, written
//     const DeviceBuffer<float>& -> const float*, read
//
// Raw pointers and CUdeviceptr values are passed as they are, untracked: their lifetime
// is the caller's. (TODO(launch): typed kernels check the list against the signature;
// until they are merged, the list is checked against the driver's parameter info where
// the driver has cuFuncGetParamInfo.)
//
// Thread safety: a value; one thread mutates it at a time.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "cudakit/detail/allocation.hpp"
#include "cudakit/device_buffer.hpp"
#include "cudakit/device_span.hpp"
#include "cudakit/tracking.hpp"

namespace cudakit {

/// One buffer a piece of graph work touches, and how.
struct BufferUse {
  detail::Allocation* allocation = nullptr;
  Access access = Access::read;
};

namespace detail {
template <class T>
struct is_device_span : std::false_type {};
template <class T>
struct is_device_span<DeviceSpan<T>> : std::true_type {};
template <class T>
struct is_device_buffer : std::false_type {};
template <class T>
struct is_device_buffer<DeviceBuffer<T>> : std::true_type {};
}  // namespace detail

class PackedArguments {
 public:
  PackedArguments() = default;
  template <class... Args>
  explicit PackedArguments(Args&&... args) {
    (add(std::forward<Args>(args)), ...);
  }

  PackedArguments(const PackedArguments& other) { *this = other; }
  PackedArguments& operator=(const PackedArguments& other) {
    if (this != &other) {
      reserve_bytes(other.used_);
      if (other.used_ != 0) std::memcpy(storage_.get(), other.storage_.get(), other.used_);
      used_ = other.used_;
      offsets_ = other.offsets_;
      sizes_ = other.sizes_;
      buffers_ = other.buffers_;
      pointers_.clear();
    }
    return *this;
  }
  PackedArguments(PackedArguments&& other) noexcept { *this = std::move(other); }
  PackedArguments& operator=(PackedArguments&& other) noexcept {
    if (this != &other) {
      storage_ = std::move(other.storage_);
      capacity_ = std::exchange(other.capacity_, 0);
      used_ = std::exchange(other.used_, 0);
      offsets_ = std::move(other.offsets_);
      sizes_ = std::move(other.sizes_);
      buffers_ = std::move(other.buffers_);
      other.offsets_.clear();
      other.sizes_.clear();
      other.buffers_.clear();
      pointers_.clear();
    }
    return *this;
  }

  /// Appends one argument (see the header comment for what each kind becomes).
  template <class T>
  void add(T&& value) {
    using V = std::remove_cvref_t<T>;
    if constexpr (detail::is_device_span<V>::value) {
      append_buffer(value.data(), value.allocation(),
                    std::is_const_v<typename V::element_type> ? Access::read : Access::write);
    } else if constexpr (detail::is_device_buffer<V>::value) {
      static_assert(std::is_lvalue_reference_v<T>,
                    "pass a DeviceBuffer the graph can keep alive (an lvalue), not a temporary");
      constexpr bool read_only = std::is_const_v<std::remove_reference_t<T>>;
      using Element = typename V::value_type;
      const Element* pointer = value.data();
      if constexpr (read_only) append_buffer(pointer, value.allocation(), Access::read);
      else append_buffer(const_cast<Element*>(pointer), value.allocation(), Access::write);
    } else {
      static_assert(std::is_trivially_copyable_v<V>, "a kernel argument must be trivially copyable");
      append_bytes(&value, sizeof(V), alignof(V));
    }
  }

  /// How many arguments.
  std::size_t size() const noexcept { return offsets_.size(); }
  /// The byte size of argument `i` (for checks against the kernel's parameter info).
  std::size_t size_of(std::size_t i) const { return sizes_.at(i); }
  /// The driver's `kernelParams`: one pointer per argument, into this pack. Valid until
  /// the pack is changed, moved or destroyed.
  void** pointers() const {
    pointers_.resize(offsets_.size());
    for (std::size_t i = 0; i < offsets_.size(); ++i) pointers_[i] = storage_.get() + offsets_[i];
    return pointers_.empty() ? nullptr : pointers_.data();
  }
  /// The buffers the arguments name, with their access.
  const std::vector<BufferUse>& buffers() const noexcept { return buffers_; }

 private:
  template <class P>
  void append_buffer(P* pointer, detail::Allocation* allocation, Access access) {
    append_bytes(&pointer, sizeof(P*), alignof(P*));
    if (allocation != nullptr) buffers_.push_back({allocation, access});
  }
  void append_bytes(const void* value, std::size_t bytes, std::size_t alignment) {
    std::size_t offset = (used_ + alignment - 1) / alignment * alignment;
    reserve_bytes(offset + bytes);
    std::memcpy(storage_.get() + offset, value, bytes);
    used_ = offset + bytes;
    offsets_.push_back(offset);
    sizes_.push_back(bytes);
  }
  void reserve_bytes(std::size_t bytes) {
    if (bytes <= capacity_) return;
    std::size_t capacity = capacity_ == 0 ? 64 : capacity_;
    while (capacity < bytes) capacity *= 2;
    // Aligned for any scalar argument type (16-byte vector types included).
    std::unique_ptr<std::byte[], Deleter> grown(static_cast<std::byte*>(::operator new(capacity, storage_alignment)));
    if (used_ != 0) std::memcpy(grown.get(), storage_.get(), used_);
    storage_ = std::move(grown);
    capacity_ = capacity;
  }
  static constexpr std::align_val_t storage_alignment{alignof(std::max_align_t) > 16 ? alignof(std::max_align_t) : 16};
  struct Deleter {
    void operator()(std::byte* p) const noexcept { ::operator delete(p, storage_alignment); }
  };

  std::unique_ptr<std::byte[], Deleter> storage_;
  std::size_t capacity_ = 0;
  std::size_t used_ = 0;
  std::vector<std::size_t> offsets_;
  std::vector<std::size_t> sizes_;
  std::vector<BufferUse> buffers_;
  mutable std::vector<void*> pointers_;
};

}  // namespace cudakit
