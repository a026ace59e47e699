// The file rendezvous (bootstrap.hpp): rank 0 writes the id to a file, each other rank
// reads it and leaves a marker "<path>.rank<r>"; rank 0 waits for every marker, then
// removes the file and the markers, which tells the others that everyone arrived. On a
// deadline rank 0 writes its error to "<path>.failed" and leaves the markers, which each
// rank removes once it has read the error (or its own deadline passed).
//
// The folder may be shared with other users (a cluster's scratch filesystem), so every
// file is made as the only one of its name (O_EXCL), never through a symbolic link
// (O_NOFOLLOW), readable by its owner only (0600), and published by a rename that does not
// replace what is there; files are read the same way, bounded in size, and the id file
// only when this user owns it. The format: rendezvous_wire.hpp.
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "cudakit/bootstrap.hpp"
#include "libraries/nccl_comm_state.hpp"
#include "libraries/rendezvous_wire.hpp"

namespace cudakit::nccl {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
constexpr auto poll_interval = std::chrono::milliseconds(10);
// Rank 0 gives its verdict at its own deadline, about when another rank's passes: that
// rank awaits it a little longer.
constexpr auto verdict_grace = std::chrono::seconds(2);
constexpr mode_t owner_only = 0600;

std::string marker(const std::string& path, int rank) { return path + ".rank" + std::to_string(rank); }
std::string failed_file(const std::string& path) { return path + ".failed"; }

bool exists(const std::string& p) {
  struct stat st {};
  return lstat(p.c_str(), &st) == 0;  // a symbolic link counts, whatever it points at
}

void remove_quietly(const std::string& p) { unlink(p.c_str()); }  // removes a link itself, never its target

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

class File {
 public:
  explicit File(int fd) : fd_(fd) {}
  ~File() {
    if (fd_ >= 0) close(fd_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

// Refuses a folder where other users may replace the files: writable by others without
// the sticky bit (which keeps them from removing or renaming what they do not own).
void require_safe_folder(const std::string& path, const std::string& who) {
  fs::path folder = fs::path(path).parent_path();
  if (folder.empty()) folder = ".";
  struct stat st {};
  if (stat(folder.c_str(), &st) != 0)
    throw BootstrapError(who + ": the rendezvous folder " + folder.string() + " cannot be read: " +
                         std::strerror(errno));
  if ((st.st_mode & S_IWOTH) != 0 && (st.st_mode & S_ISVTX) == 0)
    throw BootstrapError(who + ": the rendezvous folder " + folder.string() +
                         " is writable by every user and has no sticky bit, so anyone could replace the rendezvous "
                         "files: use a folder of your own, or one with the sticky bit (chmod +t, as /tmp has)");
}

// Creates `path` (owner-only, exclusively, not through a link) and writes `text`.
void create_exclusively(const std::string& path, const std::string& text, const std::string& who) {
  File f(open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, owner_only));
  if (f.fd() < 0)
    throw BootstrapError(who + ": cannot create " + path + ": " + std::strerror(errno) +
                         (errno == EEXIST ? " (something is there already: a leftover of an earlier run, or "
                                            "another user's file or link)"
                                          : ""));
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t w = write(f.fd(), text.data() + done, text.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw BootstrapError(who + ": cannot write " + path + ": " + std::strerror(errno));
    done += static_cast<std::size_t>(w);
  }
}

// Publishes `from` as `to` in one step, failing when `to` exists (a rename that does not
// replace; a hard link where the filesystem lacks that rename).
bool publish(const std::string& from, const std::string& to) {
  if (renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return true;
  if (errno != EINVAL && errno != ENOSYS) return false;
  if (link(from.c_str(), to.c_str()) != 0) return false;
  unlink(from.c_str());
  return true;
}

// Written beside the target, then published: a reader sees all of it or nothing.
void write_atomically(const std::string& path, const std::string& text, const std::string& who) {
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  create_exclusively(tmp, text, who);
  if (!publish(tmp, path)) {
    const int error = errno;
    remove_quietly(tmp);
    throw BootstrapError(who + ": cannot publish " + tmp + " as " + path + ": " + std::strerror(error));
  }
}

// Reads at most wire::max_file_bytes + 1 bytes of `path`: a regular file, not a link; when
// `own` is set, only one this user owns. Empty with `why` set when it cannot.
std::string read_bounded(const std::string& path, bool own, std::string& why) {
  File f(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  struct stat st {};
  if (f.fd() < 0 || fstat(f.fd(), &st) != 0) {
    why = std::string("cannot be opened: ") + std::strerror(errno) + (errno == ELOOP ? " (it is a symbolic link)" : "");
    return {};
  }
  if (!S_ISREG(st.st_mode)) {
    why = "is not a regular file";
    return {};
  }
  if (own && st.st_uid != geteuid()) {
    why = "belongs to user " + std::to_string(st.st_uid) + ", not to this user (" + std::to_string(geteuid()) + ")";
    return {};
  }
  std::string text(wire::max_file_bytes + 1, '\0');
  std::size_t have = 0;
  while (have < text.size()) {
    ssize_t r = read(f.fd(), text.data() + have, text.size() - have);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    have += static_cast<std::size_t>(r);
  }
  text.resize(have);
  return text;
}

void remove_everything(const std::string& path, int ranks) {
  remove_quietly(path);
  for (int r = 1; r < ranks; ++r) remove_quietly(marker(path, r));
}

UniqueId lead(const std::string& path, int ranks, std::chrono::milliseconds timeout, const UniqueId& id) {
  const auto deadline = Clock::now() + timeout;
  require_safe_folder(path, "rank 0");
  if (exists(path))
    throw BootstrapError("rank 0: the rendezvous file " + path +
                         " exists already (left by an earlier run?): remove it, or use a fresh path for each run");
  remove_quietly(failed_file(path));
  write_atomically(path, wire::encode_file(ranks, id.bytes), "rank 0");
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
    // The markers stay: a rank whose marker is removed takes it that every rank arrived.
    // Each rank removes its own once it has seen the failure (or its deadline passed).
    remove_quietly(path);
    throw BootstrapError(text, missing);
  }
  remove_everything(path, ranks);
  return id;
}

UniqueId follow(const std::string& path, int rank, int ranks, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  const std::string who = "rank " + std::to_string(rank);
  require_safe_folder(path, who);
  while (!exists(path)) {
    if (Clock::now() >= deadline)
      throw BootstrapError(who + ": no rendezvous file at " + path + " within " + detail::duration_words(timeout) +
                           ": rank 0 did not arrive");
    std::this_thread::sleep_for(poll_interval);
  }
  std::string why;
  const std::string text = read_bounded(path, true, why);
  if (!why.empty()) throw BootstrapError(who + ": the rendezvous file " + path + " " + why);
  auto file = wire::decode_file(text);
  if (!file.value) throw BootstrapError(who + ": " + path + " is not a cudakit rendezvous file: " + file.problem);
  if (file.value->ranks != ranks)
    throw BootstrapError(who + ": rank 0 says the job has " + std::to_string(file.value->ranks) +
                         " ranks, this rank says " + std::to_string(ranks));
  UniqueId id;
  id.bytes = file.value->id;
  File made(open(marker(path, rank).c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, owner_only));
  if (made.fd() < 0)
    throw BootstrapError(who + ": " + marker(path, rank) + " exists: another process arrived as rank " +
                         std::to_string(rank) + " (a rank arrived twice)");
  // Rank 0 removes the marker once every rank arrived; on a failure it leaves it and
  // writes its verdict to <path>.failed.
  while (exists(marker(path, rank)) && !exists(failed_file(path))) {
    if (Clock::now() >= deadline + verdict_grace) {
      remove_quietly(marker(path, rank));
      throw BootstrapError(who + ": rank 0 did not see every rank arrive within " + detail::duration_words(timeout) +
                           " (it waits for every rank: one has not arrived)");
    }
    std::this_thread::sleep_for(poll_interval);
  }
  if (exists(failed_file(path))) {
    remove_quietly(marker(path, rank));
    std::string failure = read_bounded(failed_file(path), true, why);
    throw BootstrapError(who + ": the rendezvous failed; " +
                         (why.empty() ? wire::printable(failure) : failed_file(path) + " " + why));
  }
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
