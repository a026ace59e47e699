// DeviceBuffer<T>: move-only owner of device memory.
//
// By default the memory comes stream-ordered from the device's memory pool on a given
// stream (cuMemAllocAsync) and goes back stream-ordered (cuMemFreeAsync) after every
// stream that used it (DESIGN 5). Allocator::plain asks for cuMemAlloc instead, and a
// memory resource (memory_resource.hpp: cudakit's PoolResource, a CCCL or RMM resource)
// gives the memory its own way. Whether
// the memory starts zero-filled or uninitialized is always said:
//
//   DeviceBuffer<float> a(stream, n, cudakit::uninitialized);
//   DeviceBuffer<float> b(stream, n, cudakit::zeroed);
//   DeviceBuffer<float> c(stream, n, cudakit::zeroed, cudakit::Allocator::plain);
//
// Out of memory throws OutOfMemory with the bytes asked for and the free and total
// memory; the process goes on. Before giving up, an allocation that failed for lack of
// memory trims the device's default pool and tries once more (memory_pool.hpp, which
// also says how much freed memory the pool keeps for reuse).
//
// Copies, fills, upload() and download() are in copy.hpp:
//
//   DeviceBuffer<float> x = cudakit::upload(stream, host_vector);
//
// Inside a capture (capture.hpp): allocating on a stream that a cudakit capture is
// capturing throws CaptureError (it would happen once, not at each launch of the graph:
// allocate before the capture). Allocating on another stream is fine, and a buffer freed
// while its thread captures is freed when the capture ends.
//
// Empty and moved-from buffers are not the same. A default-constructed buffer, one of 0
// elements, and one after reset() are empty containers, like an empty std::vector: copies,
// fills and downloads of them do nothing (and check extents as usual), a launch passes a
// null pointer. A buffer that was moved from has given its memory to another buffer:
// using it is a mistake, and like a moved-from Stream, Module or GraphExec it throws
// EmptyHandle (span(), data(), device_pointer(), and so every copy, fill, download,
// launch or declaration of it). Its size() is 0 and it may be assigned a new buffer, which
// makes it usable again. The queries size(), empty(), device_ordinal() and operator bool
// never throw.
//
// Thread safety: one thread at a time mutates a buffer (like a standard container);
// several threads may read one buffer concurrently on their own streams (weights,
// tables): those reads take no lock once each stream has waited for the last write.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include "cudakit/buffer_views.hpp"
#include "cudakit/export.hpp"
#include "cudakit/detail/allocation.hpp"
#include "cudakit/device_span.hpp"
#include "cudakit/memory_init.hpp"
#include "cudakit/memory_resource.hpp"
#include "cudakit/stream.hpp"

namespace cudakit {

/// Where device memory comes from.
enum class Allocator {
  pool,   ///< the device's default memory pool, stream-ordered (cuMemAllocAsync)
  plain,  ///< cuMemAlloc: for memory that lives long or must not come from a pool
};

namespace detail {
/// Allocates `bytes` on `stream`'s device; zero-fills on `stream` when asked.
CUDAKIT_API Ref<Allocation> allocate_device_memory(StreamRef stream, std::size_t bytes, bool zero, Allocator allocator);
/// The same from `resource`, stream-ordered on `stream`.
CUDAKIT_API Ref<Allocation> allocate_from_resource(StreamRef stream, std::size_t bytes, bool zero,
                                                   const MemoryResource& resource);
/// EmptyHandle for the use of a moved-from DeviceBuffer.
[[noreturn]] CUDAKIT_API void throw_moved_from_buffer();
}  // namespace detail

/// Owns `size()` elements of T in device memory (see above). Move-only; destroying or
/// reset() frees the memory stream-ordered after every stream that used it, never
/// blocking the host.
template <class T>
class DeviceBuffer : public BufferViews<T, &detail::throw_moved_from_buffer> {
  static_assert(std::is_trivially_copyable_v<T> && !std::is_const_v<T>,
                "DeviceBuffer holds non-const trivially copyable types");
  using Views = BufferViews<T, &detail::throw_moved_from_buffer>;

 public:
  /// An empty buffer: size 0, no memory; usable as an empty range (see above).
  DeviceBuffer() = default;
  /// `count` elements on `stream`'s device, allocated on `stream` (Allocator::pool) or
  /// with cuMemAlloc (Allocator::plain), left as the allocator gives them. Count 0 makes
  /// an empty buffer without a driver call. Throws OutOfMemory when the device has too
  /// little memory (after trimming the default pool once), InvalidArgument when the
  /// bytes overflow size_t, CaptureError when `stream` is capturing (allocate before the
  /// capture), EmptyHandle for an empty stream, DriverError otherwise.
  DeviceBuffer(StreamRef stream, std::size_t count, Uninitialized, Allocator allocator = Allocator::pool)
      : Views(detail::allocate_device_memory(stream, Views::bytes_for("DeviceBuffer", count), false, allocator), count) {}
  /// The same, zero-filled on `stream` (the fill is stream-ordered: work on other
  /// streams waits for it like for any write).
  DeviceBuffer(StreamRef stream, std::size_t count, Zeroed, Allocator allocator = Allocator::pool)
      : Views(detail::allocate_device_memory(stream, Views::bytes_for("DeviceBuffer", count), true, allocator), count) {}

  /// `count` elements from a memory resource (memory_resource.hpp), allocated on
  /// `stream` (allocate_async) and given back stream-ordered after every stream that used
  /// them (deallocate_async); the buffer keeps the resource alive until then. The
  /// resource's memory must be device memory of `stream`'s device. Its errors pass
  /// through (PoolResource: OutOfMemory after trimming its pool once); a resource that
  /// returns null throws Error; CaptureError and EmptyHandle as above.
  DeviceBuffer(StreamRef stream, std::size_t count, Uninitialized, const MemoryResource& resource)
      : Views(detail::allocate_from_resource(stream, Views::bytes_for("DeviceBuffer", count), false, resource), count) {}
  /// The same, zero-filled on `stream`.
  DeviceBuffer(StreamRef stream, std::size_t count, Zeroed, const MemoryResource& resource)
      : Views(detail::allocate_from_resource(stream, Views::bytes_for("DeviceBuffer", count), true, resource), count) {}
  /// Internal: `count` elements over memory allocated elsewhere (a shareable pool, an
  /// import from another process), released as `allocation` says.
  DeviceBuffer(detail::Ref<detail::Allocation> allocation, std::size_t count) noexcept
      : Views(std::move(allocation), count) {}

  /// Takes `other`'s memory; `other` is then moved-from: its uses throw EmptyHandle.
  DeviceBuffer(DeviceBuffer&& other) noexcept = default;
  /// Frees this buffer's memory (as reset()) and takes `other`'s; `other` is then moved-from.
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept = default;

  /// False for an empty or moved-from buffer.
  explicit operator bool() const noexcept { return this->allocation_ || this->count_ != 0; }

  /// Frees the memory now (stream-ordered after every use) and leaves the buffer empty
  /// (usable as an empty range, also when it was moved from).
  void reset() noexcept { this->release(); }
};

}  // namespace cudakit
