// ImportedBuffer<T>: device memory that another process shared (shareable_pool.hpp,
// shareable_memory.hpp), used like a DeviceBuffer of this process.
//
// It is a tracked allocation: uses on several streams are ordered (DESIGN 5), a graph
// that captured it keeps it (DESIGN 6), and the import is released after every stream
// that used it. What the producer wrote is ordered by its SharedEvent (shared_event.hpp):
// after(ready, stream) makes `stream` wait for the producer's last record and counts as
// a write on `stream`, so every later use, on any stream, waits for it.
//
// The import keeps the memory alive in this process until release() or destruction.
// A released buffer cannot be used again: every use throws EmptyHandle ("released"),
// where a DeviceBuffer that was reset would be an empty range.
//
// The producer must not free the memory before every importer released it (the driver
// says so for pool allocations): agree on that over the channel, for instance with an
// event or a message back.
//
// Thread safety: as DeviceBuffer.
#pragma once

#include <cstddef>
#include <utility>

#include "cudakit/device_buffer.hpp"
#include "cudakit/export.hpp"
#include "cudakit/stream.hpp"

namespace cudakit {

class ImportedEvent;

namespace detail {
/// EmptyHandle for the use of a released ImportedBuffer.
[[noreturn]] CUDAKIT_API void throw_released_import();
/// Orders a use of `allocation` on `stream` after the producer's record of `ready`
/// (ImportedBuffer::after).
CUDAKIT_API void order_after_producer(Allocation* allocation, const ImportedEvent& ready, StreamRef stream);
}  // namespace detail

/// `size()` elements of T shared by another process (see above). Move-only.
template <class T>
class ImportedBuffer {
 public:
  /// The element type.
  using value_type = T;

  /// An empty (released) import.
  ImportedBuffer() = default;
  /// Internal: made by an import (ImportedPool::import, import_shareable_memory).
  explicit ImportedBuffer(DeviceBuffer<T> buffer) noexcept : buffer_(std::move(buffer)), live_(true) {}
  ImportedBuffer(ImportedBuffer&& other) noexcept
      : buffer_(std::move(other.buffer_)), live_(std::exchange(other.live_, false)) {}
  ImportedBuffer& operator=(ImportedBuffer&& other) noexcept {
    if (this != &other) {
      buffer_ = std::move(other.buffer_);
      live_ = std::exchange(other.live_, false);
    }
    return *this;
  }

  /// The number of elements, and the same in bytes (0 once released).
  std::size_t size() const noexcept { return live_ ? buffer_.size() : 0; }
  std::size_t size_bytes() const noexcept { return size() * sizeof(T); }
  /// The device's ordinal (-1 once released), and whether the import is live.
  int device_ordinal() const noexcept { return live_ ? buffer_.device_ordinal() : -1; }
  bool released() const noexcept { return !live_; }
  explicit operator bool() const noexcept { return live_; }

  /// The device address; EmptyHandle once released.
  CUdeviceptr device_pointer() const { return live().device_pointer(); }
  /// A view of the whole buffer, sharing its ordering; EmptyHandle once released.
  DeviceSpan<T> span() { return live().span(); }
  DeviceSpan<const T> span() const { return live().span(); }
  operator DeviceSpan<T>() { return span(); }
  operator DeviceSpan<const T>() const { return span(); }

  /// Makes `stream` wait for the producer's last record of `ready`, as a write on
  /// `stream` (see above). EmptyHandle once released.
  void after(const ImportedEvent& ready, StreamRef stream) {
    detail::order_after_producer(live().allocation(), ready, stream);
  }

  /// Releases the import now, after every stream that used it; later uses throw.
  void release() noexcept {
    buffer_.reset();
    live_ = false;
  }

 private:
  DeviceBuffer<T>& live() {
    if (!live_) [[unlikely]]
      detail::throw_released_import();
    return buffer_;
  }
  const DeviceBuffer<T>& live() const {
    if (!live_) [[unlikely]]
      detail::throw_released_import();
    return buffer_;
  }
  DeviceBuffer<T> buffer_;
  bool live_ = false;
};

}  // namespace cudakit
