// Names in the profiler through NVTX 3 (profiler_names.hpp).
#include "driver/profiler_names.hpp"

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCuda.h>

#include <dlfcn.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cudakit::detail::profiler {
namespace {

constexpr std::array<const char*, static_cast<std::size_t>(Activity::count_)> activity_names{
    "capture", "graph cache: capture", "graph cache: hit", "graph cache: update", "declared work", "collective",
};

// NVTX's own ways of finding a tool (nvtxDetail/nvtxInit.h): the injection library's
// path in the environment, or a pre-injected library's entry point in the process.
bool tool_attached() noexcept {
  const char* path = std::getenv("NVTX_INJECTION64_PATH");
  if (path != nullptr && *path != '\0') return true;
  return dlsym(RTLD_DEFAULT, "InitializeInjectionNvtx2Preinject") != nullptr;
}

bool read_switch() noexcept {
  const char* value = std::getenv("CUDAKIT_NVTX");
  if (value != nullptr && std::strcmp(value, "0") == 0) return false;
  return tool_attached();
}

// The domain and its registered strings, made on first use. Without a tool NVTX returns
// null handles, which its calls accept.
struct Domain {
  nvtxDomainHandle_t handle = nullptr;
  std::array<nvtxStringHandle_t, activity_names.size()> names{};

  Domain() {
    handle = nvtxDomainCreateA("cudakit");
    for (std::size_t i = 0; i < names.size(); ++i) names[i] = nvtxDomainRegisterStringA(handle, activity_names[i]);
  }
};

const Domain& domain() {
  static const Domain instance;
  return instance;
}

nvtxEventAttributes_t attributes() noexcept {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  return a;
}

}  // namespace

bool names_enabled() noexcept {
  static const bool enabled = read_switch();
  return enabled;
}

void push(Activity activity) noexcept {
  if (!names_enabled()) return;
  const Domain& d = domain();
  nvtxEventAttributes_t a = attributes();
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = d.names[static_cast<std::size_t>(activity)];
  nvtxDomainRangePushEx(d.handle, &a);
}

void pop() noexcept {
  if (names_enabled()) nvtxDomainRangePop(domain().handle);
}

Range::Range(Activity activity) noexcept {
  if (!names_enabled()) return;
  push(activity);
  open_ = true;
}

Range::Range(const char* text) noexcept {
  if (!names_enabled()) return;
  const Domain& d = domain();
  nvtxEventAttributes_t a = attributes();
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = text;
  nvtxDomainRangePushEx(d.handle, &a);
  open_ = true;
}

Range::~Range() {
  if (open_) nvtxDomainRangePop(domain().handle);
}

void name_stream(CUstream stream, int device) noexcept {
  if (!names_enabled()) return;
  static std::atomic<unsigned> streams_named{0};
  char name[64];
  std::snprintf(name, sizeof name, "cudakit stream %u (device %d)", streams_named.fetch_add(1, std::memory_order_relaxed),
                device);
  nvtxNameCuStreamA(stream, name);
}

}  // namespace cudakit::detail::profiler
