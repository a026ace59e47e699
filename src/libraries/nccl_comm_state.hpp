// Internal: the state behind a Communicator (nccl_communicator.hpp), shared by its owner
// and by every graph that captured its collectives.
//
// Note [NCCL calls and the watchdog]. Every NCCL call on a communicator is made with
// `call_lock` held (recursive: a group holds it across its calls). The watchdog
// (nccl_watchdog.cpp) only try-locks it, so it never waits for a user's call, and it never
// aborts a communicator in the middle of one: a call in progress has its own deadline.
// Once `ended` is set, `end_error` is the error every later use throws, and `comm` is
// null when the communicator was aborted.
//
// Note [Which collectives are watched]. A collective hangs when a peer never calls it, or
// calls collectives in another order: the watchdog sees that as an event recorded after
// the collective that does not complete in time, one event per stream, re-recorded after
// every collective (one cuEventRecord each, about a quarter of a microsecond on an H200:
// the "event record" benchmark). A communicator of one rank has no peer to wait for: its
// collectives run as the rank's own kernels and copies and complete like them, so they are
// not watched and cost only the NCCL call. Its asynchronous errors are still polled.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cudakit/nccl_communicator.hpp"
#include "cudakit/stream.hpp"
#include "libraries/nccl_api.hpp"
#include "libraries/nccl_call_lock.hpp"
#include "libraries/nccl_declarations.hpp"

namespace cudakit::nccl::detail {

using Clock = std::chrono::steady_clock;

/// The last collective submitted to one stream: an event recorded after it, and when.
struct StreamWatch {
  CUstream stream = nullptr;
  CUevent event = nullptr;
  Clock::time_point submitted{};
  bool pending = false;
};

struct CommState {
  ncclComm_t comm = nullptr;
  // NCCL's entries, looked up once when the state is made: a collective calls through
  // this without asking the loader again.
  const raw::Api* api = nullptr;
  int rank = -1;
  int ranks = 0;
  int device = -1;
  // The fields every call reads come first, together, within 64 bytes: a one-rank
  // collective is host-bound, and each cold cache line on its path shows in its bandwidth.
  std::atomic<bool> ended{false};
  // The library's primary context of `device` (library_context), kept so that each call
  // makes it current without looking it up.
  CUcontext context = nullptr;
  CallLock call_lock;  // Note [NCCL calls and the watchdog] (nccl_call_lock.hpp)

  Options options;
  std::shared_ptr<const NcclError> end_error;  // set once, under call_lock, before `ended`

  std::mutex watch_mutex;
  std::vector<StreamWatch> watches;

  CommState() = default;
  CommState(const CommState&) = delete;
  CommState& operator=(const CommState&) = delete;
  /// Finalizes and destroys the NCCL communicator (or nothing, once aborted); failures
  /// are parked.
  ~CommState();

  /// A Communicator owning `state` (the constructor is private to it).
  static Communicator adopt(std::shared_ptr<CommState> state) { return Communicator(std::move(state)); }

  /// Throws end_error when the communicator ended.
  void throw_if_ended() const {
    if (ended.load(std::memory_order_acquire)) [[unlikely]]
      throw_ended();
  }
  [[noreturn]] void throw_ended() const;

  /// "rank 1 of 2 (device 1)".
  std::string words() const;
  /// An NcclError (or NcclTimeout) for `result` of `operation`, with ncclGetLastError's text.
  NcclError error(ncclResult_t result, const std::string& operation, const std::string& detail = {}) const;

  /// Checks a call's result; waits for ncclInProgress to resolve (within the deadline).
  /// Throws the error; on a deadline (or an asynchronous error) the communicator ends.
  void check_call(ncclResult_t result, const char* operation);
  /// Polls ncclCommGetAsyncError until it is no longer in progress or the deadline passes.
  void wait_for_progress(const char* operation, Clock::time_point deadline);

  /// Keeps `error`, aborts the communicator (call_lock held), parks a copy when `park`.
  void end(std::shared_ptr<const NcclError> error, bool park) noexcept;

  /// Whether collectives are watched (Note [Which collectives are watched]).
  bool needs_watch() const noexcept { return ranks > 1; }
  /// Records the stream's watch event after a collective (not inside a capture).
  void watch(StreamRef stream);
  /// Finalize, wait, destroy: what destroy() and the destructor do; throws.
  void finalize_and_destroy();
};

/// The deadline `options.timeout` from now.
inline Clock::time_point deadline_after(const Options& options) { return Clock::now() + options.timeout; }

/// "2 s", "150 ms".
std::string duration_words(std::chrono::milliseconds d);

/// The thread-local group in progress, if any: collectives note their communicator and
/// stream there, so that the group's end waits for their progress and watches them.
struct GroupCall {
  std::shared_ptr<CommState> state;
  StreamRef stream;       // the stream of a collective (watched after the group); empty otherwise
  bool creating = false;  // a communicator NCCL makes at the group's end (a split)
};
/// The depth of nccl::group scopes open on this thread (nccl_group.cpp). Constant-
/// initialized, so that reading it is a plain thread-local load on every collective.
extern thread_local constinit int open_group_depth;
/// True when a group is open on this thread; `note` adds to it.
inline bool in_group() noexcept { return open_group_depth > 0; }
void note_in_group(GroupCall call);

/// Waits for communicators NCCL is still making (non-blocking), each within its deadline,
/// reads their rank, size and device and hands them to the watchdog; on any failure ends
/// them all and throws.
void finish_creation(const std::vector<std::shared_ptr<CommState>>& states, const char* operation);

/// Starts the watchdog if needed and adds `state` to it; remove before destroying.
void watch_communicator(CommState* state);
void unwatch_communicator(CommState* state) noexcept;

}  // namespace cudakit::nccl::detail
