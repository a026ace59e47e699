// Peer access between two devices: lets one device's kernels and copy
// engines read and write another device's memory directly over NVLink or PCIe.
//
// Copies between buffers of two devices enable it on demand (copy.hpp), once per pair of
// devices, where the hardware allows it; without it, the driver still performs peer
// copies, staged through host memory. Call enable_peer_access() for kernels that
// dereference another device's pointers.
//
// Enabling is one-way (from -> to) and lasts as long as the process (cudakit's primary
// contexts live that long). A pair already enabled, by cudakit or by anyone else
// (CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED), counts as success.
//
// Thread safety: any thread, any time.
#pragma once

#include "cudakit/export.hpp"
#include "cudakit/device.hpp"

namespace cudakit {

/// Lets device `from` access device `to`'s memory. InvalidArgument when the two are the
/// same device or when `from` cannot access `to` (Device::can_access_peer is false).
/// Costs one relaxed load after the first call for a pair.
CUDAKIT_API void enable_peer_access(Device from, Device to);

/// Whether enable_peer_access(from, to) succeeded in this process, or copies between the
/// two enabled it (one atomic load; false for the same device).
CUDAKIT_API bool peer_access_enabled(int from, int to) noexcept;

namespace detail {
/// Enables peer access both ways between two devices where possible, once per pair;
/// quietly leaves pairs that cannot be enabled to the driver's staged peer copies.
CUDAKIT_API void enable_peer_access_for_copies(int a, int b);
}  // namespace detail

}  // namespace cudakit
