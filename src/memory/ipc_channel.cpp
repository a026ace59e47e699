#include "cudakit/ipc_channel.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cudakit/error.hpp"

namespace cudakit {

namespace {

[[noreturn]] void system_failure(const std::string& what, int error) {
  throw IpcError(IpcFailure::system, what + ": " + std::strerror(error));
}

std::string describe_peer(const PeerCredentials& p) {
  return "peer process " + std::to_string(p.pid) + " (uid " + std::to_string(p.uid) + ")";
}

sockaddr_un address_of(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path)
    throw InvalidArgument("IPC socket path '" + path + "' is empty or longer than " +
                          std::to_string(sizeof addr.sun_path - 1) + " bytes");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

FileDescriptor new_socket() {
  FileDescriptor s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!s) system_failure("socket(AF_UNIX, SOCK_SEQPACKET)", errno);
  return s;
}

// Waits until `fd` is ready for `events` or the timeout passes: false on timeout.
bool wait_ready(int fd, short events, std::chrono::milliseconds timeout, const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0)));
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) system_failure(std::string("poll while waiting to ") + what, errno);
  }
}

PeerCredentials credentials_of(int socket) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
    system_failure("getsockopt(SO_PEERCRED) on an IPC socket", errno);
  return {cred.pid, cred.uid, cred.gid};
}

// The file descriptors that came with a message, each owned at once so that every path
// out (a refusal included) closes them.
std::vector<FileDescriptor> files_of(msghdr& message) {
  std::vector<FileDescriptor> files;
  for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      files.emplace_back(fd);
    }
  }
  return files;
}

[[noreturn]] void refuse(const PeerCredentials& peer, const std::string& why) {
  throw IpcError(IpcFailure::malformed, "IPC message from " + describe_peer(peer) + " refused: " + why);
}

}  // namespace

void FileDescriptor::reset() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool PeerPolicy::allows(uid_t uid) const noexcept {
  return uid == ::geteuid() ||
         std::find(also_allowed_users.begin(), also_allowed_users.end(), uid) != also_allowed_users.end();
}

IpcChannel IpcChannel::adopt(FileDescriptor socket, const PeerPolicy& policy) {
  if (!socket) throw InvalidArgument("IpcChannel::adopt: no socket");
  PeerCredentials peer = credentials_of(socket.get());
  if (!policy.allows(peer.uid))
    throw IpcError(IpcFailure::peer_refused,
                   describe_peer(peer) + " refused: its user is not this process's (uid " +
                       std::to_string(::geteuid()) + ") nor one the peer policy allows");
  return IpcChannel(std::move(socket), peer);
}

std::pair<FileDescriptor, FileDescriptor> IpcChannel::socket_pair() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0)
    system_failure("socketpair(AF_UNIX, SOCK_SEQPACKET)", errno);
  return {FileDescriptor(fds[0]), FileDescriptor(fds[1])};
}

IpcChannel IpcChannel::connect(const std::string& path, const PeerPolicy& policy, std::chrono::milliseconds timeout) {
  sockaddr_un addr = address_of(path);
  FileDescriptor s = new_socket();
  // A listener whose backlog is full makes connect() wait: the socket is non-blocking
  // while it connects, so the wait is bounded.
  int flags = ::fcntl(s.get(), F_GETFL);
  ::fcntl(s.get(), F_SETFL, flags | O_NONBLOCK);
  if (::connect(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno != EINPROGRESS && errno != EAGAIN) system_failure("connect to IPC socket '" + path + "'", errno);
    if (!wait_ready(s.get(), POLLOUT, timeout, "connect"))
      throw IpcError(IpcFailure::timed_out, "connect to IPC socket '" + path + "' timed out");
    int error = 0;
    socklen_t len = sizeof error;
    ::getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &error, &len);
    if (error != 0) system_failure("connect to IPC socket '" + path + "'", error);
  }
  ::fcntl(s.get(), F_SETFL, flags);
  return adopt(std::move(s), policy);
}

void IpcChannel::send(const IpcDescriptor& descriptor, int file) const {
  if (descriptor.carries_file_descriptor() != (file >= 0))
    throw InvalidArgument(std::string("IpcChannel::send: a ") + ipc_kind_name(descriptor.kind) +
                          (file >= 0 ? " descriptor carries no file descriptor" : " descriptor needs its file descriptor"));
  auto bytes = encode_ipc_descriptor(descriptor);
  std::vector<int> files;
  if (file >= 0) files.push_back(file);
  send_raw(bytes.data(), bytes.size(), files);
}

void IpcChannel::send_raw(const void* bytes, std::size_t size, const std::vector<int>& files) const {
  if (!socket_) throw EmptyHandle("send on an empty IpcChannel");
  iovec io{const_cast<void*>(bytes), size};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  std::vector<char> control(files.empty() ? 0 : CMSG_SPACE(files.size() * sizeof(int)));
  if (!files.empty()) {
    message.msg_control = control.data();
    message.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&message);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(files.size() * sizeof(int));
    std::memcpy(CMSG_DATA(c), files.data(), files.size() * sizeof(int));
  }
  for (;;) {
    ssize_t sent = ::sendmsg(socket_.get(), &message, MSG_NOSIGNAL);
    if (sent >= 0) return;
    if (errno == EINTR) continue;
    if (errno == EPIPE || errno == ECONNRESET)
      throw IpcError(IpcFailure::peer_closed, describe_peer(peer_) + " closed the connection before a send");
    system_failure("sendmsg to " + describe_peer(peer_), errno);
  }
}

IpcMessage IpcChannel::receive(std::chrono::milliseconds timeout) const {
  if (!socket_) throw EmptyHandle("receive on an empty IpcChannel");
  if (!wait_ready(socket_.get(), POLLIN, timeout, "receive"))
    throw IpcError(IpcFailure::timed_out, "no IPC message from " + describe_peer(peer_) + " within " +
                                              std::to_string(timeout.count()) + " ms");
  // One byte more than a descriptor, and room for more file descriptors than a message
  // may carry: an oversized message or extra descriptors are seen, and refused.
  std::byte bytes[IpcDescriptor::encoded_bytes + 1];
  alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))];
  iovec io{bytes, sizeof bytes};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  ssize_t got;
  do got = ::recvmsg(socket_.get(), &message, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  while (got < 0 && errno == EINTR);
  if (got < 0) {
    if (errno == ECONNRESET)
      throw IpcError(IpcFailure::peer_closed, describe_peer(peer_) + " closed the connection before a message");
    system_failure("recvmsg from " + describe_peer(peer_), errno);
  }
  std::vector<FileDescriptor> files = files_of(message);
  if (got == 0) throw IpcError(IpcFailure::peer_closed, describe_peer(peer_) + " closed the connection before a message");
  if (message.msg_flags & MSG_CTRUNC) refuse(peer_, "it carried more file descriptors than a message may");
  if (message.msg_flags & MSG_TRUNC) refuse(peer_, "it is longer than a descriptor");
  IpcMessage out;
  try {
    out.descriptor = parse_ipc_descriptor(std::span<const std::byte>(bytes, static_cast<std::size_t>(got)));
  } catch (const IpcError& e) {
    refuse(peer_, e.what());
  }
  const std::size_t expected = out.descriptor.carries_file_descriptor() ? 1 : 0;
  if (files.size() != expected)
    refuse(peer_, "a " + std::string(ipc_kind_name(out.descriptor.kind)) + " came with " + std::to_string(files.size()) +
                      " file descriptors, where it has " + std::to_string(expected));
  if (expected == 1) out.file = std::move(files.front());
  return out;
}

IpcListener::IpcListener(std::string path, PeerPolicy policy) : path_(std::move(path)), policy_(std::move(policy)) {
  sockaddr_un addr = address_of(path_);
  struct stat st{};
  if (::lstat(path_.c_str(), &st) == 0) {
    // Only a stale socket is replaced: a listener never removes a user's file.
    if (!S_ISSOCK(st.st_mode))
      throw IpcError(IpcFailure::system, "IPC socket path '" + path_ + "' exists and is not a socket");
    ::unlink(path_.c_str());
  }
  FileDescriptor s = new_socket();
  if (::bind(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    system_failure("bind IPC socket '" + path_ + "'", errno);
  // Owner-only before it listens: nobody can connect before listen(), so no other user
  // connects through a wider mode in between.
  if (::chmod(path_.c_str(), 0600) != 0 || ::listen(s.get(), 16) != 0) {
    int error = errno;
    ::unlink(path_.c_str());
    system_failure("listen on IPC socket '" + path_ + "'", error);
  }
  socket_ = std::move(s);
}

IpcListener::~IpcListener() {
  if (socket_ && !path_.empty()) ::unlink(path_.c_str());
}

IpcChannel IpcListener::accept(std::chrono::milliseconds timeout) const {
  if (!socket_) throw EmptyHandle("accept on a moved-from IpcListener");
  if (!wait_ready(socket_.get(), POLLIN, timeout, "accept"))
    throw IpcError(IpcFailure::timed_out,
                   "no process connected to IPC socket '" + path_ + "' within " + std::to_string(timeout.count()) + " ms");
  FileDescriptor s;
  for (;;) {
    s = FileDescriptor(::accept4(socket_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (s || errno != EINTR) break;
  }
  if (!s) system_failure("accept on IPC socket '" + path_ + "'", errno);
  return IpcChannel::adopt(std::move(s), policy_);
}

}  // namespace cudakit
