// IpcError: sharing memory or events with another process failed, and why.
//
// Everything that arrives from another process is untrusted (docs/security.md): a peer
// may be another user, may close its socket in the middle of an exchange, or may send a
// descriptor that lies about its size, its device or its kind. Each such case is refused
// with an IpcError whose reason() says which, and whose message names the peer (its pid
// and uid where the socket knows them) and what was expected. Nothing received is kept
// on a refusal: every file descriptor that came with a refused message is closed.
#pragma once

#include <cuda.h>

#include <string>
#include <utility>

#include "cudakit/error.hpp"
#include "cudakit/export.hpp"

namespace cudakit {

/// Why an exchange with another process was refused.
enum class IpcFailure {
  peer_refused,         ///< the peer's user is not one the policy allows (SO_PEERCRED)
  peer_closed,          ///< the peer closed the connection before the exchange ended
  timed_out,            ///< nothing arrived before the deadline
  malformed,            ///< the bytes are not a descriptor this cudakit reads
  wrong_kind,           ///< a valid descriptor of another kind than the one asked for
  wrong_size,           ///< the memory is not the size the descriptor or the caller says
  wrong_device,         ///< the memory or event belongs to another device than asked for
  stale,                ///< the driver refused the handle: the memory or event is gone
  system,               ///< a socket or file call failed (errno in the message)
};

/// "peer_refused" for IpcFailure::peer_refused: the enumerator's name.
CUDAKIT_API const char* ipc_failure_name(IpcFailure failure) noexcept;

/// Sharing with another process failed (see above).
class CUDAKIT_API IpcError : public Error {
 public:
  /// what() is the whole message; `code` is the driver's answer when the driver refused
  /// a handle (IpcFailure::stale), and the message then starts "<call> on <resource>: ".
  IpcError(IpcFailure reason, std::string message, CUresult code = CUDA_SUCCESS)
      : Error(std::move(message)), reason_(reason), code_(code) {}
  /// Why the exchange was refused.
  IpcFailure reason() const noexcept { return reason_; }
  /// The driver's answer to the import (CUDA_SUCCESS when the driver was not asked).
  CUresult code() const noexcept { return code_; }
  ErrorKind kind() const noexcept override { return ErrorKind::ipc; }

 private:
  IpcFailure reason_;
  CUresult code_;
};

}  // namespace cudakit
