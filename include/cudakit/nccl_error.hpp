// The errors of cudakit's NCCL layer (nccl.hpp): NCCL missing, an NCCL call that failed,
// a deadline that passed, a rendezvous that could not gather every rank.
//
// An NcclError names the call, the rank and NCCL's own words, e.g.
//   ncclAllReduce on rank 1 of 2 (device 1): ncclUnhandledCudaError: unhandled cuda error
//   (run with NCCL_DEBUG=INFO for details); NCCL says: Cuda failure 'out of memory'
// The header needs no NCCL header: results are plain ints with the values of
// ncclResult_t (0 success, 1 unhandled CUDA error, 2 system, 3 internal, 4 invalid
// argument, 5 invalid usage, 6 remote, 7 in progress).
#pragma once

#include <string>
#include <vector>

#include "cudakit/error.hpp"
#include "cudakit/export.hpp"

namespace cudakit::nccl {

/// NCCL cannot be used: no libnccl.so.2 was found, it is older than 2.18, or it lacks an
/// entry a feature needs. The message names every place tried (or the missing entry).
class CUDAKIT_API NcclUnavailable : public Error {
 public:
  /// what() is the whole message.
  using Error::Error;
  ErrorKind kind() const noexcept override { return ErrorKind::nccl_unavailable; }
};

/// An NCCL call failed, or a communicator reported an asynchronous error.
class CUDAKIT_API NcclError : public Error {
 public:
  /// `operation` is the NCCL call ("ncclAllReduce"); `rank` and `ranks` the
  /// communicator's (-1 when it has none yet); `last_error` ncclGetLastError's text.
  NcclError(int result, std::string operation, int rank, int ranks, int device, std::string last_error,
            std::string message)
      : Error(std::move(message)), result_(result), operation_(std::move(operation)), rank_(rank), ranks_(ranks),
        device_(device), last_error_(std::move(last_error)) {}
  /// NCCL's result (an ncclResult_t value).
  int result() const noexcept { return result_; }
  /// "ncclSystemError".
  std::string result_name() const;
  /// The call that failed, "ncclAllReduce", or the wait that ended ("waiting for ...").
  const std::string& operation() const noexcept { return operation_; }
  /// The communicator's rank and size; -1 before it had them.
  int rank() const noexcept { return rank_; }
  int ranks() const noexcept { return ranks_; }
  /// The communicator's device ordinal; -1 when unknown.
  int device() const noexcept { return device_; }
  /// What ncclGetLastError said (may be empty).
  const std::string& last_error() const noexcept { return last_error_; }
  ErrorKind kind() const noexcept override { return ErrorKind::nccl; }

 private:
  int result_;
  std::string operation_;
  int rank_, ranks_, device_;
  std::string last_error_;
};

/// A deadline passed: a communicator's initialisation, a call's progress or its work
/// did not finish in time. The communicator was aborted (ncclCommAbort) and every later
/// use of it throws this error again. result() is ncclInProgress (7) for a call that was
/// still in progress.
class CUDAKIT_API NcclTimeout : public NcclError {
 public:
  /// As NcclError.
  using NcclError::NcclError;
  ErrorKind kind() const noexcept override { return ErrorKind::nccl_timeout; }
};

/// A rendezvous (bootstrap.hpp) could not gather every rank in time, or a rank could not
/// reach rank 0. missing_ranks() lists the ranks that did not arrive, where rank 0 knew.
class CUDAKIT_API BootstrapError : public Error {
 public:
  /// `missing` are the ranks that did not arrive (may be empty).
  BootstrapError(std::string message, std::vector<int> missing = {})
      : Error(std::move(message)), missing_(std::move(missing)) {}
  /// The ranks that did not arrive, ascending; empty when unknown to this rank.
  const std::vector<int>& missing_ranks() const noexcept { return missing_; }
  ErrorKind kind() const noexcept override { return ErrorKind::bootstrap; }

 private:
  std::vector<int> missing_;
};

/// "ncclInvalidUsage" for 5; "ncclResult 42" for a value NCCL does not define.
CUDAKIT_API std::string result_name(int result);

}  // namespace cudakit::nccl
