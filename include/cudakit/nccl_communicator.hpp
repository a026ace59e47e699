// NCCL communicators: a group of ranks, one GPU each, that run collectives together.
//
//   // One process over every GPU: rank i on device i.
//   std::vector<nccl::Communicator> comms = nccl::Communicator::create_all(Device::all());
//
//   // One rank of a job of several processes (or hosts): every rank passes the same id,
//   // which rank 0 made and the others received (bootstrap.hpp: a shared file, a TCP
//   // rendezvous at rank 0, or MPI through nccl_mpi.hpp).
//   nccl::Communicator comm(id, ranks, rank, Device::get(local_gpu));
//
// NCCL itself is opened at run time on first use (libnccl.so.2; CUDAKIT_LIBNCCL names
// another file); nothing else in cudakit needs it. NVLink multicast stays off: cudakit
// sets NCCL_NVLS_ENABLE=0 before NCCL starts, unless the user set it.
//
// No call hangs forever. Every communicator is created non-blocking, and each wait has a
// deadline (Options::timeout):
//   - creating and splitting wait for every rank to join;
//   - a call NCCL leaves in progress waits for it to proceed;
//   - work submitted to a stream is watched: a watchdog thread polls each communicator's
//     asynchronous error (ncclCommGetAsyncError) and whether the last collective
//     submitted to each stream has completed;
//   - synchronize(stream) waits for a stream's work the same way.
// When a deadline passes or NCCL reports an error, the communicator is aborted
// (ncclCommAbort, which ends its kernels, so waits on its streams return) and the error
// is kept: every later use of the communicator throws it (NcclTimeout or NcclError, with
// the rank and the operation), and the watchdog parks it too (error.hpp:
// drain_parked_errors). Buffers written by aborted collectives hold undefined values.
//
// Lifetime: a communicator is move-only. A graph that captured its collectives keeps it
// alive (DESIGN 4); the NCCL communicator is finalized and destroyed when the last holder
// lets go (destroy() does it now and reports failures; the destructor parks them).
//
// Thread safety: NCCL's rule: one thread at a time per communicator. Communicators of
// one process over several devices are used from one thread inside nccl::group, or one
// thread each.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cudakit/device.hpp"
#include "cudakit/export.hpp"
#include "cudakit/nccl_error.hpp"
#include "cudakit/stream.hpp"

struct ncclComm;  // nccl.h's ncclComm_t is `struct ncclComm*`

namespace cudakit::nccl {

/// The version of the NCCL library cudakit uses, as NCCL encodes it (22809 for 2.28.9).
/// Loads NCCL on first use: NcclUnavailable when it cannot be found.
CUDAKIT_API int version();
/// "2.28.9".
CUDAKIT_API std::string version_string();
/// The file NCCL was loaded from (loads it; NcclUnavailable without it).
CUDAKIT_API std::string library_path();

/// The 128 opaque bytes that let every rank of a job find the others (ncclUniqueId).
struct CUDAKIT_API UniqueId {
  std::array<unsigned char, 128> bytes{};

  /// A fresh id (ncclGetUniqueId, on rank 0): NCCL opens its bootstrap listener now, so
  /// make it shortly before the ranks create their communicators.
  static UniqueId generate();
  /// 256 hex digits, for a file, an environment variable or a command line.
  std::string to_hex() const;
  /// The inverse of to_hex; InvalidArgument for anything but 256 hex digits.
  static UniqueId from_hex(std::string_view hex);
  /// Same bytes.
  friend bool operator==(const UniqueId&, const UniqueId&) = default;
};

/// How a communicator is made and how long its waits may take.
struct Options {
  /// The deadline of every wait (see above): creation, a call in progress, a stream's
  /// collectives, synchronize(). Past it the communicator is aborted.
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
  /// A name NCCL shows in its logs (ncclConfig_t::commName); empty: none.
  std::string name;
};

namespace detail {
struct CommState;
}  // namespace detail

/// One rank's communicator (see above). Move-only; empty when default-constructed,
/// moved from, or split off with no_color.
class CUDAKIT_API Communicator {
 public:
  /// The color that leaves a rank out of a split (NCCL_SPLIT_NOCOLOR).
  static constexpr int no_color = -1;

  /// An empty communicator.
  Communicator() = default;
  /// Rank `rank` of `ranks` on `device`, joining the other ranks that pass the same `id`.
  /// Waits until every rank joined (Options::timeout): NcclTimeout when one does not,
  /// NcclError when NCCL fails; InvalidArgument for a rank outside [0, ranks).
  Communicator(const UniqueId& id, int ranks, int rank, Device device, const Options& options = {});
  /// One process over several devices: rank i on devices[i] (no device twice).
  static std::vector<Communicator> create_all(const std::vector<Device>& devices, const Options& options = {});

  ~Communicator();
  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  /// A new communicator of the ranks that pass the same `color`, ordered by `key` (then
  /// by rank); every rank of this communicator must call it. `no_color` leaves this rank
  /// out: the result is empty. In one process over several devices, split every
  /// communicator inside one nccl::group.
  Communicator split(int color, int key, const Options& options = {}) const;

  /// This rank, the number of ranks, and the device.
  int rank() const;
  int size() const;
  Device device() const;
  /// The deadlines this communicator was made with.
  const Options& options() const;
  /// Whether it holds a communicator.
  explicit operator bool() const noexcept { return state_ != nullptr; }

  /// Throws the error that ended the communicator (NcclTimeout, NcclError), or the
  /// asynchronous error NCCL reports now; returns when it is healthy.
  void check() const;
  /// Waits until the work submitted to `stream` so far has completed, polling this
  /// communicator's errors; NcclTimeout (after aborting) when Options::timeout passes.
  void synchronize(StreamRef stream) const;

  /// Aborts the communicator now (ncclCommAbort): its uncompleted collectives end, and
  /// every later use throws. Never throws; does nothing on an empty one.
  void abort() noexcept;
  /// Finalizes and destroys the communicator now, reporting failures (NcclError,
  /// NcclTimeout after aborting it). InvalidArgument while a graph still holds it.
  /// The communicator is empty afterwards.
  void destroy();

  /// The NCCL handle (ncclComm_t), for calls cudakit does not wrap; null when empty.
  ncclComm* handle() const;
  /// Internal: the shared state (graphs keep it alive).
  const std::shared_ptr<detail::CommState>& state() const noexcept { return state_; }

 private:
  explicit Communicator(std::shared_ptr<detail::CommState> state) noexcept : state_(std::move(state)) {}
  friend struct detail::CommState;
  std::shared_ptr<detail::CommState> state_;
};

namespace detail {
CUDAKIT_API void group_begin();
CUDAKIT_API void group_end();
CUDAKIT_API void group_abandon() noexcept;
}  // namespace detail

/// Runs `work` inside one NCCL group (ncclGroupStart / ncclGroupEnd): the collectives and
/// sends and receives it issues run as one operation. Needed to drive several
/// communicators of one process from one thread, and to pair sends with receives. The
/// group's end waits for NCCL's progress like any call (Options::timeout). When `work`
/// throws, the group is ended all the same and the exception propagates.
template <class F>
void group(F&& work) {
  detail::group_begin();
  try {
    static_cast<F&&>(work)();
  } catch (...) {
    detail::group_abandon();
    throw;
  }
  detail::group_end();
}

}  // namespace cudakit::nccl
