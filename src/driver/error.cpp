#include "cudakit/error.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>

#include "cudakit/driver.hpp"
#include "driver/device_names.hpp"
#include "driver/driver_testing.hpp"

namespace cudakit {

namespace {

struct KnownCode {
  int code;
  const char* name;
  const char* description;
};

constexpr KnownCode known_codes[] = {
#include "error_names.inc"
};

const KnownCode* find_known(CUresult code) {
  for (const auto& k : known_codes)
    if (k.code == static_cast<int>(code)) return &k;
  return nullptr;
}

// The driver names codes when it is loaded; the generated table does otherwise, so that
// an error raised while loading (or under a fake driver) still reads well. Never loads
// the driver: the loader names cuInit's failure with its lock held.
bool driver_can_describe() {
  try {
    if (!driver::detail::loaded()) return false;
    return driver::has(driver::EntryId::GetErrorName) && driver::has(driver::EntryId::GetErrorString);
  } catch (...) {
    return false;
  }
}

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

const char* kind_name(ResourceKind kind) {
  switch (kind) {
    case ResourceKind::none: return "";
    case ResourceKind::device: return "device";
    case ResourceKind::context: return "context";
    case ResourceKind::stream: return "stream";
    case ResourceKind::event: return "event";
    case ResourceKind::buffer: return "buffer";
    case ResourceKind::pinned_buffer: return "pinned buffer";
    case ResourceKind::host_registration: return "host registration";
    case ResourceKind::memory_pool: return "memory pool";
    case ResourceKind::module: return "module";
    case ResourceKind::library: return "library";
    case ResourceKind::kernel: return "kernel";
    case ResourceKind::program: return "program";
    case ResourceKind::graph: return "graph";
    case ResourceKind::graph_exec: return "graph executable";
    case ResourceKind::graph_node: return "graph node";
  }
  return "resource";
}

std::atomic<detail::DeviceNameReader> device_name_reader{nullptr};

std::string device_words(int device) {
  std::string s = "device " + std::to_string(device);
  detail::DeviceNameReader read_name = device_name_reader.load(std::memory_order_acquire);
  std::string name = read_name != nullptr ? read_name(device) : std::string();
  if (!name.empty()) s += " (" + name + ")";
  return s;
}

std::string compose(const std::string& call, const std::string& resource, CUresult code) {
  std::string m = call;
  if (!resource.empty()) m += " on " + resource;
  m += ": " + error_name(code) + ": " + error_description(code);
  return m;
}

}  // namespace

std::string error_name(CUresult code) {
  if (driver_can_describe()) {
    const char* s = nullptr;
    if (driver::cu.GetErrorName(code, &s) == CUDA_SUCCESS && s != nullptr) return s;
  }
  if (const KnownCode* k = find_known(code)) return k->name;
  return "CUDA error " + std::to_string(static_cast<int>(code));
}

std::string error_description(CUresult code) {
  if (driver_can_describe()) {
    const char* s = nullptr;
    if (driver::cu.GetErrorString(code, &s) == CUDA_SUCCESS && s != nullptr) return s;
  }
  if (const KnownCode* k = find_known(code)) return k->description;
  return "unrecognized error code";
}

const char* error_kind_name(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::other: return "other";
    case ErrorKind::driver: return "driver";
    case ErrorKind::out_of_memory: return "out_of_memory";
    case ErrorKind::context_poisoned: return "context_poisoned";
    case ErrorKind::module_load: return "module_load";
    case ErrorKind::driver_unavailable: return "driver_unavailable";
    case ErrorKind::feature_unavailable: return "feature_unavailable";
    case ErrorKind::invalid_argument: return "invalid_argument";
    case ErrorKind::empty_handle: return "empty_handle";
    case ErrorKind::capture: return "capture";
    case ErrorKind::empty_capture: return "empty_capture";
    case ErrorKind::graph_instantiate: return "graph_instantiate";
    case ErrorKind::graph_update: return "graph_update";
    case ErrorKind::compiler_unavailable: return "compiler_unavailable";
    case ErrorKind::compile: return "compile";
    case ErrorKind::blas: return "blas";
    case ErrorKind::handle_in_use: return "handle_in_use";
    case ErrorKind::nccl: return "nccl";
    case ErrorKind::nccl_timeout: return "nccl_timeout";
    case ErrorKind::nccl_unavailable: return "nccl_unavailable";
    case ErrorKind::bootstrap: return "bootstrap";
    case ErrorKind::ipc: return "ipc";
  }
  return "unknown";
}

bool is_sticky(CUresult code) noexcept {
  switch (code) {
    case CUDA_ERROR_CONTAINED:
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_EXTERNAL_DEVICE:
      return true;
    default:
      return false;
  }
}

bool is_capture_error(CUresult code) noexcept {
  int c = static_cast<int>(code);
  return c >= static_cast<int>(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) &&
         c <= static_cast<int>(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
}

std::string capture_error_explanation(CUresult code) {
  switch (code) {
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
      return "the call is not permitted while a stream capture is in progress: a synchronous call (synchronize, "
             "query, cuMemAlloc, cuMemFree, a module load, ...) was made on a capturing stream, or on a thread whose "
             "capture mode forbids it; the driver invalidates the capture, and it ends with an error";
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
      return "the capture was invalidated by an earlier error inside it (a refused synchronous call, a wait for work "
             "outside the capture, ...); it yields no graph, and the stream leaves capture mode when it ends";
    case CUDA_ERROR_STREAM_CAPTURE_MERGE:
      return "the call would merge two independent captures: a stream in one capture waited for work recorded in "
             "another capture";
    case CUDA_ERROR_STREAM_CAPTURE_UNMATCHED:
      return "the capture was not begun on this stream: a capture ends on the stream that began it";
    case CUDA_ERROR_STREAM_CAPTURE_UNJOINED:
      return "a stream forked into the capture (it waited for work recorded in the capture) was not joined back "
             "into the stream that began it before the capture ended; cudakit joins the streams that enter a capture "
             "through cudakit (StreamRef::wait), join others by hand";
    case CUDA_ERROR_STREAM_CAPTURE_ISOLATION:
      return "a capturing stream waited for work recorded outside its capture (an event recorded before the "
             "capture began, or on a stream that is not capturing); a graph cannot depend on work outside it: order "
             "that work before the capture begins";
    case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
      return "the legacy default stream would have waited for a capturing stream";
    case CUDA_ERROR_CAPTURED_EVENT:
      return "the event was last recorded in a capturing stream, so it stands for no work yet: it cannot be "
             "queried, synchronized or waited for outside that capture";
    case CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD:
      return "a capture begun in thread-local or global mode must end on the thread that began it (a relaxed "
             "capture may end on another thread)";
    default:
      return {};
  }
}

std::string describe(const Resource& r) {
  std::string s;
  if (r.kind == ResourceKind::device) return device_words(r.device);
  if (r.kind != ResourceKind::none) {
    s = kind_name(r.kind);
    if (r.name != nullptr) s += std::string(" '") + r.name + "'";
    if (r.handle != nullptr) s += " " + hex(r.handle);
  }
  if (r.device >= 0) s += (s.empty() ? "" : " on ") + device_words(r.device);
  if (r.last_launch != nullptr) s += std::string(" (last launch on it: ") + r.last_launch + ")";
  return s;
}

DriverError::DriverError(CUresult code, std::string call, std::string resource)
    : DriverError(code, call, resource, compose(call, resource, code)) {}

DriverError::DriverError(CUresult code, std::string call, std::string resource, std::string message)
    : Error(std::move(message)), code_(code), code_name_(error_name(code)), description_(error_description(code)),
      call_(std::move(call)), resource_(std::move(resource)) {}

namespace {
std::string bytes_words(std::size_t b) {
  char buf[64];
  if (b >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(1ull << 30));
  else if (b >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", b / double(1ull << 20));
  else std::snprintf(buf, sizeof buf, "%zu bytes", b);
  return std::string(buf) + " (" + std::to_string(b) + " B)";
}
}  // namespace

OutOfMemory::OutOfMemory(std::string call, std::string resource, std::size_t requested, std::size_t free_bytes,
                         std::size_t total_bytes, std::size_t pool_reserved_bytes)
    : DriverError(CUDA_ERROR_OUT_OF_MEMORY, call, resource,
                  compose(call, resource, CUDA_ERROR_OUT_OF_MEMORY) + ": asked for " + bytes_words(requested) +
                      " with " + bytes_words(free_bytes) + " free of " + bytes_words(total_bytes) +
                      (pool_reserved_bytes == no_pool
                           ? std::string()
                           : "; the memory pool released its unused memory and still reserves " +
                                 bytes_words(pool_reserved_bytes))),
      requested_(requested), free_(free_bytes), total_(total_bytes), pool_reserved_(pool_reserved_bytes) {}

ContextPoisoned::ContextPoisoned(std::shared_ptr<const DriverError> original, std::string call, std::string resource)
    : DriverError(original->code(), call, resource,
                  call + (resource.empty() ? "" : " on " + resource) +
                      ": the context is poisoned by an earlier error and can do no more work (restart the process): " +
                      original->what()),
      original_(std::move(original)) {}

// ---- poison ----

namespace detail {

std::atomic<bool> poisoned_flags[max_devices];

namespace {
std::mutex poison_mutex;
std::shared_ptr<const DriverError> poison_errors[max_devices];
}  // namespace

std::shared_ptr<const DriverError> poison_of(int device) {
  if (device < 0 || device >= max_devices) return nullptr;
  std::lock_guard lock(poison_mutex);
  return poison_errors[device];
}

void poison(int device, std::shared_ptr<const DriverError> error) {
  if (device < 0 || device >= max_devices) return;
  std::lock_guard lock(poison_mutex);
  if (poison_errors[device]) return;  // the first error is the one that matters
  poison_errors[device] = std::move(error);
  poisoned_flags[device].store(true, std::memory_order_release);
}

void clear_poison_for_testing() {
  std::lock_guard lock(poison_mutex);
  for (int d = 0; d < max_devices; ++d) {
    poison_errors[d].reset();
    poisoned_flags[d].store(false, std::memory_order_release);
  }
}

void throw_driver_error(CUresult code, const char* call, const Resource& resource) {
  if (auto original = poison_of(resource.device)) throw ContextPoisoned(std::move(original), call, describe(resource));
  if (is_capture_error(code))
    throw CaptureError(compose(call, describe(resource), code) + ": " + capture_error_explanation(code), code);
  auto error = std::make_shared<const DriverError>(code, call, describe(resource));
  if (is_sticky(code)) poison(resource.device, error);
  throw DriverError(*error);
}

void throw_poisoned(const char* call, const Resource& resource) {
  throw ContextPoisoned(poison_of(resource.device), call, describe(resource));
}

void throw_empty_handle(const char* what) {
  throw EmptyHandle(std::string("use of an empty ") + what + " (moved-from or default-constructed)");
}

void set_device_name_reader(DeviceNameReader reader) noexcept {
  device_name_reader.store(reader, std::memory_order_release);
}

}  // namespace detail

// ---- parked errors ----

namespace {
struct ParkedState {
  std::mutex mutex;
  std::vector<ParkedError> errors;
  ParkedErrorHandler handler;
};
ParkedState& parked() {
  static ParkedState* s = new ParkedState;  // never destroyed: destructors may park during exit
  return *s;
}
}  // namespace

ParkedErrorHandler set_parked_error_handler(ParkedErrorHandler handler) {
  auto& s = parked();
  std::lock_guard lock(s.mutex);
  std::swap(s.handler, handler);
  return handler;
}

std::vector<ParkedError> drain_parked_errors() {
  auto& s = parked();
  std::lock_guard lock(s.mutex);
  std::vector<ParkedError> out;
  out.swap(s.errors);
  return out;
}

std::size_t parked_error_count() {
  auto& s = parked();
  std::lock_guard lock(s.mutex);
  return s.errors.size();
}

void park_error(ParkedError error) noexcept {
  try {
    auto& s = parked();
    ParkedErrorHandler handler;
    {
      std::lock_guard lock(s.mutex);
      s.errors.push_back(error);
      handler = s.handler;
    }
    if (handler) handler(error);
  } catch (...) {
    // Nothing may escape: this runs inside destructors and driver callbacks.
  }
}

void park_driver_error(CUresult code, const char* call, const Resource& resource, const char* origin) noexcept {
  try {
    std::string res = describe(resource);
    if (auto original = detail::poison_of(resource.device)) {
      park_error({code, origin, ContextPoisoned(std::move(original), call, res).what()});
      return;
    }
    auto error = std::make_shared<const DriverError>(code, call, res);
    if (is_sticky(code)) detail::poison(resource.device, error);
    park_error({code, origin, error->what()});
  } catch (...) {
  }
}

}  // namespace cudakit
