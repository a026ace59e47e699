// The TCP rendezvous (bootstrap.hpp): rank 0 listens, gathers every rank's hello, then
// sends each the unique id; every wait is bounded by the caller's deadline.
//
// Messages (integers in network byte order):
//   hello   magic "CKRV" (4 bytes), ranks (u32), rank (u32)
//   reply   'I' and the 128 id bytes, or 'F', a length (u32) and rank 0's error text
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "cudakit/bootstrap.hpp"
#include "libraries/nccl_comm_state.hpp"

namespace cudakit::nccl {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::uint32_t hello_magic = 0x434b5256;  // "CKRV"
constexpr std::size_t hello_bytes = 12;
constexpr auto verdict_grace = std::chrono::seconds(2);

struct Address {
  std::string host, port;
};

Address parse(const std::string& address) {
  std::size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size() || colon == 0)
    throw InvalidArgument("tcp_rendezvous: address '" + address + "' is not host:port");
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return {host, address.substr(colon + 1)};
}

class Socket {
 public:
  explicit Socket(int fd = -1) noexcept : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) close(fd_);
  }
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  int fd() const noexcept { return fd_; }

 private:
  int fd_;
};

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(std::min<long long>(left, 1000));
}

std::string errno_words() { return std::strerror(errno); }

// Writes everything (small messages; the peer reads promptly). False on failure.
bool write_all(int fd, const void* data, std::size_t n) {
  auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd pfd{fd, POLLOUT, 0};
      poll(&pfd, 1, 100);
      continue;
    }
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

enum class ReadResult { done, closed, timed_out };

// Reads exactly n bytes before the deadline.
ReadResult read_all(int fd, void* data, std::size_t n, Clock::time_point deadline) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    pollfd pfd{fd, POLLIN, 0};
    int ready = poll(&pfd, 1, remaining_ms(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      if (Clock::now() >= deadline) return ReadResult::timed_out;
      continue;
    }
    ssize_t r = recv(fd, p, n, 0);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r <= 0) return ReadResult::closed;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return ReadResult::done;
}

void put_u32(unsigned char* at, std::uint32_t v) {
  v = htonl(v);
  std::memcpy(at, &v, 4);
}
std::uint32_t get_u32(const unsigned char* at) {
  std::uint32_t v;
  std::memcpy(&v, at, 4);
  return ntohl(v);
}

void send_failure(int fd, const std::string& text) {
  unsigned char head[5] = {'F'};
  put_u32(head + 1, static_cast<std::uint32_t>(text.size()));
  if (write_all(fd, head, sizeof head)) write_all(fd, text.data(), text.size());
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

addrinfo* resolve(const Address& a, bool passive, const std::string& who) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  int r = getaddrinfo(a.host.c_str(), a.port.c_str(), &hints, &found);
  if (r != 0) throw BootstrapError(who + ": cannot resolve " + a.host + ":" + a.port + ": " + gai_strerror(r));
  return found;
}

// ---- rank 0 ----

struct Arrival {
  Socket socket;
  unsigned char hello[hello_bytes] = {};
  std::size_t have = 0;
};

UniqueId serve(const Address& a, const std::string& address, int ranks, std::chrono::milliseconds timeout,
               const UniqueId& id) {
  const auto deadline = Clock::now() + timeout;
  const std::string who = "rank 0";
  addrinfo* found = resolve(a, true, who);
  Socket listener;
  std::string why = "no address";
  for (addrinfo* ai = found; ai != nullptr && listener.fd() < 0; ai = ai->ai_next) {
    Socket s(socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (s.fd() < 0) continue;
    int one = 1;
    setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(s.fd(), ai->ai_addr, ai->ai_addrlen) == 0 && listen(s.fd(), ranks + 8) == 0) listener = std::move(s);
    else why = errno_words();
  }
  freeaddrinfo(found);
  if (listener.fd() < 0) throw BootstrapError(who + ": cannot listen at " + address + ": " + why);
  fcntl(listener.fd(), F_SETFL, O_NONBLOCK);

  std::vector<Arrival> pending;
  std::map<int, Socket> arrived;  // rank -> its connection
  auto fail_everyone = [&](const std::string& text, std::vector<int> missing) {
    for (auto& [r, s] : arrived) send_failure(s.fd(), text);
    for (auto& p : pending) send_failure(p.socket.fd(), text);
    throw BootstrapError(text, std::move(missing));
  };
  while (static_cast<int>(arrived.size()) < ranks - 1) {
    if (Clock::now() >= deadline) {
      std::vector<int> missing;
      for (int r = 1; r < ranks; ++r)
        if (!arrived.count(r)) missing.push_back(r);
      fail_everyone("rank 0: rank" + std::string(missing.size() == 1 ? " " : "s ") + rank_list(missing) + " of " +
                        std::to_string(ranks) + " did not arrive at " + address + " within " +
                        detail::duration_words(timeout),
                    missing);
    }
    std::vector<pollfd> fds{{listener.fd(), POLLIN, 0}};
    for (auto& p : pending) fds.push_back({p.socket.fd(), POLLIN, 0});
    int ready = poll(fds.data(), fds.size(), std::min(remaining_ms(deadline), 100));
    if (ready <= 0) continue;
    if (fds[0].revents & POLLIN) {
      int fd = accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) pending.push_back(Arrival{Socket(fd)});
    }
    for (std::size_t i = pending.size(); i-- > 0;) {
      if (i + 1 >= fds.size() || !(fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Arrival& p = pending[i];
      ssize_t r = recv(p.socket.fd(), p.hello + p.have, hello_bytes - p.have, 0);
      if (r <= 0) {
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));  // went away before saying who it is
        continue;
      }
      p.have += static_cast<std::size_t>(r);
      if (p.have < hello_bytes) continue;
      Arrival done = std::move(p);
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
      if (get_u32(done.hello) != hello_magic) continue;  // not a rendezvous client: ignored
      const int their_ranks = static_cast<int>(get_u32(done.hello + 4));
      const int their_rank = static_cast<int>(get_u32(done.hello + 8));
      std::string problem;
      if (their_ranks != ranks)
        problem = "rank " + std::to_string(their_rank) + " says the job has " + std::to_string(their_ranks) +
                  " ranks, rank 0 says " + std::to_string(ranks);
      else if (their_rank <= 0 || their_rank >= ranks)
        problem = "a process arrived as rank " + std::to_string(their_rank) + ", outside 1.." + std::to_string(ranks - 1);
      else if (arrived.count(their_rank))
        problem = "rank " + std::to_string(their_rank) + " arrived twice";
      if (!problem.empty()) {
        send_failure(done.socket.fd(), "rank 0: " + problem);
        fail_everyone("rank 0: " + problem + " at " + address, {});
      }
      arrived.emplace(their_rank, std::move(done.socket));
    }
  }
  unsigned char reply[1 + sizeof id.bytes] = {'I'};
  std::memcpy(reply + 1, id.bytes.data(), id.bytes.size());
  for (auto& [r, s] : arrived)
    if (!write_all(s.fd(), reply, sizeof reply))
      throw BootstrapError("rank 0: rank " + std::to_string(r) + " left before it got the unique id (" + errno_words() + ")");
  return id;
}

// ---- ranks other than 0 ----

Socket connect_before(const Address& a, const std::string& address, int rank, Clock::time_point deadline,
                      std::chrono::milliseconds timeout) {
  const std::string who = "rank " + std::to_string(rank);
  std::string last = "no attempt";
  while (Clock::now() < deadline) {
    addrinfo* found = nullptr;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int g = getaddrinfo(a.host.c_str(), a.port.c_str(), &hints, &found);
    if (g != 0) {
      last = std::string("cannot resolve the host: ") + gai_strerror(g);
    } else {
      for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
        Socket s(socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
        if (s.fd() < 0) continue;
        int r = connect(s.fd(), ai->ai_addr, ai->ai_addrlen);
        if (r != 0 && errno == EINPROGRESS) {
          pollfd pfd{s.fd(), POLLOUT, 0};
          if (poll(&pfd, 1, remaining_ms(deadline)) == 1) {
            int err = 0;
            socklen_t len = sizeof err;
            getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
            errno = err;
            r = err == 0 ? 0 : -1;
          } else {
            errno = ETIMEDOUT;
          }
        }
        if (r == 0) {
          freeaddrinfo(found);
          return s;
        }
        last = errno_words();
      }
      freeaddrinfo(found);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // rank 0 may not listen yet
  }
  throw BootstrapError(who + ": could not reach rank 0 at " + address + " within " + detail::duration_words(timeout) +
                       " (last attempt: " + last + "); rank 0 did not arrive, or the address is wrong");
}

UniqueId join(const Address& a, const std::string& address, int rank, int ranks, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  const std::string who = "rank " + std::to_string(rank);
  Socket s = connect_before(a, address, rank, deadline, timeout);
  // Rank 0 gives its verdict at its own deadline, about when this one passes: its answer
  // (the id, or who did not arrive) is awaited a little longer.
  const auto answer_deadline = deadline + verdict_grace;
  unsigned char hello[hello_bytes];
  put_u32(hello, hello_magic);
  put_u32(hello + 4, static_cast<std::uint32_t>(ranks));
  put_u32(hello + 8, static_cast<std::uint32_t>(rank));
  if (!write_all(s.fd(), hello, sizeof hello))
    throw BootstrapError(who + ": rank 0 at " + address + " dropped the connection (" + errno_words() + ")");
  unsigned char kind = 0;
  ReadResult r = read_all(s.fd(), &kind, 1, answer_deadline);
  if (r == ReadResult::timed_out)
    throw BootstrapError(who + ": rank 0 at " + address + " did not send the unique id within " +
                         detail::duration_words(timeout) + " (it waits for every rank: one has not arrived)");
  if (r == ReadResult::closed)
    throw BootstrapError(who + ": rank 0 at " + address + " closed the connection before sending the unique id");
  if (kind == 'F') {
    unsigned char head[4];
    std::string text = "(no reason given)";
    if (read_all(s.fd(), head, 4, answer_deadline) == ReadResult::done) {
      std::string body(std::min<std::uint32_t>(get_u32(head), 4096), '\0');
      if (read_all(s.fd(), body.data(), body.size(), answer_deadline) == ReadResult::done) text = body;
    }
    throw BootstrapError(who + ": the rendezvous failed; " + text);
  }
  UniqueId id;
  if (kind != 'I' || read_all(s.fd(), id.bytes.data(), id.bytes.size(), answer_deadline) != ReadResult::done)
    throw BootstrapError(who + ": rank 0 at " + address + " sent no unique id");
  return id;
}

void require_rank(int rank, int ranks, const char* what) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw InvalidArgument(std::string(what) + ": rank " + std::to_string(rank) + " is outside a job of " +
                          std::to_string(ranks) + " rank" + (ranks == 1 ? "" : "s"));
}

}  // namespace

UniqueId tcp_rendezvous(const std::string& address, int rank, int ranks, std::chrono::milliseconds timeout,
                        const UniqueId& id) {
  require_rank(rank, ranks, "tcp_rendezvous");
  Address a = parse(address);
  if (rank == 0) return ranks == 1 ? id : serve(a, address, ranks, timeout, id);
  return join(a, address, rank, ranks, timeout);
}

UniqueId tcp_rendezvous(const std::string& address, int rank, int ranks, std::chrono::milliseconds timeout) {
  require_rank(rank, ranks, "tcp_rendezvous");
  return tcp_rendezvous(address, rank, ranks, timeout, rank == 0 ? UniqueId::generate() : UniqueId{});
}

}  // namespace cudakit::nccl
