// The NCCL loader (nccl_api.hpp): the search, dlopen, dlsym, one table, loaded once.
#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <vector>

#include "cudakit/nccl_error.hpp"
#include "driver/loaded_library.hpp"
#include "libraries/nccl_api.hpp"

namespace cudakit::nccl::raw {

namespace {

detail::LoadedOnce<Api, NcclUnavailable>& state() {
  // Never destroyed: communicators may be released during static destruction.
  static auto* s = new detail::LoadedOnce<Api, NcclUnavailable>;
  return *s;
}

std::vector<std::string> expand(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (std::size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  globfree(&g);
  return out;
}

// The site-packages folders of a Python prefix (a venv, a conda env, /usr/local, ...).
void add_wheels_of_prefix(const std::string& prefix, std::vector<std::string>& out) {
  if (prefix.empty()) return;
  for (const char* packages : {"site-packages", "dist-packages"})
    for (const char* lib : {"nvidia/nccl/lib/libnccl.so.2", "nvidia/cu13/lib/libnccl.so.2", "nvidia/cu12/lib/libnccl.so.2"})
      for (const auto& p : expand(prefix + "/lib/python3*/" + packages + "/" + lib)) out.push_back(p);
}

// Each python3 on PATH: its prefix is the folder above its bin folder (a venv's own
// prefix, since a venv's python3 is a link into the base installation).
void add_wheels_of_path_pythons(std::vector<std::string>& out) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return;
  std::stringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty() || access((dir + "/python3").c_str(), X_OK) != 0) continue;
    std::size_t slash = dir.find_last_of('/');
    if (slash != std::string::npos && slash > 0) add_wheels_of_prefix(dir.substr(0, slash), out);
  }
}

std::vector<std::string> search_order() {
  std::vector<std::string> c = {"libnccl.so.2",
                                "/usr/local/cuda/lib64/libnccl.so.2",
                                "/usr/local/cuda/lib/libnccl.so.2",
                                "/usr/local/cuda/targets/x86_64-linux/lib/libnccl.so.2",
                                "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
                                "/usr/lib/aarch64-linux-gnu/libnccl.so.2",
                                "/usr/lib64/libnccl.so.2"};
  for (const char* env : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (const char* v = std::getenv(env)) add_wheels_of_prefix(v, c);
  add_wheels_of_path_pythons(c);
  if (const char* home = std::getenv("HOME")) add_wheels_of_prefix(std::string(home) + "/.local", c);
  add_wheels_of_prefix("/usr/local", c);
  add_wheels_of_prefix("/usr", c);
  std::vector<std::string> unique;
  for (auto& p : c)
    if (std::find(unique.begin(), unique.end(), p) == unique.end()) unique.push_back(std::move(p));
  return unique;
}

std::unique_ptr<Api> load() {
  keep_nvlink_multicast_off();  // before NCCL reads its environment
  const char* override_path = std::getenv("CUDAKIT_LIBNCCL");
  const bool overridden = override_path != nullptr && override_path[0] != '\0';
  std::vector<std::string> candidates = overridden ? std::vector<std::string>{override_path} : search_order();
  std::string tried;
  const detail::OpenedLibrary opened = detail::open_first(candidates, tried);
  void* library = opened.library;
  if (library == nullptr)
    throw NcclUnavailable("NCCL is not available: no libnccl.so.2 could be opened" +
                          std::string(overridden ? " (the path came from CUDAKIT_LIBNCCL)" : "") + "; tried:" + tried +
                          "\nInstall NCCL 2.18 or newer (the distribution's libnccl2, or pip's nvidia-nccl-cu13), or "
                          "point CUDAKIT_LIBNCCL at libnccl.so.2");
  auto api = std::make_unique<Api>();
  api->path = detail::loaded_path(library, opened.file);
  std::string missing;
#define CUDAKIT_X(name, required) \
  detail::resolve_symbol(library, "nccl" #name, api->name, required ? &missing : nullptr);
  CUDAKIT_NCCL_ENTRIES(CUDAKIT_X)
#undef CUDAKIT_X
  if (!missing.empty())
    throw NcclUnavailable("NCCL in " + api->path + " lacks " + missing + "; cudakit needs NCCL " +
                          version_string(minimum_version) + " or newer");
  if (api->GetVersion(&api->version) != ncclSuccess)
    throw NcclUnavailable("NCCL in " + api->path + " does not report its version (ncclGetVersion failed)");
  if (api->version < minimum_version)
    throw NcclUnavailable("NCCL in " + api->path + " is version " + version_string(api->version) + ", older than the " +
                          version_string(minimum_version) +
                          " that cudakit needs (communicator split and non-blocking communicators); update NCCL");
  return api;
}

}  // namespace

void keep_nvlink_multicast_off() noexcept { setenv("NCCL_NVLS_ENABLE", "0", 0); }

const Api& api() { return state().get(load); }

std::string version_string(int v) {
  // NCCL's encoding: 2.8.x and older as X*1000 + Y*100 + Z, newer as X*10000 + Y*100 + Z.
  int major = v >= 10000 ? v / 10000 : v / 1000;
  int minor = v >= 10000 ? (v / 100) % 100 : (v / 100) % 10;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(v % 100);
}

namespace testing {

void install(const Api& table) {
  keep_nvlink_multicast_off();
  state().install(std::make_unique<Api>(table));
}

void reset() { state().reset(); }

std::vector<std::string> candidates() {
  const char* override_path = std::getenv("CUDAKIT_LIBNCCL");
  if (override_path != nullptr && override_path[0] != '\0') return {override_path};
  return search_order();
}

}  // namespace testing

}  // namespace cudakit::nccl::raw
