// A fake NCCL for unit tests, built the way the fake driver is (fake_driver.hpp): a table
// of entries installed in place of libnccl.so.2, running on the fake driver without a GPU.
//
// - Communicators of one id form a clique; they are ready once every rank has joined
//   (non-blocking: ncclCommInitRankConfig says ncclInProgress, ncclCommGetAsyncError
//   says so until then). A rank that never joins leaves the others in progress forever.
// - Collectives run on the host when the last rank of the clique calls them (fake device
//   memory is host memory), in the order each rank calls them; each rank's reads and
//   writes go to the fake driver's ordering model on its own stream, so a missing
//   cross-stream wait is a hazard. On a capturing stream a collective becomes a node of
//   the capture's graph, and each replay runs it again.
// - Every call is counted and logged, and faults are scripted ("fail the 2nd ncclAllReduce
//   with ncclUnhandledCudaError"). Communicators and registrations go through a ledger:
//   a leak, a double destroy, or a call on a destroyed communicator is a problem.
// - Scripts for the waits: calls may stay in progress for a number of polls, collectives
//   may stall their streams until the communicator is aborted, and a communicator may be
//   given an asynchronous error.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "libraries/nccl_api.hpp"

namespace cudakit::fake {

using NcclEntry = nccl::raw::EntryId;

struct NcclComm;
struct NcclClique;

class Nccl {
 public:
  Nccl();
  /// Uninstalls (the next NCCL use searches for the real library again).
  ~Nccl();
  Nccl(const Nccl&) = delete;
  Nccl& operator=(const Nccl&) = delete;

  /// The fake in use (one at a time).
  static Nccl& current();

  // ---- configuration (before install) ----
  int version = 22809;
  /// Entries to leave out of the table (as if NCCL were older).
  std::set<NcclEntry> missing;
  /// Installs this fake into cudakit's NCCL table.
  void install();

  // ---- scripts ----
  /// Calls that may be in progress (init, split, finalize, collectives, group end) say
  /// ncclInProgress, and ncclCommGetAsyncError says so this many more times.
  int progress_polls = 0;
  /// Collectives stall their streams (fake::Driver::stalled) until their communicator is
  /// aborted: a peer that never calls them.
  bool stall_collectives = false;
  /// Fails the nth call (1-based; 0: every call from now on) of `entry` with `result`.
  void fail(NcclEntry entry, int nth, ncclResult_t result);
  void clear_faults();
  /// From now on ncclCommGetAsyncError of `comm` says `result`.
  void set_async_error(ncclComm_t comm, ncclResult_t result);
  /// Calls `hook` on the calling thread as each entry begins, before the entry's own work:
  /// a test pauses a call there (with cudakit's call lock held) to order another thread's
  /// calls around it. An empty function removes it.
  void on_entry(std::function<void(NcclEntry)> hook);

  // ---- observation ----
  int calls(NcclEntry entry) const;
  std::vector<NcclEntry> log() const;
  void clear_log();
  std::size_t live_communicators() const;
  std::size_t live_registrations() const;
  int aborts() const;
  /// Leaks (live communicators or registrations), double destroys, calls on destroyed
  /// communicators, mismatched collectives. Empty when clean.
  std::vector<std::string> ledger_problems() const;
  /// Every call that returned a scripted fault, in order.
  std::vector<std::pair<NcclEntry, ncclResult_t>> failed_calls() const;
  /// The calling thread's current context at each collective call, in order.
  std::vector<CUcontext> collective_contexts() const;

  // ---- for the entries (fake_nccl.cpp) ----
  mutable std::recursive_mutex mutex;
  struct Fault {
    NcclEntry entry;
    int nth;
    ncclResult_t result;
  };
  std::vector<Fault> faults;
  std::vector<NcclEntry> call_log;
  std::vector<std::pair<NcclEntry, ncclResult_t>> failures;
  std::vector<CUcontext> contexts_at_collectives;
  int call_counts[nccl::raw::entry_count] = {};
  std::set<NcclComm*> comms;  // live
  std::map<const void*, NcclComm*> registrations;  // handle -> its communicator (which takes it along when it goes)
  std::map<std::string, NcclClique*> cliques;  // by unique id bytes
  std::vector<std::string> problems;
  std::function<void(NcclEntry)> entry_hook;
  std::string last_error;
  int abort_count = 0;
  std::uint64_t next_id = 1;
};

}  // namespace cudakit::fake
