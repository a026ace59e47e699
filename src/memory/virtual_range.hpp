// Internal: the reservation and physical chunks behind a GrowableBuffer
// (AllocationKind::virtual_range), owned by its allocation.
//
// The chunks in use cover [base, base + mapped) without a gap, in address order. Chunks a
// shrink took from the end while someone besides the buffer still held the allocation (a
// graph that captured the range, a capture in progress, a release not yet run) are
// retired, not unmapped: they stay mapped, right after the chunks in use, until the
// allocation goes or its owner holds it alone again. A growth adopts retired chunks first,
// since their addresses are taken.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <vector>

#include "cudakit/detail/allocation.hpp"

namespace cudakit::detail {

struct VirtualChunk {
  CUdeviceptr address = 0;
  std::size_t bytes = 0;
  CUmemGenericAllocationHandle handle = 0;
};

struct VirtualRange {
  CUdeviceptr base = 0;
  std::size_t reserved = 0;     // bytes of addresses, a multiple of the granularity
  std::size_t granularity = 0;  // of chunk sizes and addresses
  std::size_t mapped = 0;       // bytes the chunks in use cover
  std::vector<VirtualChunk> chunks;   // in use, in address order
  std::vector<VirtualChunk> retired;  // mapped after them, in address order, kept for others
  std::vector<int> peers;             // other devices given access to every chunk
};

/// Unmaps and releases every chunk, then gives the reservation back, parking each
/// failure (a destructor's path: the allocation's last holder let go, every stream that
/// used it finished). Deletes `range`.
void release_virtual_range(VirtualRange* range, int device) noexcept;

}  // namespace cudakit::detail
