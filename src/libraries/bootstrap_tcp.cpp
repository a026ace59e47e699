// The TCP rendezvous (bootstrap.hpp): rank 0 listens, challenges each connection, gathers
// every rank's authenticated hello, then sends each the unique id with its own proof; every
// wait is bounded by the caller's deadline. The messages: rendezvous_wire.hpp.
//
// Rank 0 under hostile input: at most max_pending connections wait for their hello, the
// oldest closed when another arrives; each has handshake_timeout to send it. A connection
// that sends anything but a hello proving the secret is answered with the reason and
// closed; it never fails the job. Only a rank that proved the secret and then disagrees
// with rank 0 (the job's size, its rank, a rank that arrives twice) fails the rendezvous.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <array>
#include <deque>
#include <optional>
#include <span>
#include <map>
#include <thread>
#include <vector>

#include "cudakit/bootstrap.hpp"
#include "libraries/crypto.hpp"
#include "libraries/nccl_comm_state.hpp"
#include "libraries/rendezvous_wire.hpp"

namespace cudakit::nccl {

namespace {

using Clock = std::chrono::steady_clock;
using Key = std::span<const unsigned char>;
constexpr auto verdict_grace = std::chrono::seconds(2);
// A rank sends its hello as soon as the challenge arrives: a connection silent for longer
// is not one.
constexpr auto handshake_timeout = std::chrono::seconds(2);
// Connections waiting for their hello; beyond this the oldest is closed, so that idle
// connections cannot keep a rank out.
constexpr std::size_t max_pending = 64;
// Connections accepted per turn of rank 0's loop, so that a flood cannot starve the ranks
// already connected.
constexpr int max_accepts_per_turn = 256;
const char* const secret_variable = "CUDAKIT_RENDEZVOUS_SECRET";

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

void send_failure(int fd, const std::string& text) {
  auto bytes = wire::encode_failure(text);
  write_all(fd, bytes.data(), bytes.size());
}

// Ends the sending side and reads what already arrived before closing: a socket closed
// with unread bytes is reset, which can destroy the answer the peer has not read yet.
void drain_and_close(Socket& socket) {
  shutdown(socket.fd(), SHUT_WR);
  unsigned char sink[4096];
  for (int i = 0; i < 16 && recv(socket.fd(), sink, sizeof sink, MSG_DONTWAIT) > 0; ++i) {
  }
  socket = Socket();
}

wire::Proof prove(Key key, const std::vector<unsigned char>& text) { return cudakit::detail::crypto::hmac_sha256(key, text); }

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

// A connection that has been challenged and has not yet sent its hello.
struct Pending {
  Socket socket;
  wire::Nonce challenge{};
  std::vector<unsigned char> got;
  Clock::time_point read_deadline;
};

// A rank that proved the secret: its connection and what rank 0's proof must cover.
struct Arrived {
  Socket socket;
  wire::Nonce challenge{}, their_nonce{};
};

// Connections rank 0 closed without the id, for the message at the deadline.
struct Refusals {
  int count = 0;
  std::string last;
  void add(std::string why) {
    ++count;
    last = std::move(why);
  }
  std::string words() const {
    if (count == 0) return "";
    return "; it refused " + std::to_string(count) + " other connection" + (count == 1 ? "" : "s") + " (the last: " +
           last + ")";
  }
};

Socket listen_at(const Address& a, const std::string& address) {
  addrinfo* found = resolve(a, true, "rank 0");
  Socket listener;
  std::string why = "no address";
  for (addrinfo* ai = found; ai != nullptr && listener.fd() < 0; ai = ai->ai_next) {
    Socket s(socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (s.fd() < 0) continue;
    int one = 1;
    setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(s.fd(), ai->ai_addr, ai->ai_addrlen) == 0 && listen(s.fd(), SOMAXCONN) == 0) listener = std::move(s);
    else why = errno_words();
  }
  freeaddrinfo(found);
  if (listener.fd() < 0) throw BootstrapError("rank 0: cannot listen at " + address + ": " + why);
  fcntl(listener.fd(), F_SETFL, O_NONBLOCK);
  return listener;
}

// Accepts what waits, challenging each; the oldest pending connection makes room.
void accept_waiting(int listener, std::deque<Pending>& pending, Refusals& refusals) {
  for (int i = 0; i < max_accepts_per_turn; ++i) {
    int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    Pending p{Socket(fd), {}, {}, Clock::now() + handshake_timeout};
    cudakit::detail::crypto::random_bytes(p.challenge);
    auto challenge = wire::encode_challenge(p.challenge);
    if (!write_all(p.socket.fd(), challenge.data(), challenge.size())) continue;
    if (pending.size() == max_pending) {
      pending.pop_front();
      refusals.add("closed unanswered: " + std::to_string(max_pending) + " newer connections were waiting");
    }
    pending.push_back(std::move(p));
  }
}

// What the bytes from a connection are: nullopt while a hello may still come; else the
// hello that proved the secret, or (in `why`) the reason the connection is refused.
std::optional<wire::Hello> judge(const Pending& p, Key key, std::string& why) {
  const std::span<const unsigned char> got(p.got);
  if (!wire::could_begin_hello(got.first(std::min<std::size_t>(got.size(), 4)))) {
    why = wire::decode_hello(got).problem;  // garbage: says what it starts with
    return std::nullopt;
  }
  if (got.size() > wire::hello_bytes) {
    why = "it sent more than a hello (" + std::to_string(wire::hello_bytes) + " bytes)";
    return std::nullopt;
  }
  if (got.size() < wire::hello_bytes) return std::nullopt;  // a hello's start so far: wait for the rest
  auto hello = wire::decode_hello(p.got);
  if (!hello.value) {
    why = hello.problem;
    return std::nullopt;
  }
  const wire::Proof expected = prove(key, wire::hello_proof_text(p.challenge, hello.value->ranks, hello.value->rank,
                                                                 hello.value->nonce));
  if (!cudakit::detail::crypto::equal_in_constant_time(expected, hello.value->proof)) {
    why = "its hello did not prove the job secret (a wrong or missing secret, or a hello recorded from another "
          "connection)";
    return std::nullopt;
  }
  return hello.value;
}

UniqueId serve(const Address& a, const std::string& address, int ranks, std::chrono::milliseconds timeout,
               const UniqueId& id, Key key) {
  const auto deadline = Clock::now() + timeout;
  Socket listener = listen_at(a, address);
  std::deque<Pending> pending;
  std::map<int, Arrived> arrived;  // rank -> its connection
  Refusals refusals;
  auto fail_everyone = [&](const std::string& text, std::vector<int> missing) {
    for (auto& [r, s] : arrived) send_failure(s.socket.fd(), text);
    throw BootstrapError(text, std::move(missing));
  };
  auto refuse = [&](Pending& p, const std::string& why) {
    send_failure(p.socket.fd(), "rank 0 at " + address + " refused this connection: " + why);
    drain_and_close(p.socket);
    refusals.add(why);
  };
  while (static_cast<int>(arrived.size()) < ranks - 1) {
    if (Clock::now() >= deadline) {
      std::vector<int> missing;
      for (int r = 1; r < ranks; ++r)
        if (!arrived.count(r)) missing.push_back(r);
      fail_everyone("rank 0: rank" + std::string(missing.size() == 1 ? " " : "s ") + rank_list(missing) + " of " +
                        std::to_string(ranks) + " did not arrive at " + address + " within " +
                        detail::duration_words(timeout) + refusals.words(),
                    missing);
    }
    std::vector<pollfd> fds{{listener.fd(), POLLIN, 0}};
    for (auto& p : pending) fds.push_back({p.socket.fd(), POLLIN, 0});
    int ready = poll(fds.data(), fds.size(), std::min(remaining_ms(deadline), 100));
    const auto now = Clock::now();
    std::deque<Pending> still;
    for (std::size_t i = 0; i < pending.size(); ++i) {
      Pending& p = pending[i];
      if (ready > 0 && (fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) {
        unsigned char buffer[wire::hello_bytes + 1];
        ssize_t r = recv(p.socket.fd(), buffer, wire::hello_bytes + 1 - p.got.size(), 0);
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
          still.push_back(std::move(p));
          continue;
        }
        if (r <= 0) continue;  // went away before saying who it is
        p.got.insert(p.got.end(), buffer, buffer + r);
        std::string why;
        std::optional<wire::Hello> hello = judge(p, key, why);
        if (!why.empty()) {
          refuse(p, why);
          continue;
        }
        if (hello) {
          const int their_ranks = static_cast<int>(hello->ranks), their_rank = static_cast<int>(hello->rank);
          std::string problem;
          if (hello->ranks != static_cast<std::uint32_t>(ranks))
            problem = "rank " + std::to_string(hello->rank) + " says the job has " + std::to_string(hello->ranks) +
                      " ranks, rank 0 says " + std::to_string(ranks);
          else if (their_rank <= 0 || their_rank >= ranks)
            problem = "a process arrived as rank " + std::to_string(hello->rank) + ", outside 1.." +
                      std::to_string(ranks - 1);
          else if (arrived.count(their_rank))
            problem = "rank " + std::to_string(their_rank) + " arrived twice";
          (void)their_ranks;
          if (!problem.empty()) {
            send_failure(p.socket.fd(), "rank 0: " + problem);
            fail_everyone("rank 0: " + problem + " at " + address, {});
          }
          arrived.emplace(their_rank, Arrived{std::move(p.socket), p.challenge, hello->nonce});
          continue;
        }
      }
      if (now >= p.read_deadline) {
        refusals.add("it sent no hello within " + detail::duration_words(handshake_timeout));
        continue;
      }
      still.push_back(std::move(p));
    }
    pending = std::move(still);
    if (ready > 0 && (fds[0].revents & POLLIN)) accept_waiting(listener.fd(), pending, refusals);
  }
  for (auto& [r, s] : arrived) {
    const wire::Proof proof =
        prove(key, wire::id_proof_text(s.challenge, s.their_nonce, static_cast<std::uint32_t>(ranks),
                                       static_cast<std::uint32_t>(r), id.bytes));
    auto reply = wire::encode_id_reply(id.bytes, proof);
    if (!write_all(s.socket.fd(), reply.data(), reply.size()))
      throw BootstrapError("rank 0: rank " + std::to_string(r) + " left before it got the unique id (" + errno_words() +
                           ")");
  }
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

// One connection's exchange: the id, or nullopt when rank 0 closed the connection before
// it answered (it may have been busy with other connections: the caller connects again).
std::optional<UniqueId> exchange(int fd, const std::string& address, int rank, int ranks,
                                 Clock::time_point answer_deadline, std::chrono::milliseconds timeout, Key key) {
  const std::string who = "rank " + std::to_string(rank), at = "rank 0 at " + address;
  std::array<unsigned char, wire::challenge_bytes> challenge_bytes{};
  ReadResult r = read_all(fd, challenge_bytes.data(), challenge_bytes.size(), answer_deadline);
  if (r == ReadResult::closed) return std::nullopt;
  if (r == ReadResult::timed_out)
    throw BootstrapError(who + ": " + at + " sent no challenge within " + detail::duration_words(timeout));
  auto challenge = wire::decode_challenge(challenge_bytes);
  if (!challenge.value)
    throw BootstrapError(who + ": " + address + " is not a cudakit rendezvous: " + challenge.problem);
  wire::Hello hello{static_cast<std::uint32_t>(ranks), static_cast<std::uint32_t>(rank), {}, {}};
  cudakit::detail::crypto::random_bytes(hello.nonce);
  hello.proof = prove(key, wire::hello_proof_text(*challenge.value, hello.ranks, hello.rank, hello.nonce));
  auto hello_bytes = wire::encode_hello(hello);
  if (!write_all(fd, hello_bytes.data(), hello_bytes.size())) return std::nullopt;

  // Rank 0 gives its verdict at its own deadline, about when this one passes: its answer
  // (the id, or who did not arrive) is awaited a little longer.
  std::vector<unsigned char> reply;
  while (auto more = wire::reply_bytes_after(reply)) {
    if (*more == 0) break;
    const std::size_t had = reply.size();
    reply.resize(had + *more);
    r = read_all(fd, reply.data() + had, *more, answer_deadline);
    if (r == ReadResult::timed_out)
      throw BootstrapError(who + ": " + at + " did not send the unique id within " + detail::duration_words(timeout) +
                           " (it waits for every rank: one has not arrived)");
    if (r == ReadResult::closed) {
      if (had == 0) return std::nullopt;
      throw BootstrapError(who + ": " + at + " closed the connection in the middle of its answer");
    }
  }
  auto decoded = wire::decode_reply(reply);
  if (!decoded.value) throw BootstrapError(who + ": " + at + " sent no unique id: " + decoded.problem);
  if (decoded.value->failed) throw BootstrapError(who + ": the rendezvous failed; " + decoded.value->text);
  const wire::Proof expected = prove(key, wire::id_proof_text(*challenge.value, hello.nonce, hello.ranks, hello.rank,
                                                              decoded.value->id));
  if (!cudakit::detail::crypto::equal_in_constant_time(expected, decoded.value->proof))
    throw BootstrapError(who + ": " + at + " sent a unique id without proving the job secret (a wrong or missing "
                         "secret on one side, or not the job's rank 0)");
  UniqueId id;
  id.bytes = decoded.value->id;
  return id;
}

UniqueId join(const Address& a, const std::string& address, int rank, int ranks, std::chrono::milliseconds timeout,
              Key key) {
  const auto deadline = Clock::now() + timeout;
  const auto answer_deadline = deadline + verdict_grace;
  for (;;) {
    Socket s = connect_before(a, address, rank, deadline, timeout);
    if (auto id = exchange(s.fd(), address, rank, ranks, answer_deadline, timeout, key)) return *id;
    if (Clock::now() >= deadline)
      throw BootstrapError("rank " + std::to_string(rank) + ": rank 0 at " + address +
                           " closed the connection before sending the unique id");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Whether `host` names this machine's loopback interface, by its text alone (no lookup).
bool is_loopback(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

// The job secret: the option, else the environment variable, else none. Refused empty
// on a non-loopback address unless the caller opted out.
std::string job_secret(const Address& a, const std::string& address, const TcpRendezvousOptions& options) {
  std::string secret = options.secret;
  if (secret.empty())
    if (const char* v = std::getenv(secret_variable)) secret = v;
  if (secret.empty() && !options.allow_unauthenticated && !is_loopback(a.host))
    throw InvalidArgument("tcp_rendezvous: " + address + " is not a loopback address and the job has no secret, so "
                          "anyone who can connect could take the job's unique id: give every rank the same secret "
                          "(TcpRendezvousOptions::secret or " + std::string(secret_variable) +
                          "), or set TcpRendezvousOptions::allow_unauthenticated");
  return secret;
}

void require_rank(int rank, int ranks, const char* what) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw InvalidArgument(std::string(what) + ": rank " + std::to_string(rank) + " is outside a job of " +
                          std::to_string(ranks) + " rank" + (ranks == 1 ? "" : "s"));
}

}  // namespace

UniqueId tcp_rendezvous(const std::string& address, int rank, int ranks, std::chrono::milliseconds timeout,
                        const UniqueId& id, const TcpRendezvousOptions& options) {
  require_rank(rank, ranks, "tcp_rendezvous");
  Address a = parse(address);
  if (ranks == 1) return id;  // nothing to hand over
  const std::string secret = job_secret(a, address, options);
  Key key(reinterpret_cast<const unsigned char*>(secret.data()), secret.size());
  if (rank == 0) return serve(a, address, ranks, timeout, id, key);
  return join(a, address, rank, ranks, timeout, key);
}

UniqueId tcp_rendezvous(const std::string& address, int rank, int ranks, std::chrono::milliseconds timeout,
                        const TcpRendezvousOptions& options) {
  require_rank(rank, ranks, "tcp_rendezvous");
  return tcp_rendezvous(address, rank, ranks, timeout, rank == 0 ? UniqueId::generate() : UniqueId{}, options);
}

UniqueId tcp_rendezvous(const std::string& address, int rank, int ranks, std::chrono::milliseconds timeout,
                        const UniqueId& id) {
  return tcp_rendezvous(address, rank, ranks, timeout, id, TcpRendezvousOptions{});
}

UniqueId tcp_rendezvous(const std::string& address, int rank, int ranks, std::chrono::milliseconds timeout) {
  return tcp_rendezvous(address, rank, ranks, timeout, TcpRendezvousOptions{});
}

}  // namespace cudakit::nccl
