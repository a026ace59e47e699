// Internal: the page-locked host ranges cudakit made (PinnedBuffer) or registered
// (HostRegistration). A copy from or to a host range looks it up here to decide whether
// the range can go to the driver directly (page-locked) or through staging (pageable),
// without asking the driver (no cuPointerGetAttribute on the copy path). Memory that
// code outside cudakit page-locked is not known here: it is staged, which is correct,
// only slower.
#pragma once

#include <cstddef>

namespace cudakit::detail {

struct Allocation;

/// Adds [begin, begin + bytes) with the allocation that tracks it.
void register_host_range(const void* begin, std::size_t bytes, Allocation* allocation);
/// Removes the range that starts at `begin` (nothing if there is none).
void unregister_host_range(const void* begin) noexcept;
/// The allocation of the known page-locked range holding all of [p, p + bytes), or null
/// when the bytes are pageable (or only partly page-locked). Lock-free when no range is
/// known; otherwise one shared lock and a map lookup.
Allocation* find_host_range(const void* p, std::size_t bytes) noexcept;

}  // namespace cudakit::detail
