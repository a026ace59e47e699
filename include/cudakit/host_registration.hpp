// HostRegistration: page-locks memory the program already has (cuMemHostRegister) for as
// long as it lives. Copies from and to a registered range go straight
// to the copy engines, as with a PinnedBuffer.
//
//   std::vector<float> frames(n);
//   cudakit::HostRegistration locked(frames);          // frames must outlive `locked`
//   cudakit::copy(stream, frames, device_buffer);      // direct, asynchronous
//
// Like a PinnedBuffer, a registration is tracked (DESIGN 5): copies say when they use the
// range on a stream, and unregistering waits for every stream that used it before
// cuMemHostUnregister. The memory itself stays the caller's: it must stay valid until
// the registration is destroyed, and it is not freed by it.
//
// Registering is expensive (it pins every page); do it once for memory reused often.
// Registration of memory that overlaps a registered range fails (the driver refuses it).
//
// Thread safety: like a standard container: one thread at a time mutates it.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <ranges>
#include <utility>

#include "cudakit/export.hpp"
#include "cudakit/detail/allocation.hpp"

namespace cudakit {

/// How a host range is registered.
struct CUDAKIT_API HostRegistrationOptions {
  /// Also map it into the device address space (CU_MEMHOSTREGISTER_DEVICEMAP).
  bool mapped = false;
  /// The device will only read it (CU_MEMHOSTREGISTER_READ_ONLY); needs a device that
  /// reports CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED.
  bool read_only = false;
};

namespace detail {
CUDAKIT_API Ref<Allocation> register_host_memory(const void* data, std::size_t bytes, HostRegistrationOptions options,
                                 CUdeviceptr* mapped);
}  // namespace detail

/// One registered host range (see above). Move-only; destroying or reset() blocks until
/// every stream that used the range finished, then unregisters it.
class CUDAKIT_API HostRegistration {
 public:
  /// An empty registration (what a moved-from one becomes).
  HostRegistration() = default;
  /// Page-locks [data, data + bytes). Nothing happens for 0 bytes. Throws InvalidArgument
  /// for a null `data`, OutOfMemory when the OS refuses to page-lock that much,
  /// DriverError otherwise (for example a range overlapping a registered one).
  HostRegistration(const void* data, std::size_t bytes, HostRegistrationOptions options = {})
      : allocation_(detail::register_host_memory(data, bytes, options, &mapped_)), bytes_(bytes) {}
  /// Page-locks a contiguous range (a std::vector, std::array, std::span, ...). The range
  /// must outlive the registration and must not reallocate meanwhile.
  template <std::ranges::contiguous_range R>
    requires std::ranges::sized_range<R> && std::is_lvalue_reference_v<R&>
  explicit HostRegistration(R& range, HostRegistrationOptions options = {})
      : HostRegistration(std::ranges::data(range), std::ranges::size(range) * sizeof(std::ranges::range_value_t<R>),
                         options) {}

  HostRegistration(HostRegistration&& other) noexcept
      : mapped_(std::exchange(other.mapped_, 0)), allocation_(std::move(other.allocation_)),
        bytes_(std::exchange(other.bytes_, 0)) {}
  HostRegistration& operator=(HostRegistration&& other) noexcept {
    if (this != &other) {
      reset();
      allocation_ = std::move(other.allocation_);
      mapped_ = std::exchange(other.mapped_, 0);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;
  ~HostRegistration() { reset(); }

  /// The first registered byte (null when empty).
  void* data() const noexcept { return allocation_ ? reinterpret_cast<void*>(allocation_->pointer) : nullptr; }
  /// The registered bytes, and whether a range is registered.
  std::size_t size_bytes() const noexcept { return bytes_; }
  explicit operator bool() const noexcept { return static_cast<bool>(allocation_); }
  /// The device address of a mapped registration, 0 otherwise.
  CUdeviceptr mapped_pointer() const noexcept { return mapped_; }

  /// Blocks until the work submitted so far to every stream that used the range completed.
  void synchronize() const {
    if (allocation_) allocation_->synchronize_users();
  }

  /// Unregisters now (after every stream that used the range) and leaves this empty.
  void reset() noexcept {
    allocation_.reset();
    mapped_ = 0;
    bytes_ = 0;
  }

  /// Internal: the allocation (tracking state) behind the registration.
  detail::Allocation* allocation() const noexcept { return allocation_.get(); }

 private:
  CUdeviceptr mapped_ = 0;  // before allocation_: the allocating initializer sets it
  detail::Ref<detail::Allocation> allocation_;
  std::size_t bytes_ = 0;
};

}  // namespace cudakit
