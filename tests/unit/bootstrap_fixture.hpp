// The rendezvous tests' helpers: ranks as threads of one process, a fresh id, a free
// loopback port, and the count of this process's open file descriptors.
#pragma once

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cudakit/bootstrap.hpp"

namespace cudakit::testing::bootstrap {

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

inline nccl::UniqueId fresh_id() {
  std::random_device rd;
  nccl::UniqueId id;
  for (auto& b : id.bytes) b = static_cast<unsigned char>(rd());
  return id;
}

// A port nothing listens on now (the kernel picks it).
inline std::string free_loopback_address() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
}

// What each rank's call gave: the id, or the error's words and missing ranks.
struct Outcome {
  std::optional<nccl::UniqueId> id;
  std::string error;
  std::vector<int> missing;
};

using Rendezvous = std::function<nccl::UniqueId(int rank)>;

inline std::vector<Outcome> run_ranks(const std::vector<int>& ranks, const Rendezvous& rendezvous) {
  std::vector<Outcome> out(ranks.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < ranks.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        out[i].id = rendezvous(ranks[i]);
      } catch (const nccl::BootstrapError& e) {
        out[i].error = e.what();
        out[i].missing = e.missing_ranks();
      } catch (const std::exception& e) {
        out[i].error = std::string("unexpected: ") + e.what();
      }
    });
  for (auto& t : threads) t.join();
  return out;
}

// Open file descriptors of this process (/proc/self/fd, less the one reading it).
inline std::size_t open_descriptors() {
  std::size_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd"); it != std::filesystem::directory_iterator(); ++it)
    ++n;
  return n;
}

}  // namespace cudakit::testing::bootstrap
