// The NVRTC loader: the candidate files, one table, loaded once (loaded_library.hpp).
#include <cstdlib>
#include <memory>
#include <vector>

#include "cudakit/error.hpp"
#include "driver/loaded_library.hpp"
#include "driver/nvrtc.hpp"

namespace cudakit::nvrtc {

namespace {

detail::LoadedOnce<Api, CompilerUnavailable>& state() {
  // Never destroyed: compiles may run during static destruction.
  static auto* s = new detail::LoadedOnce<Api, CompilerUnavailable>;
  return *s;
}

std::unique_ptr<Api> load() {
  std::vector<std::string> candidates;
  const char* override_path = std::getenv("CUDAKIT_LIBNVRTC");
  bool overridden = override_path != nullptr && override_path[0] != '\0';
  if (overridden) {
    candidates.push_back(override_path);
  } else {
    candidates = {"libnvrtc.so.13", "libnvrtc.so.12", "/usr/local/cuda/lib64/libnvrtc.so.13",
                  "/usr/local/cuda/lib64/libnvrtc.so.12"};
  }
  std::string tried;
  const detail::OpenedLibrary opened = detail::open_first(candidates, tried);
  void* library = opened.library;
  if (library == nullptr)
    throw CompilerUnavailable(
        "NVRTC (runtime compilation) is not available: no libnvrtc could be opened" +
        std::string(overridden ? " (the path came from CUDAKIT_LIBNVRTC)" : "") + "; tried:" + tried +
        "\nInstall the CUDA toolkit's NVRTC (12.x or 13.x), or point CUDAKIT_LIBNVRTC at libnvrtc.so");

  auto api = std::make_unique<Api>();
  api->path = detail::loaded_path(library, opened.file);
  std::string missing;
#define CUDAKIT_X(name) detail::resolve_symbol(library, "nvrtc" #name, api->name, &missing);
  CUDAKIT_NVRTC_ENTRIES(CUDAKIT_X)
#undef CUDAKIT_X
  if (!missing.empty())
    throw CompilerUnavailable("NVRTC in " + api->path + " lacks " + missing +
                              "; cudakit needs the NVRTC of CUDA 12.0 or newer");
  if (api->Version(&api->major, &api->minor) != NVRTC_SUCCESS)
    throw CompilerUnavailable("NVRTC in " + api->path + " does not report its version (nvrtcVersion failed)");
  return api;
}

}  // namespace

const Api& api() { return state().get(load); }

std::string result_words(nvrtcResult result) {
  const Api* a = state().peek();
  const char* s = a != nullptr ? a->GetErrorString(result) : nullptr;
  return s != nullptr ? s : "NVRTC error " + std::to_string(static_cast<int>(result));
}

void reset_for_testing() { state().reset(); }

}  // namespace cudakit::nvrtc
