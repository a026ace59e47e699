// The file rendezvous (bootstrap.hpp): rank 0 writes the id to a file, each other rank
// reads it and leaves a marker "<path>.rank<r>"; rank 0 waits for every marker, then
// removes the file and the markers, which tells the others that everyone arrived. On a
// deadline rank 0 writes its error to "<path>.failed" first.
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "cudakit/bootstrap.hpp"
#include "libraries/nccl_comm_state.hpp"

namespace cudakit::nccl {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
constexpr auto poll_interval = std::chrono::milliseconds(10);
// Rank 0 gives its verdict at its own deadline, about when another rank's passes: that
// rank awaits it a little longer.
constexpr auto verdict_grace = std::chrono::seconds(2);

std::string marker(const std::string& path, int rank) { return path + ".rank" + std::to_string(rank); }
std::string failed_file(const std::string& path) { return path + ".failed"; }

bool exists(const std::string& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

std::string read_text(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

// Written beside the target, then renamed over it: a reader sees all of it or nothing.
void write_atomically(const std::string& path, const std::string& text, const std::string& who) {
  std::string tmp = path + ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out) throw BootstrapError(who + ": cannot write " + tmp);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw BootstrapError(who + ": cannot rename " + tmp + " to " + path + ": " + ec.message());
}

UniqueId lead(const std::string& path, int ranks, std::chrono::milliseconds timeout, const UniqueId& id) {
  const auto deadline = Clock::now() + timeout;
  if (exists(path))
    throw BootstrapError("rank 0: the rendezvous file " + path +
                         " exists already (left by an earlier run?): remove it, or use a fresh path for each run");
  std::error_code ec;
  fs::remove(failed_file(path), ec);
  write_atomically(path, "cudakit rendezvous\nranks " + std::to_string(ranks) + "\nid " + id.to_hex() + "\n", "rank 0");
  std::vector<int> missing;
  for (;;) {
    missing.clear();
    for (int r = 1; r < ranks; ++r)
      if (!exists(marker(path, r))) missing.push_back(r);
    if (missing.empty() || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(poll_interval);
  }
  if (!missing.empty()) {
    std::string text = "rank 0: rank" + std::string(missing.size() == 1 ? " " : "s ") + rank_list(missing) + " of " +
                       std::to_string(ranks) + " did not arrive at " + path + " within " +
                       detail::duration_words(timeout);
    try {
      write_atomically(failed_file(path), text, "rank 0");
    } catch (const BootstrapError&) {
      // The others then time out on their own deadline; rank 0's error says why.
    }
    fs::remove(path, ec);
    for (int r = 1; r < ranks; ++r) fs::remove(marker(path, r), ec);
    throw BootstrapError(text, missing);
  }
  fs::remove(path, ec);
  for (int r = 1; r < ranks; ++r) fs::remove(marker(path, r), ec);
  return id;
}

UniqueId follow(const std::string& path, int rank, int ranks, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  const std::string who = "rank " + std::to_string(rank);
  while (!exists(path)) {
    if (Clock::now() >= deadline)
      throw BootstrapError(who + ": no rendezvous file at " + path + " within " + detail::duration_words(timeout) +
                           ": rank 0 did not arrive");
    std::this_thread::sleep_for(poll_interval);
  }
  std::istringstream in(read_text(path));
  std::string word, hex;
  int their_ranks = 0;
  std::getline(in, word);
  in >> word >> their_ranks >> word >> hex;
  if (their_ranks != ranks)
    throw BootstrapError(who + ": rank 0 says the job has " + std::to_string(their_ranks) + " ranks, this rank says " +
                         std::to_string(ranks));
  UniqueId id = UniqueId::from_hex(hex);
  int fd = open(marker(path, rank).c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0)
    throw BootstrapError(who + ": " + marker(path, rank) + " exists: another process arrived as rank " +
                         std::to_string(rank) + " (a rank arrived twice)");
  close(fd);
  while (exists(marker(path, rank))) {
    if (Clock::now() >= deadline + verdict_grace)
      throw BootstrapError(who + ": rank 0 did not see every rank arrive within " + detail::duration_words(timeout) +
                           " (it waits for every rank: one has not arrived)");
    std::this_thread::sleep_for(poll_interval);
  }
  if (exists(failed_file(path))) throw BootstrapError(who + ": the rendezvous failed; " + read_text(failed_file(path)));
  return id;
}

void require_rank(int rank, int ranks) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw InvalidArgument("file_rendezvous: rank " + std::to_string(rank) + " is outside a job of " +
                          std::to_string(ranks) + " rank" + (ranks == 1 ? "" : "s"));
}

}  // namespace

UniqueId file_rendezvous(const std::string& path, int rank, int ranks, std::chrono::milliseconds timeout,
                         const UniqueId& id) {
  require_rank(rank, ranks);
  if (rank == 0) return lead(path, ranks, timeout, id);
  return follow(path, rank, ranks, timeout);
}

UniqueId file_rendezvous(const std::string& path, int rank, int ranks, std::chrono::milliseconds timeout) {
  require_rank(rank, ranks);
  return file_rendezvous(path, rank, ranks, timeout, rank == 0 ? UniqueId::generate() : UniqueId{});
}

}  // namespace cudakit::nccl
