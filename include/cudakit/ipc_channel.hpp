// A Unix domain socket between two processes of one host, for sharing memory and events
// (ipc_share.hpp): descriptors travel as bytes, the driver's shareable handles as file
// descriptors (SCM_RIGHTS), never as bytes that someone could read or forge.
//
//   // The process that shares:                 // The process that imports:
//   IpcListener listener("/run/app/kv.sock");   IpcChannel channel = IpcChannel::connect("/run/app/kv.sock");
//   IpcChannel channel = listener.accept();     IpcMessage pool = channel.receive();
//   channel.send(pool.share());                 ...
//
// Who may talk: both ends read the peer's credentials from the kernel (SO_PEERCRED) when
// the connection is made, and refuse a peer whose user is not the own user or one that
// the PeerPolicy names, with IpcError (IpcFailure::peer_refused). The socket file is
// created owner-only (0600) before it listens, so other users cannot even connect
// unless the caller widens its mode.
//
// A socket of kind SOCK_SEQPACKET keeps each message whole: a message is one descriptor
// (120 bytes) and at most one file descriptor. Anything else (a short or long message,
// a file descriptor where the kind has none or none where it has one, more than one)
// is refused with IpcError, and every file descriptor that came with it is closed.
// A receive waits at most its timeout (IpcFailure::timed_out), and a peer that closed
// the connection is IpcFailure::peer_closed.
//
// Thread safety: one thread at a time uses a channel or a listener.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "cudakit/export.hpp"
#include "cudakit/ipc_descriptor.hpp"

namespace cudakit {

/// Owns a file descriptor (closed with the owner); move-only. -1 when empty.
class CUDAKIT_API FileDescriptor {
 public:
  /// An empty owner.
  FileDescriptor() = default;
  /// Takes ownership of `fd` (-1 for none).
  explicit FileDescriptor(int fd) noexcept : fd_(fd) {}
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() { reset(); }

  /// The descriptor (-1 when empty), and whether there is one.
  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  /// Gives up ownership: the caller closes the returned descriptor.
  int release() noexcept { return std::exchange(fd_, -1); }
  /// Closes the descriptor now.
  void reset() noexcept;

 private:
  int fd_ = -1;
};

/// The users a channel accepts as its peer: the own user always, and the users named.
struct CUDAKIT_API PeerPolicy {
  /// Users allowed besides the own one (root is not allowed unless named).
  std::vector<uid_t> also_allowed_users;

  /// Only the own user (the default).
  static PeerPolicy same_user() { return {}; }
  /// This policy, also allowing `uid`.
  PeerPolicy& allow_user(uid_t uid) {
    also_allowed_users.push_back(uid);
    return *this;
  }
  /// Whether a peer of user `uid` may talk.
  bool allows(uid_t uid) const noexcept;
};

/// Who the peer is, as the kernel says (SO_PEERCRED).
struct CUDAKIT_API PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

/// A descriptor that arrived, with its file descriptor when its kind carries one.
struct CUDAKIT_API IpcMessage {
  IpcDescriptor descriptor;
  FileDescriptor file;
};

/// How long a receive, an accept or a connect waits by default.
inline constexpr std::chrono::milliseconds default_ipc_timeout{10000};

/// One end of a connection to another process (see above). Move-only.
class CUDAKIT_API IpcChannel {
 public:
  /// Connects to the listener at `path` and checks it against `policy`. Throws IpcError:
  /// peer_refused, timed_out, system (no such socket, ...).
  static IpcChannel connect(const std::string& path, const PeerPolicy& policy = PeerPolicy::same_user(),
                            std::chrono::milliseconds timeout = default_ipc_timeout);
  /// Takes a connected SOCK_SEQPACKET Unix socket (one end of socketpair(), say) and
  /// checks its peer against `policy`; the socket is closed when refused.
  static IpcChannel adopt(FileDescriptor socket, const PeerPolicy& policy = PeerPolicy::same_user());
  /// Two connected ends, for a process that forks its peer (each keeps one end).
  static std::pair<FileDescriptor, FileDescriptor> socket_pair();

  /// An empty channel; send() and receive() throw EmptyHandle.
  IpcChannel() = default;

  /// The peer's credentials, read when the connection was made.
  const PeerCredentials& peer() const noexcept { return peer_; }
  /// The socket (-1 when empty).
  int native_handle() const noexcept { return socket_.get(); }
  explicit operator bool() const noexcept { return static_cast<bool>(socket_); }

  /// Sends `descriptor`, and `file` with it when the kind carries one (the caller keeps
  /// `file`: the peer receives its own copy). Throws InvalidArgument when `file` is
  /// missing or present against the kind, IpcError (peer_closed, system) when the send
  /// fails.
  void send(const IpcDescriptor& descriptor, int file = -1) const;
  /// Sends raw bytes and file descriptors as one message, unchecked: for tests that play
  /// a hostile peer.
  void send_raw(const void* bytes, std::size_t size, const std::vector<int>& files = {}) const;
  /// Waits for the next message and checks it (see above). Throws IpcError: timed_out,
  /// peer_closed, malformed (the descriptor or its file descriptors), system.
  IpcMessage receive(std::chrono::milliseconds timeout = default_ipc_timeout) const;

 private:
  IpcChannel(FileDescriptor socket, PeerCredentials peer) : socket_(std::move(socket)), peer_(peer) {}
  FileDescriptor socket_;
  PeerCredentials peer_;
};

/// A listening socket at a path; the path is removed with the listener. Move-only.
class CUDAKIT_API IpcListener {
 public:
  /// Listens at `path` (an existing socket file there is replaced; any other file is
  /// refused), created with mode 0600. Throws IpcError (system) naming the path.
  explicit IpcListener(std::string path, PeerPolicy policy = PeerPolicy::same_user());
  IpcListener(IpcListener&& other) noexcept
      : socket_(std::move(other.socket_)), path_(std::exchange(other.path_, {})), policy_(std::move(other.policy_)) {}
  IpcListener& operator=(IpcListener&&) = delete;
  IpcListener(const IpcListener&) = delete;
  IpcListener& operator=(const IpcListener&) = delete;
  ~IpcListener();

  /// The path it listens at.
  const std::string& path() const noexcept { return path_; }
  /// Waits for the next connection and checks the peer against the policy. A refused
  /// peer's connection is closed and IpcError (peer_refused) names its pid and uid; the
  /// listener stays usable. Throws IpcError (timed_out, system) too.
  IpcChannel accept(std::chrono::milliseconds timeout = default_ipc_timeout) const;

 private:
  FileDescriptor socket_;
  std::string path_;
  PeerPolicy policy_;
};

}  // namespace cudakit
