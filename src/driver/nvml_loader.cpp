// NVML, opened at run time for one question (nvml.hpp). Its few types are declared here
// by their documented values, so that building cudakit needs no NVML header.
#include <dlfcn.h>

#include <atomic>
#include <mutex>

#include "driver/nvml.hpp"

namespace cudakit::nvml {

namespace {

using Return = int;  // nvmlReturn_t; 0 is NVML_SUCCESS
using DeviceHandle = struct nvmlDevice_st*;
constexpr int p2p_caps_index_nvlink = 2;  // NVML_P2P_CAPS_INDEX_NVLINK
constexpr int p2p_status_ok = 0;          // NVML_P2P_STATUS_OK

struct Api {
  Return (*init)() = nullptr;  // nvmlInit_v2
  Return (*handle_by_pci_bus_id)(const char*, DeviceHandle*) = nullptr;  // nvmlDeviceGetHandleByPciBusId_v2
  Return (*p2p_status)(DeviceHandle, DeviceHandle, int, int*) = nullptr;  // nvmlDeviceGetP2PStatus
};

std::mutex mutex;
std::atomic<testing::Answer> replacement{nullptr};

// Opened and initialised once; null when NVML is absent or fails to initialise. The
// library stays loaded and initialised for the life of the process.
const Api* api() {
  static const Api* loaded = []() -> const Api* {
    void* library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) return nullptr;
    static Api a;
    a.init = reinterpret_cast<Return (*)()>(dlsym(library, "nvmlInit_v2"));
    a.handle_by_pci_bus_id =
        reinterpret_cast<Return (*)(const char*, DeviceHandle*)>(dlsym(library, "nvmlDeviceGetHandleByPciBusId_v2"));
    a.p2p_status = reinterpret_cast<Return (*)(DeviceHandle, DeviceHandle, int, int*)>(
        dlsym(library, "nvmlDeviceGetP2PStatus"));
    if (a.init == nullptr || a.handle_by_pci_bus_id == nullptr || a.p2p_status == nullptr) return nullptr;
    if (a.init() != 0) return nullptr;
    return &a;
  }();
  return loaded;
}

}  // namespace

std::optional<bool> nvlink_between(const std::string& a, const std::string& b) {
  if (testing::Answer answer = replacement.load(std::memory_order_acquire)) return answer(a, b);
  std::lock_guard lock(mutex);
  const Api* nvml = api();
  if (nvml == nullptr) return std::nullopt;
  DeviceHandle da = nullptr, db = nullptr;
  if (nvml->handle_by_pci_bus_id(a.c_str(), &da) != 0 || nvml->handle_by_pci_bus_id(b.c_str(), &db) != 0)
    return std::nullopt;
  int status = -1;
  if (nvml->p2p_status(da, db, p2p_caps_index_nvlink, &status) != 0) return std::nullopt;
  return status == p2p_status_ok;
}

void testing::replace(Answer answer) { replacement.store(answer, std::memory_order_release); }

}  // namespace cudakit::nvml
