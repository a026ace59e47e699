// Internal: the virtual-memory primitives (cuMem* address ranges and physical chunks),
// shared by growable buffers and by memory that crosses process boundaries.
//
// A virtual-memory allocation is three things the driver keeps apart: an address range
// (cuMemAddressReserve), physical memory (cuMemCreate, one handle per chunk), and the
// mapping of one into the other (cuMemMap) together with the devices allowed to use it
// (cuMemSetAccess; a mapping nobody may access faults on first use). Sizes and addresses
// are multiples of the allocation granularity (cuMemGetAllocationGranularity).
//
// Each function here does one step or undoes it; none keeps state. The functions that
// build throw the error family's exceptions (OutOfMemory when the device has no physical
// memory left); the ones that take apart return the driver's status, for destructors to
// park (DESIGN 2).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <span>

namespace cudakit::detail::vmm {

/// Whether `device` supports virtual memory management (a device attribute, cached).
bool supported(int device);

/// The properties of a physical chunk on `device`: pinned device memory, with the
/// requested shareable handle types (CU_MEM_HANDLE_TYPE_NONE for process-local memory).
CUmemAllocationProp chunk_properties(int device, CUmemAllocationHandleType shareable = CU_MEM_HANDLE_TYPE_NONE);

/// The granularity chunk sizes and reservations are rounded to on `device`: the driver's
/// recommended one (a multiple of the minimum), asked once per device and handle type.
std::size_t granularity(int device, CUmemAllocationHandleType shareable = CU_MEM_HANDLE_TYPE_NONE);

/// `bytes` rounded up to a multiple of `granularity`; InvalidArgument on overflow.
std::size_t round_up(std::size_t bytes, std::size_t granularity);

/// Reserves `bytes` of addresses (a multiple of the granularity) for `device`'s memory.
CUdeviceptr reserve(int device, std::size_t bytes, std::size_t alignment);
/// Gives a reservation back; every mapping inside it must be gone.
CUresult free_reservation(CUdeviceptr address, std::size_t bytes) noexcept;

/// Creates `bytes` of physical memory with `properties`. OutOfMemory when the device has
/// too little left, DriverError otherwise.
CUmemGenericAllocationHandle create_chunk(int device, std::size_t bytes, const CUmemAllocationProp& properties);

/// Maps `handle` (`bytes` of it, from its start) at `address` inside a reservation and
/// lets `device` and each of `peers` read and write it. All or nothing: on failure the
/// mapping is undone and the error thrown; the handle stays the caller's.
void map_chunk(int device, CUdeviceptr address, std::size_t bytes, CUmemGenericAllocationHandle handle,
               std::span<const int> peers);

/// Lets `devices` read and write the mapped range [address, address + bytes).
void grant_access(CUdeviceptr address, std::size_t bytes, std::span<const int> devices, int owner_device);

/// A new physical chunk mapped at `address` (create_chunk, then map_chunk); on failure
/// nothing is left behind.
CUmemGenericAllocationHandle map_new_chunk(int device, CUdeviceptr address, std::size_t bytes,
                                           std::span<const int> peers,
                                           CUmemAllocationHandleType shareable = CU_MEM_HANDLE_TYPE_NONE);

/// Unmaps a chunk's range and releases its handle. The caller has made sure no work
/// uses the range any more. Returns the first failure (the release is tried anyway).
struct TeardownResult {
  CUresult code = CUDA_SUCCESS;
  const char* call = nullptr;  // the entry that failed, when one did
};
TeardownResult unmap_and_release(CUdeviceptr address, std::size_t bytes, CUmemGenericAllocationHandle handle) noexcept;
/// Releases a chunk's handle (the driver keeps the memory until its last mapping goes).
CUresult release_chunk(CUmemGenericAllocationHandle handle) noexcept;

}  // namespace cudakit::detail::vmm
