// The device's default memory pool: its settings and its usage.
//
// DeviceBuffer's default allocator takes memory stream-ordered (cuMemAllocAsync) from
// the device's current memory pool, which is the device's default pool unless code
// outside cudakit installed another one (cuDeviceSetMemPool, cudaDeviceSetMemPool).
// The default pool belongs to the device, never to cudakit: a MemoryPoolRef is a view,
// and the pool lives as long as the process.
//
// The release threshold, and cudakit's default for it
// ----------------------------------------------------
// The release threshold is how much unused memory the pool keeps reserved when a
// stream, event or context is synchronized; above it, the driver hands the excess back
// to the OS at that synchronize. The driver's default is 0: every synchronize returns
// every unused byte, and the next allocation maps it again, which makes stream-ordered
// allocation cost what cuMemAlloc costs for a program that synchronizes often (the
// design notes measure 1.3 us against 42 us per 1 MiB allocation and free).
//
// So on the first pool allocation cudakit makes on a device, it reads the default pool's
// threshold and, if it is still the driver's default 0, sets it to `keep_all_pool_memory`
// (UINT64_MAX): freed memory stays in the pool for the next allocation. This happens
// once per device (one read, at most one write); cudakit never touches the threshold
// again. A threshold somebody already chose (through cudakit, the runtime or the driver)
// is kept, and set_release_threshold() before the first allocation decides it outright.
//
// Memory the pool keeps is not lost: trim_to() hands unused memory back on request, and
// when an allocation fails for lack of memory cudakit trims the default pool to zero and
// tries once more before reporting OutOfMemory.
//
// Thread safety: every call may be made from any thread.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "cudakit/export.hpp"
#include "cudakit/device.hpp"

namespace cudakit {

/// The release threshold that keeps every freed byte in the pool (cudakit's default).
inline constexpr std::uint64_t keep_all_pool_memory = UINT64_MAX;

/// How much memory a pool holds and how much of it is in use, now and at its peak, and
/// how many allocations cudakit made from it. The bytes are the driver's
/// (cuMemPoolGetAttribute) and count every user of the pool; the allocations are
/// cudakit's own count, of its buffers (DeviceBuffer's default allocator) and of
/// PoolResource's allocations, and not of allocations made past cudakit.
struct CUDAKIT_API PoolUsage {
  std::uint64_t reserved_bytes = 0;       ///< memory the pool holds from the OS now
  std::uint64_t reserved_high_bytes = 0;  ///< the most it held since the last reset
  std::uint64_t used_bytes = 0;           ///< memory handed out to allocations now
  std::uint64_t used_high_bytes = 0;      ///< the most handed out since the last reset
  std::uint64_t live_allocations = 0;     ///< allocations cudakit made from it, not freed yet
  std::uint64_t allocations_made = 0;     ///< allocations cudakit made from it in this process
};

/// A non-owning view of a memory pool (cudakit never creates or destroys pools): the
/// device's default pool, which DeviceBuffer allocates from, or a raw one. Calls that
/// need the pool throw EmptyHandle on an empty ref and DriverError when the driver fails.
class CUDAKIT_API MemoryPoolRef {
 public:
  /// Device `device`'s default memory pool (cuDeviceGetDefaultMemPool; cached).
  static MemoryPoolRef device_default(Device device);

  /// An empty ref.
  MemoryPoolRef() = default;
  /// A view of a raw pool of device `device`.
  MemoryPoolRef(CUmemoryPool handle, int device) noexcept : handle_(handle), device_(device) {}

  /// The driver's handle (null when empty), the device's ordinal (-1 when empty), and
  /// whether the ref has a pool.
  CUmemoryPool handle() const noexcept { return handle_; }
  int device_ordinal() const noexcept { return device_; }
  explicit operator bool() const noexcept { return handle_ != nullptr; }

  /// Bytes of unused memory the pool keeps at a synchronize (see above).
  std::uint64_t release_threshold() const;
  /// Sets the release threshold; on the default pool it also stops cudakit from setting
  /// its own default (when called before the device's first pool allocation).
  void set_release_threshold(std::uint64_t bytes) const;

  /// Hands unused memory back to the OS until the pool holds at most `bytes_to_keep`
  /// (memory in use is never released). trim_to(0) releases everything unused.
  void trim_to(std::size_t bytes_to_keep) const;

  /// Reserved and used memory, now and at their peaks, and cudakit's allocations.
  PoolUsage usage() const;
  std::uint64_t reserved_bytes() const { return usage().reserved_bytes; }
  std::uint64_t used_bytes() const { return usage().used_bytes; }
  /// Starts the peak figures (reserved_high_bytes, used_high_bytes) again from now.
  void reset_peaks() const;

  /// Same handle.
  friend bool operator==(const MemoryPoolRef& a, const MemoryPoolRef& b) noexcept { return a.handle_ == b.handle_; }

 private:
  std::uint64_t attribute(CUmemPool_attribute attribute, const char* what) const;
  void set_attribute(CUmemPool_attribute attribute, std::uint64_t value) const;
  CUmemoryPool handle_ = nullptr;
  int device_ = -1;
};

/// Device `device`'s default memory pool.
inline MemoryPoolRef default_memory_pool(Device device) { return MemoryPoolRef::device_default(device); }

namespace detail {
/// Applies cudakit's release-threshold default to the device's default pool, once per
/// device (see above). Cheap after the first call: one relaxed load.
CUDAKIT_API void configure_default_pool(int device);
/// Trims the device's default pool to zero, ignoring errors: the out-of-memory path.
CUDAKIT_API void trim_default_pool_quietly(int device) noexcept;
/// The memory the device's default pool reserves, or OutOfMemory::no_pool's value
/// (SIZE_MAX) when it cannot be read: for the out-of-memory error's message.
CUDAKIT_API std::size_t default_pool_reserve_quietly(int device) noexcept;
}  // namespace detail

}  // namespace cudakit
