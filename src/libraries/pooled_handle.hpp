// Internal: a pooled library handle (cuBLAS's or cuBLASLt's) with its workspace, as
// blas_handle.hpp and lt_handle.hpp define them: made so that a capture in progress
// survives it, bound to a stream, used by one thread at a time, destroyed with the
// device's context current.
//
// Self (CRTP) is the slot type, which may add state (cuBLASLt's plans, destroyed before
// the handle) and its own bind(StreamRef, const char* operation) (cuBLAS binds the handle
// with cublasSetStream); Handle is the library's handle type, made by the entry Create and
// destroyed by Destroy.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <memory>
#include <string>

#include "cudakit/context.hpp"
#include "cudakit/device_buffer.hpp"
#include "cudakit/stream.hpp"
#include "device/device_state.hpp"
#include "libraries/blas_error.hpp"
#include "libraries/capture_tolerant.hpp"
#include "libraries/cublas_api.hpp"
#include "libraries/exclusive_use.hpp"
#include "libraries/handle_setup.hpp"

namespace cudakit::detail {

template <class Self, class Handle, cublas::Entry Create, cublas::Entry Destroy>
struct PooledHandle {
  const cublas::Api* api = nullptr;
  Handle handle = nullptr;
  int device = -1;
  CUstream stream = nullptr;  // the stream it is bound to (or was last leased for); null: none
  DeviceBuffer<std::byte> workspace;
  ExclusiveUse use;
  Self* next = nullptr;  // the pool's idle list (handle_pool.hpp)

  /// What a failed destroy is parked as coming from.
  static constexpr const char* release_origin =
      cublas::in_lt(Destroy) ? "cuBLASLt handle release" : "cuBLAS handle release";

  PooledHandle() = default;
  PooledHandle(const PooledHandle&) = delete;
  PooledHandle& operator=(const PooledHandle&) = delete;
  /// Destroys the handle (a failure is parked), after what Self adds (a cache of plans),
  /// then frees the workspace.
  ~PooledHandle() {
    if (handle != nullptr)
      destroy_library_handle(device, Destroy, release_origin,
                             [&] { return (api->*cublas::ApiField<Destroy>::pointer)(handle); });
  }

  /// Records the stream the handle is leased for (a library that takes the stream per call
  /// needs nothing else).
  void bind(StreamRef to, const char* /*operation*/) noexcept { stream = to.handle(); }

  /// A new handle for `device`: made with the device's context current and
  /// capture-tolerant, then given its workspace (a handle whose workspace fails is
  /// destroyed). Throws FeatureUnavailable without the library, BlasError or DriverError.
  static std::unique_ptr<Self> create(int device) {
    auto slot = std::make_unique<Self>();
    slot->api = &cublas::api();
    slot->device = device;
    ContextRef(library_context(device), device).make_current();  // a handle belongs to the current device
    cublasStatus_t status =
        capture_tolerant(device, [&] { return (slot->api->*cublas::ApiField<Create>::pointer)(&slot->handle); });
    check_blas(status, Create, Resource::of_device(device), [] { return std::string("a new handle"); });
    slot->workspace = make_blas_workspace(device);
    return slot;
  }
};

}  // namespace cudakit::detail
