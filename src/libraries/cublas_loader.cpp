// The cuBLAS loader: where libcublas and libcublasLt are looked for (cublas_api.hpp),
// dlopen, dlsym, one table, loaded once.
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "driver/loaded_library.hpp"
#include "libraries/cublas_api.hpp"

namespace cudakit::cublas {

namespace {

namespace fs = std::filesystem;

detail::LoadedOnce<Api, FeatureUnavailable>& state() {
  // Never destroyed: calls may run during static destruction.
  static auto* s = new detail::LoadedOnce<Api, FeatureUnavailable>;
  return *s;
}

/// One place to try: cuBLASLt first, then cuBLAS.
struct Candidate {
  std::string lt, blas;
};

std::string environment(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t end = list.find(':', start);
    if (end == std::string::npos) end = list.size();
    if (end > start) out.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// The site-packages (or dist-packages) folders of the Python environments in sight.
std::vector<fs::path> python_package_folders() {
  std::vector<fs::path> prefixes;
  for (const char* variable : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (std::string v = environment(variable); !v.empty()) prefixes.emplace_back(v);
  std::error_code ec;
  for (const std::string& dir : split(environment("PATH")))
    if (fs::exists(fs::path(dir) / "python3", ec)) prefixes.push_back(fs::path(dir).parent_path());
  if (std::string home = environment("HOME"); !home.empty()) prefixes.push_back(fs::path(home) / ".local");

  std::vector<fs::path> folders;
  auto add = [&](const fs::path& p) {
    for (const auto& f : folders)
      if (f == p) return;
    if (fs::is_directory(p, ec)) folders.push_back(p);
  };
  for (const std::string& entry : split(environment("PYTHONPATH"))) add(entry);
  for (const fs::path& prefix : prefixes) {
    fs::path lib = prefix / "lib";
    if (!fs::is_directory(lib, ec)) continue;
    for (const auto& e : fs::directory_iterator(lib, ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("python3", 0) != 0) continue;
      add(e.path() / "site-packages");
      add(e.path() / "dist-packages");
    }
  }
  return folders;
}

std::vector<Candidate> candidates(bool driver_has_cuda13) {
  std::vector<Candidate> out;
  const std::string blas_override = environment("CUDAKIT_LIBCUBLAS");
  const std::string lt_override = environment("CUDAKIT_LIBCUBLASLT");
  if (!blas_override.empty()) {
    std::string lt = lt_override;
    if (lt.empty()) {
      // libcublas.so.13 -> libcublasLt.so.13 in the same folder.
      fs::path p(blas_override);
      std::string name = p.filename().string();
      if (std::size_t at = name.find("libcublas"); at != std::string::npos) name.insert(at + 9, "Lt");
      lt = (p.parent_path() / name).string();
    }
    out.push_back({lt, blas_override});
    return out;
  }
  std::vector<fs::path> wheels = python_package_folders();
  for (int major : {13, 12}) {
    if (major == 13 && !driver_has_cuda13) continue;
    const std::string suffix = ".so." + std::to_string(major);
    auto in = [&](const fs::path& dir) {
      out.push_back({(dir / ("libcublasLt" + suffix)).string(), (dir / ("libcublas" + suffix)).string()});
    };
    out.push_back({"libcublasLt" + suffix, "libcublas" + suffix});
    in("/usr/local/cuda/lib64");
    for (const fs::path& w : wheels) {
      std::error_code ec;
      for (const char* layout : {"nvidia/cu13/lib", "nvidia/cublas/lib"})
        if (fs::exists(w / layout / ("libcublas" + suffix), ec)) in(w / layout);
    }
  }
  if (!lt_override.empty())
    for (auto& c : out) c.lt = lt_override;
  return out;
}

[[noreturn]] void unavailable(const std::string& message) {
  throw FeatureUnavailable("libcublas", 0, 0, message);
}

std::unique_ptr<Api> load() {
  bool cuda13 = true;
  try {
    cuda13 = driver::version() >= 13000;
  } catch (const DriverUnavailable&) {
    // No driver: cuBLAS cannot run either, but say what was found; the first call will
    // report the driver.
  }
  std::string tried;
  void* lt = nullptr;
  void* blas = nullptr;
  Candidate used;
  for (const Candidate& c : candidates(cuda13)) {
    lt = detail::open_library(c.lt, tried);
    if (lt == nullptr) {
      tried += "\n  " + c.blas + ": not tried (it needs the libcublasLt above)";
      continue;
    }
    blas = detail::open_library(c.blas, tried);
    if (blas != nullptr) {
      used = c;
      break;
    }
    dlclose(lt);
    lt = nullptr;
  }
  const bool overridden = !environment("CUDAKIT_LIBCUBLAS").empty() || !environment("CUDAKIT_LIBCUBLASLT").empty();
  if (blas == nullptr)
    unavailable("cuBLAS is not available: no libcublas and libcublasLt could be opened" +
                std::string(overridden ? " (the files came from CUDAKIT_LIBCUBLAS / CUDAKIT_LIBCUBLASLT)" : "") +
                (cuda13 ? "" : " (CUDA 13's libraries skipped: the driver is older than CUDA 13.0)") +
                "; tried:" + tried +
                "\nInstall cuBLAS (the CUDA toolkit's, or `pip install nvidia-cublas`), or point CUDAKIT_LIBCUBLAS "
                "and CUDAKIT_LIBCUBLASLT at libcublas.so and libcublasLt.so");

  auto api = std::make_unique<Api>();
  api->path = detail::loaded_path(blas, used.blas);
  api->lt_path = detail::loaded_path(lt, used.lt);
  api->blas_library = blas;
  api->lt_library = lt;
  std::string missing;
#define CUDAKIT_X(name, symbol, type) detail::resolve_symbol(in_lt(Entry::name) ? lt : blas, #symbol, api->name, &missing);
  CUDAKIT_CUBLAS_ENTRIES(CUDAKIT_X)
#undef CUDAKIT_X
  if (!missing.empty())
    unavailable("cuBLAS in " + api->path + " and " + api->lt_path + " lacks " + missing +
                "; cudakit needs the cuBLAS of CUDA 12.0 or newer");
  api->version = api->LtGetVersion();
  return api;
}

}  // namespace

const Api& api() { return state().get(load); }

bool loaded() noexcept { return state().peek() != nullptr; }

namespace testing {

std::vector<std::pair<std::string, std::string>> search_order(bool driver_has_cuda13) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Candidate& c : candidates(driver_has_cuda13)) out.emplace_back(c.lt, c.blas);
  return out;
}

void install(const Api& table) { state().install(std::make_unique<Api>(table)); }

void reset() { state().reset(); }

}  // namespace testing

}  // namespace cudakit::cublas
