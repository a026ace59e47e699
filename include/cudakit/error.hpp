// The error layer (DESIGN 4, invariants 2 and 7).
//
// Every failure is an exception rooted in cudakit::Error. A failed driver call becomes
// a DriverError that carries the CUresult, its name and description, the call and the
// resource, e.g.
//   cuStreamCreateWithPriority on device 0 (NVIDIA H200): CUDA_ERROR_INVALID_VALUE: invalid argument
// The message is built only when the call failed: `check` costs one compare otherwise.
//
// Sticky codes (those cuda.h documents as leaving the process inconsistent) poison the
// device's context: every later checked call on it throws ContextPoisoned at once,
// carrying the original error.
//
// Every Error says which class it is with kind(), so a caller can switch on it instead of
// trying dynamic_casts:
//   catch (const cudakit::Error& e) {
//     if (e.kind() == cudakit::ErrorKind::out_of_memory) shrink_the_batch();
//   }
// Catching a base class still works (an OutOfMemory is a DriverError); kind() names the
// most derived class.
//
// Destructors never throw: what fails inside one is parked (with its origin), handed to
// a handler the user may set, and kept until drain_parked_errors() takes it.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cudakit/export.hpp"

namespace cudakit {

/// What kind of object a failed call was about; each value names the cudakit type of
/// that name (`none`: the call was about no object, `buffer`: device memory).
enum class ResourceKind : std::uint8_t {
  none,
  device,
  context,
  stream,
  event,
  buffer,
  pinned_buffer,
  host_registration,
  // `module` shares a line: a line that starts with it reads to nvcc as a C++20 module
  // directive, and nvcc warns.
  memory_pool, module,
  library,
  kernel,
  program,
  graph,
  graph_exec,
  graph_node,
};

/// Names the object a call was about. Formatted into words only on failure.
struct CUDAKIT_API Resource {
  ResourceKind kind = ResourceKind::none;
  const void* handle = nullptr;  // the driver handle, or a device address
  int device = -1;               // device ordinal, -1 when unknown
  const char* name = nullptr;    // a kernel's or program's name, when it has one
  // A stream's last launch ("kernel 'saxpy'"), named in the error a synchronize or query
  // reports: a kernel's fault surfaces there, long after its launch returned. A string
  // that is never freed (stream_state.hpp).
  const char* last_launch = nullptr;

  /// No object: the call was about nothing in particular (cuInit, a version query).
  static Resource none() { return {}; }
  /// A device, by ordinal.
  static Resource of_device(int device) { return {ResourceKind::device, nullptr, device, nullptr}; }
  /// An object of `kind`; `name` must outlive the Resource (a literal or the owner's name).
  static Resource of(ResourceKind kind, const void* handle, int device, const char* name = nullptr) {
    return {kind, handle, device, name};
  }
};

/// "stream 0x7f.. on device 0 (NVIDIA H200)", with " (last launch on it: kernel 'saxpy')"
/// when the resource names one.
CUDAKIT_API std::string describe(const Resource& resource);

/// Which class of the Error family an exception is: one value per class, naming the most
/// derived one (an OutOfMemory is `out_of_memory`, not `driver`).
enum class ErrorKind : std::uint8_t {
  other,                 ///< Error itself: a failure outside the driver (a temporary file, ...)
  driver,                ///< DriverError
  out_of_memory,         ///< OutOfMemory
  context_poisoned,      ///< ContextPoisoned
  module_load,           ///< ModuleLoadError (module.hpp)
  driver_unavailable,    ///< DriverUnavailable
  feature_unavailable,   ///< FeatureUnavailable
  invalid_argument,      ///< InvalidArgument
  empty_handle,          ///< EmptyHandle
  capture,               ///< CaptureError
  empty_capture,         ///< EmptyCapture
  graph_instantiate,     ///< GraphInstantiateError
  graph_update,          ///< GraphUpdateError
  compiler_unavailable,  ///< CompilerUnavailable
  compile,               ///< CompileError
  blas,                  ///< BlasError (blas_library.hpp)
  handle_in_use,         ///< HandleInUse (blas_library.hpp)
  nccl,                  ///< nccl::NcclError (nccl_error.hpp)
  nccl_timeout,          ///< nccl::NcclTimeout
  nccl_unavailable,      ///< nccl::NcclUnavailable
  bootstrap,             ///< nccl::BootstrapError
  ipc,                   ///< IpcError (ipc_error.hpp)
};

/// "out_of_memory" for ErrorKind::out_of_memory: the enumerator's name.
CUDAKIT_API const char* error_kind_name(ErrorKind kind) noexcept;

/// The root of every exception cudakit throws.
class CUDAKIT_API Error : public std::runtime_error {
 public:
  /// what() is the whole message.
  using std::runtime_error::runtime_error;
  /// Which class of the family this is (ErrorKind::other for an Error itself).
  virtual ErrorKind kind() const noexcept { return ErrorKind::other; }
};

/// A driver call returned an error.
class CUDAKIT_API DriverError : public Error {
 public:
  /// The message is "call on resource: CODE_NAME: description" (" on resource" only
  /// when `resource` is not empty).
  DriverError(CUresult code, std::string call, std::string resource);

  /// The driver's status code.
  CUresult code() const noexcept { return code_; }
  /// "CUDA_ERROR_INVALID_VALUE".
  const std::string& code_name() const noexcept { return code_name_; }
  /// The driver's description, "invalid argument".
  const std::string& description() const noexcept { return description_; }
  /// The driver call, "cuStreamCreateWithPriority".
  const std::string& call() const noexcept { return call_; }
  /// The resource in words, "device 0 (NVIDIA H200)"; empty when none.
  const std::string& resource() const noexcept { return resource_; }
  ErrorKind kind() const noexcept override { return ErrorKind::driver; }

 protected:
  DriverError(CUresult code, std::string call, std::string resource, std::string message);

 private:
  CUresult code_;
  std::string code_name_;
  std::string description_;
  std::string call_;
  std::string resource_;
};

/// The device ran out of memory for an allocation of `requested()` bytes.
class CUDAKIT_API OutOfMemory : public DriverError {
 public:
  /// pool_reserved_bytes() of an allocation that came from no memory pool.
  static constexpr std::size_t no_pool = static_cast<std::size_t>(-1);
  /// code() is CUDA_ERROR_OUT_OF_MEMORY; the message adds the request, the device's free
  /// and total memory at the time of the failure and, for an allocation from a memory
  /// pool, what the pool still reserved after it released its unused memory.
  OutOfMemory(std::string call, std::string resource, std::size_t requested, std::size_t free_bytes,
              std::size_t total_bytes, std::size_t pool_reserved_bytes = no_pool);
  /// The bytes the failed allocation asked for.
  std::size_t requested() const noexcept { return requested_; }
  /// The device's free and total memory when the allocation failed (cuMemGetInfo).
  std::size_t free_bytes() const noexcept { return free_; }
  std::size_t total_bytes() const noexcept { return total_; }
  /// The memory the pool still held after it released its unused memory, or
  /// no_pool when the allocation came from no pool.
  std::size_t pool_reserved_bytes() const noexcept { return pool_reserved_; }
  ErrorKind kind() const noexcept override { return ErrorKind::out_of_memory; }

 private:
  std::size_t requested_, free_, total_, pool_reserved_;
};

/// A call on a context that an earlier sticky error poisoned (DESIGN 7). code() is the
/// original code; original() is the original error.
class CUDAKIT_API ContextPoisoned : public DriverError {
 public:
  /// `call` and `resource` are the refused call's; the message says the context is
  /// poisoned and quotes the original error.
  ContextPoisoned(std::shared_ptr<const DriverError> original, std::string call, std::string resource);
  /// The sticky error that poisoned the context.
  const DriverError& original() const noexcept { return *original_; }
  ErrorKind kind() const noexcept override { return ErrorKind::context_poisoned; }

 private:
  std::shared_ptr<const DriverError> original_;
};

/// No usable CUDA driver: not installed, the toolkit's stub library, or too old.
class CUDAKIT_API DriverUnavailable : public Error {
 public:
  /// Why: `not_installed` (libcuda.so.1 could not be opened, or is not a driver),
  /// `stub_library` (the toolkit's link stub was found instead of a driver), `too_old`
  /// (older than CUDA 12.0), `no_device` (cuInit found no GPU), `init_failed` (cuInit
  /// failed otherwise).
  enum class Reason { not_installed, stub_library, too_old, no_device, init_failed };
  /// `message` is the one line the command prints.
  DriverUnavailable(Reason reason, std::string message) : Error(std::move(message)), reason_(reason) {}
  /// Why the driver is unusable.
  Reason reason() const noexcept { return reason_; }
  ErrorKind kind() const noexcept override { return ErrorKind::driver_unavailable; }

 private:
  Reason reason_;
};

/// This driver lacks an entry that a feature needs (a feature newer than the driver).
class CUDAKIT_API FeatureUnavailable : public Error {
 public:
  /// Versions as the driver encodes them (12040 is CUDA 12.4).
  FeatureUnavailable(std::string entry, int introduced_in, int driver_version, std::string message)
      : Error(std::move(message)), entry_(std::move(entry)), introduced_in_(introduced_in),
        driver_version_(driver_version) {}
  /// The missing driver entry, "cuFuncGetParamInfo".
  const std::string& entry() const noexcept { return entry_; }
  /// The driver version that introduced the entry, and the version installed.
  int introduced_in() const noexcept { return introduced_in_; }
  int driver_version() const noexcept { return driver_version_; }
  ErrorKind kind() const noexcept override { return ErrorKind::feature_unavailable; }

 private:
  std::string entry_;
  int introduced_in_, driver_version_;
};

/// Bad input caught before the driver saw it (DESIGN 10): a launch shape over a limit,
/// an extent mismatch, a wrong argument count, ...
class CUDAKIT_API InvalidArgument : public Error {
 public:
  /// what() is the whole message.
  using Error::Error;
  ErrorKind kind() const noexcept override { return ErrorKind::invalid_argument; }
};

/// Use of an empty handle: a moved-from owner, or a default-constructed ref.
class CUDAKIT_API EmptyHandle : public Error {
 public:
  /// what() is the whole message.
  using Error::Error;
  ErrorKind kind() const noexcept override { return ErrorKind::empty_handle; }
};

/// Capture misuse: another thread submitting to a capturing stream, a synchronous call
/// during capture, an unjoined fork, ... (DESIGN 6 and 9).
class CUDAKIT_API CaptureError : public Error {
 public:
  /// `code` is the driver's status when the driver reported the misuse.
  CaptureError(std::string message, CUresult code = CUDA_SUCCESS) : Error(std::move(message)), code_(code) {}
  /// The driver's code where the driver reported it, CUDA_SUCCESS where cudakit did.
  CUresult code() const noexcept { return code_; }
  ErrorKind kind() const noexcept override { return ErrorKind::capture; }

 private:
  CUresult code_;
};

/// capture_nonempty() captured no work.
class CUDAKIT_API EmptyCapture : public Error {
 public:
  /// what() is the whole message.
  using Error::Error;
  ErrorKind kind() const noexcept override { return ErrorKind::empty_capture; }
};

/// Instantiating an executable graph failed (cuGraphInstantiateWithParams). The message
/// names the reason and, where the driver reported one, the node that caused it.
class CUDAKIT_API GraphInstantiateError : public Error {
 public:
  /// The driver's status, its instantiate result and the node it blamed (or null).
  GraphInstantiateError(std::string message, CUresult code, CUgraphInstantiateResult result, CUgraphNode node)
      : Error(std::move(message)), code_(code), result_(result), node_(node) {}
  /// The driver's status code for the failed instantiation.
  CUresult code() const noexcept { return code_; }
  /// The driver's reason (CUDA_GRAPH_INSTANTIATE_*).
  CUgraphInstantiateResult result() const noexcept { return result_; }
  /// The node that caused the failure; null when the failure is not about one node.
  CUgraphNode node() const noexcept { return node_; }
  ErrorKind kind() const noexcept override { return ErrorKind::graph_instantiate; }

 private:
  CUresult code_;
  CUgraphInstantiateResult result_;
  CUgraphNode node_;
};

/// Updating an executable graph in place failed (cuGraphExecUpdate): the new graph differs
/// in a way an update cannot express. The executable is unchanged and still launchable;
/// instantiate the new graph instead. The message names the node and the reason.
class CUDAKIT_API GraphUpdateError : public Error {
 public:
  /// The driver's update result and the node(s) it blamed (null when none).
  GraphUpdateError(std::string message, CUgraphExecUpdateResult result, CUgraphNode node, CUgraphNode from_node)
      : Error(std::move(message)), result_(result), node_(node), from_node_(from_node) {}
  /// The driver's reason (CU_GRAPH_EXEC_UPDATE_ERROR_*).
  CUgraphExecUpdateResult result() const noexcept { return result_; }
  /// The node the update failed on (the "to" node of an edge for a topology change);
  /// null when the failure is not about one node.
  CUgraphNode node() const noexcept { return node_; }
  /// The "from" node of the edge that differs, for a topology change; null otherwise.
  CUgraphNode from_node() const noexcept { return from_node_; }
  ErrorKind kind() const noexcept override { return ErrorKind::graph_update; }

 private:
  CUgraphExecUpdateResult result_;
  CUgraphNode node_, from_node_;
};

/// No NVRTC library could be loaded (or it is too old).
class CUDAKIT_API CompilerUnavailable : public Error {
 public:
  /// what() is the whole message: every place looked.
  using Error::Error;
  ErrorKind kind() const noexcept override { return ErrorKind::compiler_unavailable; }
};

/// NVRTC failed to compile a program; log() is its complete log.
class CUDAKIT_API CompileError : public Error {
 public:
  /// `message` says what failed; `log` is NVRTC's log, whole.
  CompileError(std::string message, std::string log) : Error(std::move(message)), log_(std::move(log)) {}
  /// NVRTC's complete compilation log.
  const std::string& log() const noexcept { return log_; }
  ErrorKind kind() const noexcept override { return ErrorKind::compile; }

 private:
  std::string log_;
};

/// Whether cuda.h documents this code as leaving the process in an inconsistent state.
CUDAKIT_API bool is_sticky(CUresult code) noexcept;

/// Whether the code is one of the driver's stream-capture errors (900 to 908). A checked
/// call that returns one throws CaptureError, not DriverError.
CUDAKIT_API bool is_capture_error(CUresult code) noexcept;
/// What a stream-capture error means, in words a person can act on ("a capturing stream
/// waited for work recorded outside its capture ..."); empty for other codes.
CUDAKIT_API std::string capture_error_explanation(CUresult code);

/// "CUDA_ERROR_INVALID_VALUE" (never throws; works without a driver).
CUDAKIT_API std::string error_name(CUresult code);
/// "invalid argument" (never throws; works without a driver).
CUDAKIT_API std::string error_description(CUresult code);

// ---- parked errors (DESIGN 2) ----

/// An error that could not be thrown: raised in a destructor or in a host callback.
struct CUDAKIT_API ParkedError {
  CUresult code = CUDA_SUCCESS;  // CUDA_SUCCESS for a non-driver error (a callback's exception)
  std::string origin;            // "~Stream", "host callback", ...
  std::string message;           // the full message, as an exception would carry it
};

/// Called synchronously, on the thread that parks, for every parked error. It must not
/// throw (an exception from it is swallowed). Returns the previous handler.
using ParkedErrorHandler = std::function<void(const ParkedError&)>;
CUDAKIT_API ParkedErrorHandler set_parked_error_handler(ParkedErrorHandler handler);

/// Takes every error parked since the last drain, oldest first.
CUDAKIT_API std::vector<ParkedError> drain_parked_errors();

/// How many errors are parked now.
CUDAKIT_API std::size_t parked_error_count();

/// Parks an error (never throws). For destructors and callbacks.
CUDAKIT_API void park_error(ParkedError error) noexcept;
/// Parks a failed driver call with the message DriverError would carry (ContextPoisoned's
/// when the device is poisoned already); a sticky code poisons the device, as a thrown
/// error would. Never throws.
CUDAKIT_API void park_driver_error(CUresult code, const char* call, const Resource& resource, const char* origin) noexcept;

namespace detail {

// Per-device poison state (DESIGN 7). Devices beyond this count are never poisoned.
inline constexpr int max_devices = 128;
CUDAKIT_API extern std::atomic<bool> poisoned_flags[max_devices];

[[noreturn]] CUDAKIT_API void throw_driver_error(CUresult code, const char* call, const Resource& resource);
[[noreturn]] CUDAKIT_API void throw_poisoned(const char* call, const Resource& resource);
[[noreturn]] CUDAKIT_API void throw_empty_handle(const char* what);

/// The error that poisoned a device, or null.
CUDAKIT_API std::shared_ptr<const DriverError> poison_of(int device);
/// Marks the device poisoned by this error, unless already poisoned (never overwritten).
CUDAKIT_API void poison(int device, std::shared_ptr<const DriverError> error);

}  // namespace detail

/// Throws ContextPoisoned if an earlier sticky error poisoned the resource's device.
inline void check_not_poisoned(const char* call, const Resource& resource) {
  int d = resource.device;
  if (d >= 0 && d < detail::max_devices && detail::poisoned_flags[d].load(std::memory_order_relaxed)) [[unlikely]]
    detail::throw_poisoned(call, resource);
}

/// Throws DriverError (or ContextPoisoned, OutOfMemory) unless `code` is CUDA_SUCCESS.
inline void check(CUresult code, const char* call, const Resource& resource) {
  if (code != CUDA_SUCCESS) [[unlikely]]
    detail::throw_driver_error(code, call, resource);
}

}  // namespace cudakit
