// PoolResource: a memory pool as a memory resource (memory_resource.hpp).
//
// Allocations come stream-ordered from a pool (cuMemAllocFromPoolAsync): the device's
// default pool, or a pool the caller names. Each is counted in the pool's usage
// (MemoryPoolRef::usage(): live_allocations, allocations_made). When the pool cannot
// give the memory, it releases its unused memory (cuMemPoolTrimTo to zero) and tries
// once more; then it throws OutOfMemory naming the bytes asked for, the device's free
// memory and what the pool still reserves.
//
// The synchronous forms (allocate, deallocate) work on the device's service stream and
// wait for it. allocate_async takes a cudakit StreamRef, or a foreign stream view with
// a `get()` that gives the raw stream (CCCL's cuda::stream_ref), which makes a
// PoolResource a CCCL async resource as it is (interop/cccl_memory_resource.hpp adds the
// CCCL property).
//
// Alignment: the pool's allocations are aligned to 256 bytes; a larger alignment, or
// one that is not a power of two, throws InvalidArgument. A request of 0 bytes returns
// null, and freeing null does nothing.
//
// Thread safety: every call may be made from any thread. The pool outlives the resource
// (the default pool lives as long as the process; a raw pool is the caller's).
#pragma once

#include <concepts>
#include <cstddef>

#include "cudakit/device.hpp"
#include "cudakit/export.hpp"
#include "cudakit/memory_pool.hpp"
#include "cudakit/memory_resource.hpp"
#include "cudakit/stream.hpp"

namespace cudakit {

/// A stream view of another library whose `get()` gives the raw stream (a
/// cuda::stream_ref, whose cudaStream_t is a CUstream).
template <class S>
concept ForeignStreamView = !std::same_as<S, StreamRef> && requires(const S& stream) {
  { stream.get() } -> std::convertible_to<CUstream>;
};

/// A memory pool as a device memory resource (see above).
class CUDAKIT_API PoolResource {
 public:
  /// Device `device`'s default memory pool.
  explicit PoolResource(Device device);
  /// A pool the caller names (its ref must not be empty: InvalidArgument).
  explicit PoolResource(MemoryPoolRef pool);

  /// The pool, and its device's ordinal.
  MemoryPoolRef pool() const noexcept { return pool_; }
  int device_ordinal() const noexcept { return pool_.device_ordinal(); }

  /// `bytes` from the pool, stream-ordered on `stream` (see above for out of memory).
  void* allocate_async(std::size_t bytes, std::size_t alignment, StreamRef stream) const;
  /// Returns memory from this pool, stream-ordered on `stream`.
  void deallocate_async(void* pointer, std::size_t bytes, std::size_t alignment, StreamRef stream) const;
  /// The same on a foreign stream view of this resource's device (CCCL's stream_ref).
  template <ForeignStreamView S>
  void* allocate_async(std::size_t bytes, std::size_t alignment, const S& stream) const {
    return allocate_async(bytes, alignment, borrowed(static_cast<CUstream>(stream.get())));
  }
  /// Returns memory from this pool on a foreign stream view of this resource's device.
  template <ForeignStreamView S>
  void deallocate_async(void* pointer, std::size_t bytes, std::size_t alignment, const S& stream) const {
    deallocate_async(pointer, bytes, alignment, borrowed(static_cast<CUstream>(stream.get())));
  }
  /// Blocking forms, on the device's service stream.
  void* allocate(std::size_t bytes, std::size_t alignment = default_alignment) const;
  void deallocate(void* pointer, std::size_t bytes, std::size_t alignment = default_alignment) const;

  /// Equal when they allocate from the same pool.
  friend bool operator==(const PoolResource& a, const PoolResource& b) noexcept { return a.pool_ == b.pool_; }
  /// The pool's memory is device memory.
  friend void get_property(const PoolResource&, device_accessible) noexcept {}

 private:
  // A view of a foreign stream of this device; the legacy and per-thread default
  // streams are refused (DESIGN 1: InvalidArgument).
  StreamRef borrowed(CUstream stream) const;
  MemoryPoolRef pool_;
};

}  // namespace cudakit
