// Internal: turning a cuBLAS status into a BlasError (blas_library.hpp), the message built
// only when the call failed.
#pragma once

#include <string>
#include <utility>

#include "cudakit/blas_library.hpp"
#include "cudakit/error.hpp"
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

}  // namespace cudakit::detail
