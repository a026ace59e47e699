// The descriptor of memory or an event shared with another process: what travels over
// the socket beside the file descriptor (ipc_channel.hpp).
//
// A descriptor is 120 bytes, little-endian, and says what the receiver is about to
// import: its kind, the bytes it covers, the device it lives on (by UUID, since device
// ordinals differ between processes that see different CUDA_VISIBLE_DEVICES), and the
// driver's own bytes for the kind (a pool pointer's export data, an event's IPC handle).
//
//   offset  bytes  field
//        0      8  magic "cudakit\x1f"
//        8      2  version (1)
//       10      2  kind (1 memory pool, 2 pool allocation, 3 virtual-memory allocation,
//                  4 event, 5 allocation ledger)
//       12      4  ledger_slot: a pool allocation's slot in its pool's ledger (0 otherwise)
//       16      8  bytes: what the importer may use (0 for a pool and an event)
//       24      8  allocation_bytes: the physical allocation (virtual memory: a multiple
//                  of the granularity, at least `bytes`; a pool allocation: `bytes`)
//       32     16  device UUID
//       48      4  payload_bytes (64 for a pool allocation and an event, 0 otherwise)
//
//       52      4  ledger_generation: a pool allocation's generation there (never 0 for
//                  one; 0 otherwise)
//       56     64  payload (unused bytes 0)
//
// A memory pool and a virtual-memory allocation come with one file descriptor (the
// driver's shareable handle, passed with SCM_RIGHTS), and so does a pool's allocation
// ledger (a sealed memfd that says which of its allocations are live: the driver imports
// freed ones); a pool allocation and an event come with none: their payload names them,
// and only a process that holds the pool (or shares the device) can use it.
//
// parse_ipc_descriptor() is pure host code, without a GPU or a driver: it checks every
// field against the rules above and refuses the first one broken with IpcError
// (IpcFailure::malformed) naming the field. It is the only code that reads a descriptor's
// bytes, and a fuzz target runs it. A descriptor that parses is still not trusted: the
// import checks it against what the driver says about the memory (ipc_import.hpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "cudakit/export.hpp"
#include "cudakit/ipc_error.hpp"

namespace cudakit {

/// What a descriptor shares.
enum class IpcKind : std::uint16_t {
  memory_pool = 1,      ///< a shareable memory pool (cuMemPoolExportToShareableHandle)
  pool_allocation = 2,  ///< an allocation of a shareable pool (cuMemPoolExportPointer)
  virtual_memory = 3,   ///< a physical allocation made with cuMemCreate
  event = 4,            ///< an interprocess event (cuIpcGetEventHandle)
  allocation_ledger = 5,  ///< which allocations of a shareable pool are live (sent with the pool)
};

/// "pool allocation" for IpcKind::pool_allocation; "unknown kind" for others.
CUDAKIT_API const char* ipc_kind_name(IpcKind kind) noexcept;

/// A descriptor's fields (see above).
struct CUDAKIT_API IpcDescriptor {
  /// The size of an encoded descriptor, and of its payload.
  static constexpr std::size_t encoded_bytes = 120;
  static constexpr std::size_t payload_capacity = 64;
  /// The version this cudakit writes and reads.
  static constexpr std::uint16_t current_version = 1;

  IpcKind kind = IpcKind::pool_allocation;
  std::uint64_t bytes = 0;
  std::uint64_t allocation_bytes = 0;
  std::array<std::uint8_t, 16> device_uuid{};
  std::uint32_t payload_bytes = 0;
  std::array<std::uint8_t, payload_capacity> payload{};
  /// A pool allocation's entry in its pool's allocation ledger (0 for the other kinds).
  std::uint32_t ledger_slot = 0;
  std::uint32_t ledger_generation = 0;

  /// Whether the kind comes with a file descriptor (a pool, virtual memory and a ledger do).
  bool carries_file_descriptor() const noexcept {
    return kind == IpcKind::memory_pool || kind == IpcKind::virtual_memory || kind == IpcKind::allocation_ledger;
  }
  /// Whether the kind states a size (the allocations do; a pool and an event do not).
  bool states_size() const noexcept { return kind == IpcKind::pool_allocation || kind == IpcKind::virtual_memory; }
};

/// The 120 bytes of `descriptor` (no check: the parser checks what arrives).
CUDAKIT_API std::array<std::byte, IpcDescriptor::encoded_bytes> encode_ipc_descriptor(const IpcDescriptor& descriptor);

/// Reads a descriptor from bytes that came from another process. Throws IpcError
/// (IpcFailure::malformed) naming the first rule `bytes` breaks: its length, the magic,
/// the version, the kind, a ledger entry (missing on a pool allocation, present on another
/// kind), a size (zero, past 2^48, an allocation
/// smaller than its use), a payload length or a payload byte past it.
CUDAKIT_API IpcDescriptor parse_ipc_descriptor(std::span<const std::byte> bytes);

}  // namespace cudakit
