// PinnedBuffer<T>: move-only owner of page-locked host memory (cuMemHostAlloc). Copies
// between device memory and a PinnedBuffer go straight to the copy engines, asynchronously
// and at full speed; copies from pageable memory go through cudakit's staging buffers
// instead (copy.hpp).
//
//   PinnedBuffer<float> host(n, cudakit::uninitialized);
//   std::ranges::copy(input, host.begin());
//   cudakit::copy(stream, host, device_buffer);   // returns at once; the copy reads `host` later
//
// The rule for its lifetime (the pinned free rule): a PinnedBuffer is tracked like a
// device buffer (DESIGN 5). Every copy that reads or writes it on a stream says so
// before it is submitted, so its use on a second stream is ordered after the first,
// and freeing it waits (cuStreamSynchronize) for every stream that used it before
// cuMemFreeHost: memory an asynchronous copy still reads or writes is never freed.
//
// The host side is the caller's to order: after an asynchronous copy into the buffer,
// synchronize the stream (or call synchronize() here) before reading it on the host;
// before overwriting it on the host, make sure the copies that read it completed.
//
// The memory is portable (usable with every device's context) and, with
// PinnedOptions::mapped, also mapped into the device address space for kernels that
// read or write host memory directly (mapped_pointer()).
//
// Out of memory (the OS refused to page-lock that much) throws OutOfMemory with the bytes
// asked for and the host's free and total physical memory.
//
// Thread safety: like a standard container: one thread at a time mutates it.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "cudakit/export.hpp"
#include "cudakit/detail/allocation.hpp"
#include "cudakit/error.hpp"
#include "cudakit/memory_init.hpp"

namespace cudakit {

/// How page-locked host memory is made.
struct CUDAKIT_API PinnedOptions {
  /// Also map it into the device address space (CU_MEMHOSTALLOC_DEVICEMAP), so kernels
  /// can use it through mapped_pointer().
  bool mapped = false;
  /// Write-combined (CU_MEMHOSTALLOC_WRITECOMBINED): faster host writes and uploads,
  /// very slow host reads. For buffers the host only fills.
  bool write_combined = false;
};

namespace detail {
/// Allocates `bytes` of portable page-locked memory; fills it with zeros when asked.
/// Stores the device address of mapped memory in `*mapped` (0 otherwise).
CUDAKIT_API Ref<Allocation> allocate_pinned_memory(std::size_t bytes, bool zero, PinnedOptions options, CUdeviceptr* mapped);
}  // namespace detail

/// Owns `size()` elements of T in page-locked host memory (see above). Move-only;
/// destroying or reset() blocks until every stream that used it finished, then frees it.
template <class T>
class PinnedBuffer {
  static_assert(std::is_trivially_copyable_v<T> && !std::is_const_v<T>,
                "PinnedBuffer holds non-const trivially copyable types");

 public:
  /// The element type, and iterators as plain pointers (a contiguous range).
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  /// An empty buffer (what a moved-from one becomes): size 0, data() null. Unlike a
  /// moved-from DeviceBuffer, a moved-from PinnedBuffer does not throw: it is a host
  /// container that standard algorithms and std::span read through data() and size().
  PinnedBuffer() = default;
  /// `count` elements of portable page-locked memory (cuMemHostAlloc, device 0's primary
  /// context current), left as the OS gives them. Count 0 makes an empty buffer without
  /// a driver call. Throws OutOfMemory when the OS refuses to page-lock that much,
  /// InvalidArgument when the bytes overflow size_t, DriverError otherwise. Costly (the
  /// OS pins every page): allocate once and reuse.
  PinnedBuffer(std::size_t count, Uninitialized, PinnedOptions options = {})
      : allocation_(detail::allocate_pinned_memory(bytes_for(count), false, options, &mapped_)), count_(count) {}
  /// The same, zero-filled on the host before it returns.
  PinnedBuffer(std::size_t count, Zeroed, PinnedOptions options = {})
      : allocation_(detail::allocate_pinned_memory(bytes_for(count), true, options, &mapped_)), count_(count) {}

  PinnedBuffer(PinnedBuffer&& other) noexcept
      : mapped_(std::exchange(other.mapped_, 0)), allocation_(std::move(other.allocation_)),
        count_(std::exchange(other.count_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      allocation_ = std::move(other.allocation_);
      mapped_ = std::exchange(other.mapped_, 0);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { reset(); }

  /// The number of elements, the same in bytes, and whether it is 0.
  std::size_t size() const noexcept { return count_; }
  std::size_t size_bytes() const noexcept { return count_ * sizeof(T); }
  bool empty() const noexcept { return count_ == 0; }
  /// False for a moved-from or default-constructed buffer.
  explicit operator bool() const noexcept { return allocation_ || count_ != 0; }

  /// Host access to the elements, as for a std::vector (null and an empty range when
  /// empty; operator[] is unchecked). Reading or writing through them is the host side:
  /// order it against copies as said above.
  T* data() noexcept { return allocation_ ? reinterpret_cast<T*>(allocation_->pointer) : nullptr; }
  const T* data() const noexcept { return allocation_ ? reinterpret_cast<const T*>(allocation_->pointer) : nullptr; }
  T* begin() noexcept { return data(); }
  T* end() noexcept { return data() + count_; }
  const T* begin() const noexcept { return data(); }
  const T* end() const noexcept { return data() + count_; }
  T& operator[](std::size_t i) noexcept { return data()[i]; }
  const T& operator[](std::size_t i) const noexcept { return data()[i]; }

  /// The host elements (see the host-side rule above).
  std::span<T> span() noexcept { return {data(), count_}; }
  std::span<const T> span() const noexcept { return {data(), count_}; }
  operator std::span<T>() noexcept { return span(); }
  operator std::span<const T>() const noexcept { return span(); }

  /// The device address of mapped memory (PinnedOptions::mapped), 0 otherwise.
  CUdeviceptr mapped_pointer() const noexcept { return mapped_; }

  /// Blocks until the work submitted so far to every stream that used this buffer has
  /// completed: after it, the host may read what copies wrote and overwrite what they read.
  void synchronize() const {
    if (allocation_) allocation_->synchronize_users();
  }

  /// Frees the memory now (after every stream that used it) and leaves the buffer empty.
  void reset() noexcept {
    allocation_.reset();
    mapped_ = 0;
    count_ = 0;
  }

  /// Internal: the allocation (tracking state) behind the buffer.
  detail::Allocation* allocation() const noexcept { return allocation_.get(); }

 private:
  static std::size_t bytes_for(std::size_t count) {
    if (count > static_cast<std::size_t>(-1) / sizeof(T))
      throw InvalidArgument("PinnedBuffer of " + std::to_string(count) + " elements of " +
                            std::to_string(sizeof(T)) + " bytes overflows size_t");
    return count * sizeof(T);
  }
  CUdeviceptr mapped_ = 0;  // before allocation_: the allocating initializer sets it
  detail::Ref<detail::Allocation> allocation_;
  std::size_t count_ = 0;
};

}  // namespace cudakit
