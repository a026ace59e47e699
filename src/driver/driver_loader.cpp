// The driver loader (DESIGN 2): dlopen, cuGetProcAddress_v2, lazy per-entry resolution.
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>

#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "driver/loaded_library.hpp"
#include "driver/driver_testing.hpp"

namespace cudakit::driver {

namespace detail {
std::atomic<void*> slots[entry_count];
}

namespace {

using GetProcAddress = CUresult(CUDAAPI*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);

struct LoaderState {
  std::mutex mutex;
  std::atomic<bool> ready{false};
  void* library = nullptr;
  GetProcAddress get_proc = nullptr;
  int version = 0;
  std::string path;
  std::optional<DriverUnavailable> failure;  // a failed load is remembered, not retried
  bool fake = false;
  void* fake_entries[entry_count] = {};
};

LoaderState& state() {
  static LoaderState s;
  return s;
}

std::string too_old_message(const std::string& path, int version) {
  return "the CUDA driver in " + path + " is version " + version_string(version) + ", older than the " +
         version_string(minimum_driver_version) + " that cudakit needs; update the NVIDIA driver";
}

[[noreturn]] void fail(LoaderState& s, DriverUnavailable::Reason reason, std::string message) {
  s.failure.emplace(reason, std::move(message));
  throw *s.failure;
}

// Called with the mutex held.
void load(LoaderState& s) {
  using Reason = DriverUnavailable::Reason;
  const char* override_path = std::getenv("CUDAKIT_LIBCUDA");
  std::string name = (override_path != nullptr && override_path[0] != '\0') ? override_path : "libcuda.so.1";

  dlerror();
  s.library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (s.library == nullptr) {
    const char* why = dlerror();
    fail(s, Reason::not_installed,
         "no CUDA driver: dlopen(\"" + name + "\") failed (" + (why ? why : "unknown reason") +
             "); cudakit needs an NVIDIA driver for CUDA " + version_string(minimum_driver_version) +
             " or newer installed" + (override_path ? " (the path came from CUDAKIT_LIBCUDA)" : ""));
  }
  s.path = cudakit::detail::loaded_path(s.library, name);

  auto driver_get_version = reinterpret_cast<CUresult(CUDAAPI*)(int*)>(dlsym(s.library, "cuDriverGetVersion"));
  s.get_proc = reinterpret_cast<GetProcAddress>(dlsym(s.library, "cuGetProcAddress_v2"));
  auto init = reinterpret_cast<CUresult(CUDAAPI*)(unsigned)>(dlsym(s.library, "cuInit"));
  if (init == nullptr || driver_get_version == nullptr)
    fail(s, Reason::not_installed, "no CUDA driver: " + s.path + " does not export cuInit; it is not a CUDA driver library");

  CUresult init_result = init(0);
  if (init_result == CUDA_ERROR_STUB_LIBRARY)
    fail(s, Reason::stub_library,
         "no CUDA driver: " + s.path +
             " is the CUDA toolkit's stub library (CUDA_ERROR_STUB_LIBRARY), which only satisfies the linker; "
             "the real libcuda.so.1 comes with the NVIDIA driver (usually in /usr/lib/x86_64-linux-gnu or "
             "/usr/lib64): remove the toolkit's lib64/stubs folder from LD_LIBRARY_PATH, or point CUDAKIT_LIBCUDA "
             "at the real library");

  int version = 0;
  if (driver_get_version(&version) != CUDA_SUCCESS) version = 0;
  s.version = version;
  if (version < minimum_driver_version || s.get_proc == nullptr) fail(s, Reason::too_old, too_old_message(s.path, version));

  if (init_result == CUDA_ERROR_NO_DEVICE)
    fail(s, Reason::no_device,
         "no CUDA device: the driver (CUDA " + version_string(version) + ", " + s.path +
             ") is installed but cuInit found no GPU (CUDA_ERROR_NO_DEVICE)");
  if (init_result != CUDA_SUCCESS)
    fail(s, Reason::init_failed,
         "cuInit failed: " + error_name(init_result) + ": " + error_description(init_result) + " (driver " + s.path +
             ", CUDA " + version_string(version) + ")");
}

}  // namespace

void ensure_loaded() {
  LoaderState& s = state();
  if (s.ready.load(std::memory_order_acquire)) [[likely]]
    return;
  std::lock_guard lock(s.mutex);
  if (s.ready.load(std::memory_order_relaxed)) return;
  if (s.failure) throw *s.failure;
  load(s);
  s.ready.store(true, std::memory_order_release);
}

namespace {
// Looks the entry up without throwing for a missing one; the driver must be loaded.
void* lookup(EntryId id) {
  LoaderState& s = state();
  const EntryInfo& info = entry_info(id);
  void* fn = nullptr;
  if (s.fake) {
    fn = s.fake_entries[static_cast<std::size_t>(id)];
  } else {
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = s.get_proc(info.name, &fn, info.abi_version, CU_GET_PROC_ADDRESS_DEFAULT, &status);
    if (r != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS) fn = nullptr;
  }
  if (fn != nullptr) detail::slots[static_cast<std::size_t>(id)].store(fn, std::memory_order_release);
  return fn;
}

[[noreturn]] void throw_missing(EntryId id, const char* feature) {
  const EntryInfo& info = entry_info(id);
  int v = state().version;
  std::string what = feature ? std::string(feature) + " needs " : std::string();
  throw FeatureUnavailable(info.name, info.introduced_in, v,
                           what + std::string(info.name) + ", which this driver (CUDA " + version_string(v) +
                               ") does not have; it came with CUDA " + version_string(info.introduced_in) +
                               ": update the NVIDIA driver");
}
}  // namespace

void* detail::resolve(EntryId id) {
  ensure_loaded();
  void* fn = detail::slots[static_cast<std::size_t>(id)].load(std::memory_order_acquire);
  if (fn == nullptr) fn = lookup(id);
  if (fn == nullptr) throw_missing(id, nullptr);
  return fn;
}

bool detail::loaded() noexcept { return state().ready.load(std::memory_order_acquire); }

bool has(EntryId id) {
  ensure_loaded();
  if (detail::slots[static_cast<std::size_t>(id)].load(std::memory_order_acquire) != nullptr) return true;
  return lookup(id) != nullptr;
}

void require(EntryId id, const char* feature) {
  if (!has(id)) throw_missing(id, feature);
}

int version() {
  ensure_loaded();
  return state().version;
}

std::string library_path() {
  ensure_loaded();
  return state().path;
}

std::string version_string(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

namespace testing {

void install(void* const (&entries)[entry_count], int driver_version) {
  LoaderState& s = state();
  std::lock_guard lock(s.mutex);
  s.fake = true;
  s.failure.reset();
  s.version = driver_version;
  s.path = "(fake driver)";
  for (std::size_t i = 0; i < entry_count; ++i) {
    s.fake_entries[i] = entries[i];
    detail::slots[i].store(entries[i], std::memory_order_release);
  }
  // The same version rule as a real load, so tests see the real message.
  if (driver_version < minimum_driver_version) {
    s.ready.store(false, std::memory_order_release);
    s.failure.emplace(DriverUnavailable::Reason::too_old, too_old_message(s.path, driver_version));
    for (auto& slot : detail::slots) slot.store(nullptr, std::memory_order_release);
    return;
  }
  s.ready.store(true, std::memory_order_release);
}

void reset() {
  LoaderState& s = state();
  std::lock_guard lock(s.mutex);
  // The real library is never closed: code may still hold pointers into it.
  s.ready.store(false, std::memory_order_release);
  s.fake = false;
  s.failure.reset();
  s.library = nullptr;
  s.get_proc = nullptr;
  s.version = 0;
  s.path.clear();
  for (auto& slot : detail::slots) slot.store(nullptr, std::memory_order_release);
}

}  // namespace testing

}  // namespace cudakit::driver
