// Internal: which allocations of a shareable pool are live, in memory the importers map.
//
// The driver imports the export data of a pool allocation that its producer has already
// freed (on the H200 cuMemPoolImportPointer succeeded for an allocation freed and trimmed
// away), so a stale descriptor cannot be told from the driver's answer. The producer's
// pool keeps a ledger instead: a sealed memfd of `slots` 32-bit entries, one per live
// allocation, holding that allocation's generation (never 0) while it lives and 0 once
// it is freed. An allocation's descriptor names its slot and generation; an importer maps
// the ledger read-only (it travels with the pool, ShareablePool::send) and refuses a
// descriptor whose slot no longer holds its generation.
//
// What this catches: a descriptor sent after its allocation was freed (or reused by a new
// allocation in the same slot). What it cannot: a free racing the import itself, which
// the sharing protocol excludes (the producer frees only after its consumers released
// their imports, shareable_pool.hpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "cudakit/ipc_channel.hpp"

namespace cudakit::detail {

class AllocationLedger {
 public:
  /// Slots in a ledger: live allocations a pool can share at once (1 MiB of memfd, whose
  /// pages are backed only as slots are first used).
  static constexpr std::uint32_t slots = 1u << 18;
  static constexpr std::size_t file_bytes = std::size_t(slots) * sizeof(std::uint32_t);

  /// A live allocation's place in the ledger.
  struct Entry {
    std::uint32_t slot = 0;
    std::uint32_t generation = 0;  // 0: no entry
  };

  /// The producer's ledger: a new sealed memfd, mapped read-write. Throws IpcError
  /// (system) when the system refuses one.
  static AllocationLedger create();
  /// An importer's view of a ledger that arrived as `file`: checked to be a memfd of
  /// file_bytes sealed against shrinking, mapped read-only. Throws IpcError (malformed)
  /// for any other file.
  static AllocationLedger open(FileDescriptor file);

  AllocationLedger(AllocationLedger&&) noexcept;
  AllocationLedger& operator=(AllocationLedger&&) = delete;
  ~AllocationLedger();

  /// A new copy of the ledger's file descriptor, to send.
  FileDescriptor file() const;

  /// Producer: records a new live allocation; no entry (generation 0) when every slot is
  /// taken (its descriptor then cannot be made).
  Entry enter();
  /// Producer: the allocation of `entry` is freed from now on.
  void leave(Entry entry) noexcept;
  /// Importer: whether the allocation of `entry` is live.
  bool live(Entry entry) const noexcept;

 private:
  AllocationLedger(FileDescriptor file, std::atomic<std::uint32_t>* table, bool writable) noexcept
      : file_(std::move(file)), table_(table), writable_(writable) {}

  FileDescriptor file_;
  std::atomic<std::uint32_t>* table_ = nullptr;  // the mapping, `slots` entries
  bool writable_ = false;
  // Producer only, under mutex_: slots given back, the first never used, and each slot's
  // last generation (so a reused slot never repeats one).
  std::mutex mutex_;
  std::vector<std::uint32_t> free_;
  std::uint32_t next_unused_ = 0;
  std::vector<std::uint32_t> generations_;
};

}  // namespace cudakit::detail
