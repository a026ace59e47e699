// Internal: OutOfMemory with the numbers a person needs (bytes asked, free, total).
#pragma once

#include <cstddef>

#include "cudakit/error.hpp"

namespace cudakit::detail {

/// Device memory: free and total from cuMemGetInfo (best effort: 0 when unknown).
[[noreturn]] void throw_device_out_of_memory(const char* call, int device, std::size_t bytes);  // device_buffer.cpp
/// Device memory from a memory pool that still reserves `pool_reserved_bytes` after it
/// released its unused memory (OutOfMemory::no_pool when unknown).
[[noreturn]] void throw_pool_out_of_memory(const char* call, int device, std::size_t bytes,
                                           std::size_t pool_reserved_bytes);  // device_buffer.cpp
/// Page-locked host memory: free and total physical memory of the host.
[[noreturn]] void throw_host_out_of_memory(const char* call, const Resource& resource, std::size_t bytes);  // pinned_buffer.cpp

}  // namespace cudakit::detail
