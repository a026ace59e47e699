// Internal: turning a cuBLAS status into a BlasError (blas_library.hpp), the message built
// only when the call failed.
#pragma once

#include <string>
#include <utility>

#include "cudakit/blas_library.hpp"
#include "cudakit/context.hpp"
#include "cudakit/error.hpp"
#include "device/device_state.hpp"
#include "libraries/cublas_api.hpp"

namespace cudakit::detail {

/// Throws BlasError for `status` from `call`, about `operation` on `resource`.
[[noreturn]] void throw_blas_error(cublasStatus_t status, cublas::Entry call, std::string operation,
                                   const Resource& resource);

/// Throws BlasError unless `status` is CUBLAS_STATUS_SUCCESS; `operation()` (what was
/// asked, with the shapes) runs only then.
template <class Describe>
void check_blas(cublasStatus_t status, cublas::Entry call, const Resource& resource, Describe&& operation) {
  if (status != CUBLAS_STATUS_SUCCESS) [[unlikely]]
    throw_blas_error(status, call, std::forward<Describe>(operation)(), resource);
}

/// Parks a failed release as the BlasError it would be (a destructor cannot throw).
void park_blas_error(cublasStatus_t status, cublas::Entry call, const char* what, const Resource& resource,
                     const char* origin) noexcept;

/// Destroys a library handle from a destructor: the device's context is made current first
/// (on a dead one the destroy is tried all the same); a failure is parked.
template <class Destroy>
void destroy_library_handle(int device, cublas::Entry call, const char* origin, Destroy&& destroy) noexcept {
  try {
    ContextRef(library_context(device), device).make_current();
  } catch (...) {
  }
  if (cublasStatus_t s = std::forward<Destroy>(destroy)(); s != CUBLAS_STATUS_SUCCESS)
    park_blas_error(s, call, "a pooled handle", Resource::of_device(device), origin);
}

}  // namespace cudakit::detail
