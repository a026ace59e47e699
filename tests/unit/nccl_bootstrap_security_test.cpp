// The rendezvous under attack (docs/security.md), on the loopback address and in a private
// folder: over TCP an impostor without the secret, a wrong secret, a replayed hello, a
// thousand idle connections, random bytes and a fake rank 0 never get or give the id, and
// the real job still forms within its deadline without leaking a file descriptor; through
// a file, a symbolic link planted at any path the rendezvous writes is never written
// through, every file is owner-only, and a folder anyone may write to is refused.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <fstream>
#include <future>
#include <sstream>

#include "bootstrap_fixture.hpp"
#include "cudakit/bootstrap.hpp"
#include "libraries/crypto.hpp"
#include "libraries/rendezvous_wire.hpp"

namespace cudakit {
namespace {

using namespace std::chrono_literals;
using namespace testing::bootstrap;
using Clock = std::chrono::steady_clock;
namespace wire = nccl::wire;

std::string fresh_secret() { return "job-secret-" + std::to_string(std::random_device{}()); }

nccl::TcpRendezvousOptions with_secret(const std::string& secret) { return {secret, false}; }

// A raw TCP connection to rank 0, as an outsider opens it.
class RawConnection {
 public:
  explicit RawConnection(const std::string& address) {
    const auto colon = address.rfind(':');
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(std::stoi(address.substr(colon + 1))));
    inet_pton(AF_INET, address.substr(0, colon).c_str(), &a.sin_addr);
    const auto deadline = Clock::now() + 5s;
    while (Clock::now() < deadline) {  // rank 0 may not listen yet
      fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return;
      close(fd_);
      fd_ = -1;
      std::this_thread::sleep_for(10ms);
    }
  }
  ~RawConnection() {
    if (fd_ >= 0) close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;
  bool connected() const { return fd_ >= 0; }
  void send_bytes(std::span<const unsigned char> bytes) const {
    ASSERT_EQ(send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }
  // Everything rank 0 sends until it closes the connection or `wait` passes.
  std::vector<unsigned char> receive(std::chrono::milliseconds wait, std::size_t at_most = 1 << 16) const {
    std::vector<unsigned char> got;
    const auto deadline = Clock::now() + wait;
    while (got.size() < at_most && Clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      unsigned char buffer[512];
      ssize_t r = recv(fd_, buffer, std::min(sizeof buffer, at_most - got.size()), 0);
      if (r <= 0) break;
      got.insert(got.end(), buffer, buffer + r);
    }
    return got;
  }
  wire::Nonce challenge() const {
    auto bytes = receive(2s, wire::challenge_bytes);
    auto decoded = wire::decode_challenge(bytes);
    EXPECT_TRUE(decoded.value.has_value()) << decoded.problem;
    return decoded.value.value_or(wire::Nonce{});
  }

 private:
  int fd_ = -1;
};

// A hello for `rank` of `ranks` that proves `secret` against `challenge`.
std::array<unsigned char, wire::hello_bytes> proven_hello(const std::string& secret, const wire::Nonce& challenge,
                                                          std::uint32_t rank, std::uint32_t ranks) {
  wire::Hello h{ranks, rank, {}, {}};
  detail::crypto::random_bytes(h.nonce);
  h.proof = detail::crypto::hmac_sha256(std::span(reinterpret_cast<const unsigned char*>(secret.data()), secret.size()),
                                        wire::hello_proof_text(challenge, ranks, rank, h.nonce));
  return wire::encode_hello(h);
}

std::string text_of(const std::vector<unsigned char>& bytes) { return std::string(bytes.begin(), bytes.end()); }

// Connections an attack keeps open until the job has formed.
using Held = std::vector<std::unique_ptr<RawConnection>>;

// Rank 0 and ranks 1..ranks-1 with the secret, rank 0 started first and the others once
// `attack` has run; every rank must get rank 0's id within `deadline`, and afterwards this
// process has as many file descriptors open as before.
void expect_job_forms_despite(const std::function<void(const std::string& address, Held& held)>& attack,
                              int ranks = 2, std::chrono::milliseconds deadline = 10s) {
  const std::size_t descriptors_before = open_descriptors();
  {
    const auto address = free_loopback_address();
    const auto id = fresh_id();
    const std::string secret = fresh_secret();
    const auto start = Clock::now();
    auto rank0 = std::async(std::launch::async,
                            [&] { return nccl::tcp_rendezvous(address, 0, ranks, deadline, id, with_secret(secret)); });
    Held held;
    attack(address, held);
    std::vector<int> others;
    for (int r = 1; r < ranks; ++r) others.push_back(r);
    auto out = run_ranks(others, [&](int r) {
      return nccl::tcp_rendezvous(address, r, ranks, deadline, nccl::UniqueId{}, with_secret(secret));
    });
    EXPECT_EQ(rank0.get(), id);
    for (const auto& o : out) {
      ASSERT_TRUE(o.id.has_value()) << o.error;
      EXPECT_EQ(*o.id, id);
    }
    EXPECT_LT(Clock::now() - start, deadline);
  }
  EXPECT_EQ(open_descriptors(), descriptors_before) << "a file descriptor leaked";
}

// ---- TCP ----

TEST(TcpRendezvousSecurity, ASecretFromTheOptionsOrTheEnvironmentFormsTheJob) {
  expect_job_forms_despite([](const std::string&, Held&) {}, 3);
  const std::string secret = fresh_secret();
  ASSERT_EQ(setenv("CUDAKIT_RENDEZVOUS_SECRET", secret.c_str(), 1), 0);
  auto address = free_loopback_address();
  auto id = fresh_id();
  auto out = run_ranks({0, 1}, [&](int r) { return nccl::tcp_rendezvous(address, r, 2, 10s, id); });
  unsetenv("CUDAKIT_RENDEZVOUS_SECRET");
  for (const auto& o : out) {
    ASSERT_TRUE(o.id.has_value()) << o.error;
    EXPECT_EQ(*o.id, id);
  }
}

TEST(TcpRendezvousSecurity, AnImpostorWithoutTheSecretGetsNoId) {
  std::string answer;
  expect_job_forms_despite([&](const std::string& address, Held&) {
    RawConnection impostor(address);
    ASSERT_TRUE(impostor.connected());
    const wire::Nonce challenge = impostor.challenge();
    wire::Hello h{2, 1, {}, {}};  // rank 1's hello, with a proof made up of zeros
    impostor.send_bytes(wire::encode_hello(h));
    answer = text_of(impostor.receive(2s));
    (void)challenge;
  });
  ASSERT_FALSE(answer.empty());
  EXPECT_EQ(answer[0], 'F') << "the impostor got the id";
  EXPECT_HAS(answer, "refused this connection: its hello did not prove the job secret");
}

TEST(TcpRendezvousSecurity, ARankWithAWrongSecretIsRefusedAndTheJobStillForms) {
  std::string error;
  expect_job_forms_despite([&](const std::string& address, Held&) {
    try {
      nccl::tcp_rendezvous(address, 1, 2, 5s, nccl::UniqueId{}, with_secret("not the job's secret"));
      error = "accepted";
    } catch (const nccl::BootstrapError& e) {
      error = e.what();
    }
  });
  EXPECT_HAS(error, "rank 1: the rendezvous failed; rank 0 at 127.0.0.1:");
  EXPECT_HAS(error, "refused this connection: its hello did not prove the job secret (a wrong or missing secret");
}

TEST(TcpRendezvousSecurity, ARankWithoutTheSecretIsRefused) {
  const auto address = free_loopback_address();
  auto out = run_ranks({0, 1}, [&](int r) {
    return nccl::tcp_rendezvous(address, r, 2, 1s, fresh_id(), r == 0 ? with_secret(fresh_secret()) : with_secret(""));
  });
  EXPECT_HAS(out[1].error, "did not prove the job secret");
  EXPECT_HAS(out[0].error, "rank 0: rank 1 of 2 did not arrive at " + address + " within 1 s; it refused 1 other "
                           "connection (the last: its hello did not prove the job secret");
}

TEST(TcpRendezvousSecurity, AReplayedHelloIsRefused) {
  std::string secret_for_recording = fresh_secret();
  std::string answer;
  // The recorded hello proves a secret against another connection's challenge: the
  // attacker cannot make one for its own.
  expect_job_forms_despite([&](const std::string& address, Held&) {
    std::array<unsigned char, wire::hello_bytes> recorded{};
    {
      RawConnection first(address);
      ASSERT_TRUE(first.connected());
      recorded = proven_hello(secret_for_recording, first.challenge(), 1, 2);
    }
    RawConnection replay(address);
    ASSERT_TRUE(replay.connected());
    replay.challenge();
    replay.send_bytes(recorded);
    answer = text_of(replay.receive(2s));
  });
  ASSERT_FALSE(answer.empty());
  EXPECT_EQ(answer[0], 'F');
  EXPECT_HAS(answer, "or a hello recorded from another connection");
}

TEST(TcpRendezvousSecurity, AHelloReplayedWithTheJobsSecretOnAnotherConnectionIsRefused) {
  // The strongest replay: a hello really made with the job's secret, for connection A,
  // sent on connection B.
  const auto address = free_loopback_address();
  const std::string secret = fresh_secret();
  const auto id = fresh_id();
  auto rank0 = std::async(std::launch::async,
                          [&] { return nccl::tcp_rendezvous(address, 0, 2, 10s, id, with_secret(secret)); });
  std::string answer;
  {
    RawConnection a(address), b(address);
    ASSERT_TRUE(a.connected() && b.connected());
    auto hello_for_a = proven_hello(secret, a.challenge(), 1, 2);
    b.challenge();
    b.send_bytes(hello_for_a);
    answer = text_of(b.receive(2s));
  }
  auto out = run_ranks({1}, [&](int r) { return nccl::tcp_rendezvous(address, r, 2, 10s, nccl::UniqueId{}, with_secret(secret)); });
  EXPECT_EQ(rank0.get(), id);
  ASSERT_TRUE(out[0].id.has_value()) << out[0].error;
  ASSERT_FALSE(answer.empty());
  EXPECT_EQ(answer[0], 'F');
  EXPECT_HAS(answer, "did not prove the job secret");
}

TEST(TcpRendezvousSecurity, AThousandIdleConnectionsDoNotKeepTheRanksOut) {
  expect_job_forms_despite(
      [](const std::string& address, Held& idle) {
        for (int i = 0; i < 1000; ++i) idle.push_back(std::make_unique<RawConnection>(address));
        for (const auto& c : idle) ASSERT_TRUE(c->connected());
      },
      4, 20s);
}

TEST(TcpRendezvousSecurity, RandomBytesGarbageAndOversizeMessagesAreRefused) {
  std::vector<std::string> answers;
  expect_job_forms_despite([&](const std::string& address, Held&) {
    std::mt19937 rng(std::random_device{}());
    for (int i = 0; i < 40; ++i) {
      RawConnection c(address);
      ASSERT_TRUE(c.connected());
      c.challenge();
      std::vector<unsigned char> junk(1 + rng() % 300);
      for (auto& b : junk) b = static_cast<unsigned char>(rng());
      junk[0] = 'X';  // never a hello's first byte
      c.send_bytes(junk);
      answers.push_back(text_of(c.receive(2s)));
    }
    RawConnection oversize(address);
    ASSERT_TRUE(oversize.connected());
    auto hello = proven_hello("whatever", oversize.challenge(), 1, 2);
    std::vector<unsigned char> more(hello.begin(), hello.end());
    more.resize(more.size() + 100, 0x41);
    oversize.send_bytes(more);
    answers.push_back(text_of(oversize.receive(2s)));
  });
  ASSERT_EQ(answers.size(), 41u);
  for (std::size_t i = 0; i + 1 < answers.size(); ++i) EXPECT_HAS(answers[i], "not a cudakit rendezvous hello");
  EXPECT_HAS(answers.back(), "it sent more than a hello (76 bytes)");
}

TEST(TcpRendezvousSecurity, AFakeRankZeroThatCannotProveTheSecretGivesNoId) {
  // A listener that answers like rank 0 but does not know the secret.
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  socklen_t len = sizeof a;
  getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
  const std::string address = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  std::thread fake([&] {
    int fd = accept(listener, nullptr, nullptr);
    wire::Nonce n{};
    auto challenge = wire::encode_challenge(n);
    send(fd, challenge.data(), challenge.size(), MSG_NOSIGNAL);
    unsigned char hello[wire::hello_bytes];
    recv(fd, hello, sizeof hello, MSG_WAITALL);
    auto reply = wire::encode_id_reply(fresh_id().bytes, wire::Proof{});
    send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
    close(fd);
  });
  auto out = run_ranks({1}, [&](int r) {
    return nccl::tcp_rendezvous(address, r, 2, 5s, nccl::UniqueId{}, with_secret(fresh_secret()));
  });
  fake.join();
  close(listener);
  EXPECT_FALSE(out[0].id.has_value());
  EXPECT_HAS(out[0].error, "sent a unique id without proving the job secret");
}

TEST(TcpRendezvousSecurity, ANonLoopbackAddressNeedsASecretUnlessTheCallerOptsOut) {
  unsetenv("CUDAKIT_RENDEZVOUS_SECRET");
  for (int rank : {0, 1}) {
    try {
      nccl::tcp_rendezvous("0.0.0.0:29500", rank, 2, 1s, fresh_id());
      ADD_FAILURE() << "accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_HAS(e.what(), "tcp_rendezvous: 0.0.0.0:29500 is not a loopback address and the job has no secret");
    }
  }
  // Opting out: rank 0 listens (on every interface, briefly) and times out alone.
  const std::string port = free_loopback_address().substr(10);
  auto out = run_ranks({0}, [&](int r) {
    return nccl::tcp_rendezvous("0.0.0.0:" + port, r, 2, 200ms, fresh_id(), nccl::TcpRendezvousOptions{"", true});
  });
  EXPECT_HAS(out[0].error, "rank 1 of 2 did not arrive");
}

// ---- a shared file ----

class FileRendezvousSecurity : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("cudakit-rendezvous-security-" + std::to_string(getpid()) + "-" + std::to_string(std::random_device{}()));
    std::filesystem::create_directories(dir_);
    std::filesystem::permissions(dir_, std::filesystem::perms::owner_all);
    path_ = (dir_ / "job").string();
    victim_ = (dir_ / "victim").string();
    std::ofstream(victim_) << "the user's own file";
    chmod(victim_.c_str(), 0644);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void expect_victim_untouched() const {
    std::ifstream in(victim_);
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_EQ(ss.str(), "the user's own file");
    struct stat st {};
    ASSERT_EQ(stat(victim_.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0644u);
  }
  static unsigned mode_of(const std::string& p) {
    struct stat st {};
    return lstat(p.c_str(), &st) == 0 ? st.st_mode & 07777 : 0;
  }
  std::filesystem::path dir_;
  std::string path_, victim_;
};

TEST_F(FileRendezvousSecurity, ALinkPlantedAtAnyPathTheRendezvousWritesIsNeverWrittenThrough) {
  const std::string pid = std::to_string(getpid());
  const std::vector<std::string> written = {path_, path_ + ".tmp" + pid, path_ + ".rank1", path_ + ".failed",
                                            path_ + ".failed.tmp" + pid};
  for (const std::string& planted : written)
    for (bool dangling : {false, true}) {
      SCOPED_TRACE(planted + (dangling ? " (dangling)" : ""));
      const std::string target = dangling ? (dir_ / "created-through-a-link").string() : victim_;
      ASSERT_EQ(symlink(target.c_str(), planted.c_str()), 0);
      // Three ranks of which rank 2 never comes: rank 0 also writes its .failed file.
      auto out = run_ranks({0, 1}, [&](int r) { return nccl::file_rendezvous(path_, r, 3, 300ms, fresh_id()); });
      for (const auto& o : out) EXPECT_FALSE(o.id.has_value());
      expect_victim_untouched();
      EXPECT_FALSE(std::filesystem::exists(dir_ / "created-through-a-link"));
      for (const std::string& p : written) unlink(p.c_str());
      unlink((path_ + ".rank2").c_str());
    }
}

TEST_F(FileRendezvousSecurity, EveryFileIsOwnerOnly) {
  // The id file and rank 1's marker, seen while rank 0 waits for rank 2.
  unsigned id_mode = 0, marker_mode = 0;
  std::thread watcher([&] {
    const auto deadline = Clock::now() + 3s;
    while (Clock::now() < deadline && (id_mode == 0 || marker_mode == 0)) {
      if (id_mode == 0) id_mode = mode_of(path_);
      if (marker_mode == 0) marker_mode = mode_of(path_ + ".rank1");
      std::this_thread::sleep_for(1ms);
    }
  });
  ::umask(0);  // the modes must not depend on the caller's umask
  auto out = run_ranks({0, 1}, [&](int r) { return nccl::file_rendezvous(path_, r, 3, 1s, fresh_id()); });
  ::umask(022);
  watcher.join();
  EXPECT_EQ(id_mode, 0600u);
  EXPECT_EQ(marker_mode, 0600u);
  EXPECT_EQ(mode_of(path_ + ".failed"), 0600u);
  EXPECT_HAS(out[1].error, "the rendezvous failed; rank 0: rank 2 of 3 did not arrive");
}

TEST_F(FileRendezvousSecurity, AFolderAnyoneMayWriteWithoutTheStickyBitIsRefused) {
  chmod(dir_.c_str(), 0777);
  auto out = run_ranks({0, 1}, [&](int r) { return nccl::file_rendezvous(path_, r, 2, 300ms, fresh_id()); });
  for (const auto& o : out) EXPECT_HAS(o.error, "is writable by every user and has no sticky bit");
  chmod(dir_.c_str(), 01777);  // as /tmp: allowed
  auto id = fresh_id();
  out = run_ranks({0, 1}, [&](int r) { return nccl::file_rendezvous(path_, r, 2, 10s, id); });
  for (const auto& o : out) EXPECT_EQ(o.id, id) << o.error;
}

TEST_F(FileRendezvousSecurity, ARankRefusesAForgedOrForeignRendezvousFile) {
  auto follow = [&] {
    auto out = run_ranks({1}, [&](int r) { return nccl::file_rendezvous(path_, r, 2, 200ms, fresh_id()); });
    unlink(path_.c_str());
    unlink((path_ + ".rank1").c_str());
    return out[0].error;
  };
  std::ofstream(path_) << "cudakit rendezvous\nranks 2\nid 12\n";
  EXPECT_HAS(follow(), "is not a cudakit rendezvous file: its id is not 256 hex digits");
  std::ofstream(path_) << std::string(1 << 20, 'x');
  EXPECT_HAS(follow(), "is not a cudakit rendezvous file: it is 4097 bytes, more than a rendezvous file's 4096");
  std::ofstream(victim_) << wire::encode_file(2, fresh_id().bytes);
  ASSERT_EQ(symlink(victim_.c_str(), path_.c_str()), 0);
  EXPECT_HAS(follow(), "cannot be opened: Too many levels of symbolic links (it is a symbolic link)");
  if (geteuid() == 0) {  // as root, a file of another user can be made
    std::ofstream(path_) << wire::encode_file(2, fresh_id().bytes);
    ASSERT_EQ(chown(path_.c_str(), 65534, 65534), 0);
    EXPECT_HAS(follow(), "belongs to user 65534, not to this user (0)");
  }
}

}  // namespace
}  // namespace cudakit
