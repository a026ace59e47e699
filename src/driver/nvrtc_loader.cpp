// The NVRTC loader: dlopen, dlsym, one table, loaded once.
#include <dlfcn.h>

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

template <class Fn>
bool resolve(void* library, const char* name, Fn& slot, std::string& missing) {
  slot = reinterpret_cast<Fn>(dlsym(library, name));
  if (slot == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(name);
  return slot != nullptr;
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
  void* library = nullptr;
  std::string tried, used;
  for (const auto& c : candidates) {
    dlerror();
    library = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library != nullptr) {
      used = c;
      break;
    }
    const char* why = dlerror();
    tried += "\n  " + c + ": " + (why ? why : "not found");
  }
  if (library == nullptr)
    throw CompilerUnavailable(
        "NVRTC (runtime compilation) is not available: no libnvrtc could be opened" +
        std::string(overridden ? " (the path came from CUDAKIT_LIBNVRTC)" : "") + "; tried:" + tried +
        "\nInstall the CUDA toolkit's NVRTC (12.x or 13.x), or point CUDAKIT_LIBNVRTC at libnvrtc.so");

  auto api = std::make_unique<Api>();
  api->path = detail::loaded_path(library, used);
  std::string missing;
  resolve(library, "nvrtcGetErrorString", api->GetErrorString, missing);
  resolve(library, "nvrtcVersion", api->Version, missing);
  resolve(library, "nvrtcGetNumSupportedArchs", api->GetNumSupportedArchs, missing);
  resolve(library, "nvrtcGetSupportedArchs", api->GetSupportedArchs, missing);
  resolve(library, "nvrtcCreateProgram", api->CreateProgram, missing);
  resolve(library, "nvrtcDestroyProgram", api->DestroyProgram, missing);
  resolve(library, "nvrtcCompileProgram", api->CompileProgram, missing);
  resolve(library, "nvrtcGetPTXSize", api->GetPTXSize, missing);
  resolve(library, "nvrtcGetPTX", api->GetPTX, missing);
  resolve(library, "nvrtcGetCUBINSize", api->GetCUBINSize, missing);
  resolve(library, "nvrtcGetCUBIN", api->GetCUBIN, missing);
  resolve(library, "nvrtcGetProgramLogSize", api->GetProgramLogSize, missing);
  resolve(library, "nvrtcGetProgramLog", api->GetProgramLog, missing);
  resolve(library, "nvrtcAddNameExpression", api->AddNameExpression, missing);
  resolve(library, "nvrtcGetLoweredName", api->GetLoweredName, missing);
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
