// Staging buffers: the page-locked host memory behind copies from and to pageable memory
// (a std::vector, a std::array, any range that is not a PinnedBuffer or registered).
//
// The device's DMA engines read and write only page-locked memory. A pageable upload is
// copied on the calling thread into a staging buffer, which the device then reads; a
// pageable download lands in one and is copied out (copy.hpp). cudakit keeps these
// buffers per device: up to 16 of 1 MiB, made on first need and kept for reuse. Each
// thread keeps the buffer it used last, so a thread that serves requests in a loop
// reuses one buffer without a lock. Making a buffer page-locks host memory, which costs
// far more than a copy of that size (`cudakit bench --filter idiom-phases` measures it):
//
//   cudakit::reserve_staging(device, std::size_t(4) << 20);  // at start-up: no first-request cost
//   ...
//   cudakit::release_idle_staging(device);                   // give the memory back
//
// Thread safety: every function may be called from any thread, also while copies run.
#pragma once

#include <cstddef>

#include "cudakit/device.hpp"
#include "cudakit/export.hpp"

namespace cudakit {

/// How many staging buffers a device has, and their bytes in all.
struct CUDAKIT_API StagingUsage {
  int buffers = 0;
  std::size_t bytes = 0;
};

/// The staging buffers `device` has now.
CUDAKIT_API StagingUsage staging_usage(const Device& device);

/// Makes staging buffers for `device` now, until they hold at least `bytes` (whole
/// buffers, at most the pool's limit), so that later pageable copies do not wait for
/// page-locking. Throws OutOfMemory when not even one buffer could be page-locked, and
/// DriverError when the driver fails.
CUDAKIT_API void reserve_staging(const Device& device, std::size_t bytes);

/// Frees the staging buffers of `device` that no copy uses now (page-locked memory goes
/// back to the system); returns how many bytes. The next pageable copy makes a new one.
CUDAKIT_API std::size_t release_idle_staging(const Device& device);

}  // namespace cudakit
