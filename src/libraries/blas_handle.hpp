// Internal: a pooled cuBLAS handle (blas.hpp's Blas holds one while it lives), leased with
// lease_handle<BlasSlot> and given back with return_handle (handle_pool.hpp).
#pragma once

#include <cublas_api.h>

#include "cudakit/stream.hpp"
#include "libraries/blas_shapes.hpp"
#include "libraries/cublas_api.hpp"
#include "libraries/pooled_handle.hpp"

namespace cudakit::detail {

/// One cuBLAS handle with its workspace, bound to one stream at a time.
struct BlasSlot : PooledHandle<BlasSlot, cublasHandle_t, cublas::Entry::Create, cublas::Entry::Destroy> {
  /// Binds the handle to `to` (cublasSetStream), then sets its workspace again:
  /// cublasSetStream resets it to cuBLAS's own. Throws BlasError naming `operation`; the
  /// handle is then bound to no stream.
  void bind(StreamRef to, const char* operation);

  /// The GEMM this handle checked last (blas_shapes.hpp): a repeat skips the checks.
  LastCheckedGemm last_gemm;
};

}  // namespace cudakit::detail
