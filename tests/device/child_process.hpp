// Device tests that need a process of their own: a scenario that ruins its process's
// CUDA context (a sticky error), or that must show the process exits cleanly (a
// communicator aborted after a deadline), or several processes (ranks of one job).
//
// run_program starts a program with posix_spawn (fork and exec: nothing of this process's
// CUDA state is carried over), collects its stdout and stderr in one string, and kills it
// when `timeout_s` passes (a hang is then `timed_out`). run_this_test_as_child starts
// this very test binary for one child-only test (named DISABLED_..., so no ordinary run
// or ctest picks it up), with `child_env`=1 in its environment.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

extern char** environ;

namespace cudakit::testing {

struct ChildResult {
  bool timed_out = false;
  int status = 0;
  std::string output;
  /// Whether it exited by itself with status 0.
  bool succeeded() const { return !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0; }
};

/// This process's environment less the variables starting with any of `drop`, plus `add`.
inline std::vector<std::string> environment_with(const std::vector<std::string>& add,
                                                 const std::vector<std::string>& drop = {}) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    bool dropped = false;
    for (const auto& d : drop) dropped |= std::strncmp(*e, d.c_str(), d.size()) == 0;
    for (const auto& a : add) dropped |= std::strncmp(*e, a.c_str(), a.find('=') + 1) == 0;
    if (!dropped) env.emplace_back(*e);
  }
  env.insert(env.end(), add.begin(), add.end());
  return env;
}

/// This test binary's path.
inline std::string self_path() {
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) return {};
  self[len] = '\0';
  return self;
}

/// Starts `path` with `args` (after argv[0]) and `env`; see above.
inline ChildResult run_program(const std::string& path, const std::vector<std::string>& args,
                               const std::vector<std::string>& env, int timeout_s) {
  ChildResult result;
  int fds[2];
  if (pipe(fds) != 0) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return result;
  }
  std::vector<std::string> arg_strings{path};
  arg_strings.insert(arg_strings.end(), args.begin(), args.end());
  std::vector<char*> argv, envp;
  for (auto& a : arg_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings = env;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, path.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    ADD_FAILURE() << "posix_spawn " << path << ": " << std::strerror(rc);
    return result;
  }

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  auto left_ms = [&] {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    return static_cast<int>(std::max<long long>(ms, 0));
  };
  bool open = true, exited = false;
  while (!exited) {
    if (open) {
      pollfd p{fds[0], POLLIN, 0};
      int r = poll(&p, 1, std::min(left_ms(), 200));
      if (r > 0) {
        char buf[4096];
        ssize_t got = read(fds[0], buf, sizeof buf);
        if (got > 0) result.output.append(buf, static_cast<std::size_t>(got));
        else if (got == 0 || (errno != EINTR && errno != EAGAIN)) open = false;
      }
    } else {
      usleep(20000);
    }
    // The child may close its output and still hang (in a destructor at exit): wait
    // for the exit itself, against the same deadline.
    int status = 0;
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      exited = true;
      result.status = status;
    } else if (left_ms() == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      result.timed_out = true;
      result.status = status;
      exited = true;
    }
  }
  // What the child wrote just before exiting.
  for (;;) {
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) break;
    char buf[4096];
    ssize_t got = read(fds[0], buf, sizeof buf);
    if (got <= 0) break;
    result.output.append(buf, static_cast<std::size_t>(got));
  }
  close(fds[0]);
  return result;
}

/// Runs this binary's `child_test` alone, with `child_env`=1 (gtest's own variables are
/// left out: GTEST_OUTPUT would make the child overwrite the parent's report).
inline ChildResult run_this_test_as_child(const char* child_test, const char* child_env, int timeout_s) {
  std::string self = self_path();
  if (self.empty()) {
    ADD_FAILURE() << "cannot find this binary: readlink(/proc/self/exe): " << std::strerror(errno);
    return {};
  }
  return run_program(self,
                     {std::string("--gtest_filter=") + child_test, "--gtest_also_run_disabled_tests", "--gtest_color=no"},
                     environment_with({std::string(child_env) + "=1"}, {"GTEST_"}), timeout_s);
}

}  // namespace cudakit::testing
