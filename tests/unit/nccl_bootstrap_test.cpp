// The rendezvous helpers (bootstrap.hpp) with ranks as threads of one process: over TCP on
// the loopback address and through a file in a temporary folder. Every rank gets rank 0's
// id; a rank that never arrives is named by rank 0 (and by every rank that did arrive);
// a missing rank 0, a rank that arrives twice and a disagreement on the size are errors.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "bootstrap_fixture.hpp"
#include "cudakit/bootstrap.hpp"

namespace cudakit {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using namespace testing::bootstrap;

// ---- TCP ----

TEST(TcpRendezvous, EveryRankGetsRankZerosId) {
  auto address = free_loopback_address();
  auto id = fresh_id();
  auto out = run_ranks({2, 0, 3, 1}, [&](int r) { return nccl::tcp_rendezvous(address, r, 4, 10s, id); });
  for (const auto& o : out) {
    ASSERT_TRUE(o.id.has_value()) << o.error;
    EXPECT_EQ(*o.id, id);
  }
}

TEST(TcpRendezvous, ARankThatNeverArrivesIsNamedWithinTheDeadline) {
  auto address = free_loopback_address();
  auto start = Clock::now();
  auto out = run_ranks({0, 1, 3}, [&](int r) { return nccl::tcp_rendezvous(address, r, 4, 400ms, fresh_id()); });
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_EQ(out[0].error, "rank 0: rank 2 of 4 did not arrive at " + address + " within 400 ms");
  EXPECT_EQ(out[0].missing, std::vector<int>{2});
  for (int i : {1, 2}) {
    EXPECT_HAS(out[i].error, "the rendezvous failed; rank 0: rank 2 of 4 did not arrive");
    EXPECT_FALSE(out[i].id.has_value());
  }
}

TEST(TcpRendezvous, ARankZeroThatNeverArrivesIsReportedByTheOthers) {
  auto address = free_loopback_address();
  auto out = run_ranks({1}, [&](int r) { return nccl::tcp_rendezvous(address, r, 2, 300ms, fresh_id()); });
  EXPECT_HAS(out[0].error, "rank 1: could not reach rank 0 at " + address + " within 300 ms");
  EXPECT_HAS(out[0].error, "rank 0 did not arrive");
}

TEST(TcpRendezvous, ARankArrivingTwiceFailsTheRendezvous) {
  auto address = free_loopback_address();
  auto out = run_ranks({0, 1, 1}, [&](int r) { return nccl::tcp_rendezvous(address, r, 3, 2s, fresh_id()); });
  EXPECT_HAS(out[0].error, "rank 1 arrived twice");
  int told = 0;
  for (int i : {1, 2}) told += out[i].error.find("rank 1 arrived twice") != std::string::npos;
  EXPECT_GE(told, 1);
}

TEST(TcpRendezvous, RanksThatDisagreeOnTheSizeFailTheRendezvous) {
  auto address = free_loopback_address();
  auto out = run_ranks({0, 1}, [&](int r) { return nccl::tcp_rendezvous(address, r, r == 0 ? 2 : 3, 2s, fresh_id()); });
  EXPECT_HAS(out[0].error, "rank 1 says the job has 3 ranks, rank 0 says 2");
  EXPECT_HAS(out[1].error, "rank 1 says the job has 3 ranks, rank 0 says 2");
}

TEST(TcpRendezvous, BadArgumentsAreRefusedBeforeAnyConnection) {
  EXPECT_THROW(nccl::tcp_rendezvous("no-port-here", 0, 2, 1s, fresh_id()), InvalidArgument);
  EXPECT_THROW(nccl::tcp_rendezvous("127.0.0.1:1", 2, 2, 1s, fresh_id()), InvalidArgument);
  auto id = fresh_id();
  EXPECT_EQ(nccl::tcp_rendezvous("127.0.0.1:1", 0, 1, 1s, id), id) << "one rank needs no rendezvous";
}

// ---- a shared file ----

class FileRendezvous : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("cudakit-rendezvous-" + std::to_string(getpid()) + "-" +
                                                     std::to_string(std::random_device{}()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "job").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::size_t files_left() const {
    return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(dir_), {}));
  }
  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(FileRendezvous, EveryRankGetsRankZerosIdAndNothingIsLeftBehind) {
  auto id = fresh_id();
  auto out = run_ranks({1, 2, 0}, [&](int r) { return nccl::file_rendezvous(path_, r, 3, 10s, id); });
  for (const auto& o : out) {
    ASSERT_TRUE(o.id.has_value()) << o.error;
    EXPECT_EQ(*o.id, id);
  }
  EXPECT_EQ(files_left(), 0u);
}

TEST_F(FileRendezvous, ARankThatNeverArrivesIsNamedByEveryone) {
  auto out = run_ranks({0, 2}, [&](int r) { return nccl::file_rendezvous(path_, r, 3, 300ms, fresh_id()); });
  EXPECT_EQ(out[0].error, "rank 0: rank 1 of 3 did not arrive at " + path_ + " within 300 ms");
  EXPECT_EQ(out[0].missing, std::vector<int>{1});
  EXPECT_HAS(out[1].error, "rank 2: the rendezvous failed; rank 0: rank 1 of 3 did not arrive");
}

TEST_F(FileRendezvous, ARankZeroThatNeverArrivesIsReported) {
  auto out = run_ranks({1}, [&](int r) { return nccl::file_rendezvous(path_, r, 2, 200ms, fresh_id()); });
  EXPECT_EQ(out[0].error, "rank 1: no rendezvous file at " + path_ + " within 200 ms: rank 0 did not arrive");
}

TEST_F(FileRendezvous, ALeftoverFileIsRefusedByRankZero) {
  std::ofstream(path_) << "old";
  auto out = run_ranks({0}, [&](int r) { return nccl::file_rendezvous(path_, r, 2, 200ms, fresh_id()); });
  EXPECT_HAS(out[0].error, "exists already (left by an earlier run?)");
}

}  // namespace
}  // namespace cudakit
