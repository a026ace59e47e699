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
// milliseconds, once per architecture and process) and kept for the process's life, like the
// library's context retain (DESIGN 8.1). Without NVRTC it is unavailable, and callers use
// the driver's copies instead.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <vector>

#include "cudakit/stream.hpp"

namespace cudakit::detail {

/// Regions one launch copies; more are split over several launches.
inline constexpr std::size_t copy_kernel_regions = 1300;

/// The largest copy for which BatchPath::automatic takes the kernel: one block copies a
/// region, so a region of a few KiB takes a few microseconds, while a large one is faster
/// on the copy engines (the H200: 1,000 copies of 4 KiB took 0.009x to 0.047x the time of
/// a loop of single copies through the kernel, 0.43x to 0.92x through cuMemcpyBatchAsync).
inline constexpr std::size_t copy_kernel_largest_automatic_region = 64 * 1024;

/// The table as the kernel declares it (its source names the same layout); the launch
/// passes it whole as the kernel's one parameter.
struct CopyRegion {
  unsigned long long destination, source, bytes;
};
struct CopyRegions {
  unsigned int count;
  unsigned int unused;
  CopyRegion regions[copy_kernel_regions];
};
static_assert(sizeof(CopyRegions) <= 32764, "a launch carries at most 32764 bytes of parameters");

/// The kernel's name in its module.
inline constexpr const char* copy_kernel_name = "cudakit_copy_regions";

/// Whether the copy kernel can run on `device`: compiles (once per architecture) and loads
/// it on the first call (thread-safe), and remembers that it cannot (no NVRTC, an
/// architecture NVRTC does not know, an image the driver cannot run). Any other driver
/// failure of the load throws DriverError (ContextPoisoned on a poisoned device), and the
/// next call tries again.
bool copy_kernel_available(int device);

/// Copies `count` regions on `stream` (whose device must have the kernel available), each
/// `sizes[i]` bytes from `sources[i]` to `destinations[i]`, in launches of at most
/// copy_kernel_regions regions. Throws DriverError when a launch fails.
void launch_copy_kernel(StreamRef stream, const CUdeviceptr* destinations, const CUdeviceptr* sources,
                        const std::size_t* sizes, std::size_t count);

/// Unit tests: the image to load instead of NVRTC's cubin (a fake driver's module image;
/// empty: compile with NVRTC again).
void set_copy_kernel_image_for_testing(std::vector<char> image);
/// Unit tests: unloads the kernel from every device and forgets it (memory_testing.hpp).
void reset_copy_kernel_for_testing();

}  // namespace cudakit::detail
