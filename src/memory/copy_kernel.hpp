// Internal: the copy kernel, one launch that copies many small regions of memory the
// device can address (device memory, managed memory, page-locked host memory made by
// cuMemHostAlloc, which unified addressing maps into the device's address space).
//
// The table of regions travels in the launch's parameters (a __grid_constant__ struct of
// up to copy_kernel_regions entries, about 31 KB of the 32 KB a launch may carry), so a
// launch needs no staging memory, no upload before it, and is captured into a graph like
// any kernel. Each block copies one region at a time, in 16-byte words where the region
// allows, byte by byte where not.
//
// The kernel is compiled with NVRTC on its first use on a device (about a hundred
// milliseconds, once per device and process) and kept for the process's life, like the
// library's context retain (DESIGN 8.1). Without NVRTC it is unavailable, and callers use
// the driver's copies instead.
#pragma once

#include <cuda.h>

#include <cstddef>

#include "cudakit/stream.hpp"

namespace cudakit::detail {

/// Regions one launch copies; more are split over several launches.
inline constexpr std::size_t copy_kernel_regions = 1300;

/// Whether the copy kernel can run on `device`: compiles and loads it on the first call
/// (thread-safe), and remembers a failure (no NVRTC, an architecture NVRTC does not know).
bool copy_kernel_available(int device) noexcept;

/// Copies `count` regions on `stream` (whose device must have the kernel available), each
/// `sizes[i]` bytes from `sources[i]` to `destinations[i]`, in launches of at most
/// copy_kernel_regions regions. Throws DriverError when a launch fails.
void launch_copy_kernel(StreamRef stream, const CUdeviceptr* destinations, const CUdeviceptr* sources,
                        const std::size_t* sizes, std::size_t count);

}  // namespace cudakit::detail
