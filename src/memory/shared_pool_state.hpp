// Internal: what a shareable or imported pool shares with its buffers (a buffer keeps
// its pool, DESIGN 4), and the checks every import makes (shareable_pool.cpp,
// shareable_memory.cpp, shared_event.cpp).
#pragma once

#include <cuda.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "cudakit/device.hpp"
#include "cudakit/ipc_channel.hpp"
#include "cudakit/ipc_descriptor.hpp"
#include "memory/allocation_ledger.hpp"

namespace cudakit::detail {

/// A pool made or imported by cudakit, destroyed (cuMemPoolDestroy) when the last owner
/// lets go: the pool object and every buffer of it.
struct SharedPoolState {
  CUmemoryPool pool = nullptr;
  int device = -1;
  std::array<std::uint8_t, 16> device_uuid{};
  bool imported = false;
  // A made pool's shareable handle, exported once when it is made and kept for its life:
  // the driver exports an allocation only from a pool already shared.
  FileDescriptor exported;
  // Which allocations are live: the producer's, written as it allocates and frees; an
  // importer's, mapped read-only when it came with the pool (ImportedPool::receive).
  std::optional<AllocationLedger> ledger;
  ~SharedPoolState();
};

/// Throws IpcError (wrong_kind) unless `descriptor` is of `kind`; `what` names the import.
void require_ipc_kind(const IpcDescriptor& descriptor, IpcKind kind, const char* what);
/// Throws IpcError (wrong_device) unless `descriptor` names `device` by UUID.
void require_ipc_device(const IpcDescriptor& descriptor, Device device, const char* what);
/// IpcError (stale, carrying `code`) for a handle the driver refused with `code` in
/// `call` on device `device`; `what` names the import.
[[noreturn]] void throw_stale_handle(CUresult code, const char* call, int device, const char* what);

}  // namespace cudakit::detail
