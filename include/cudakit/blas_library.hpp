// The cuBLAS libraries as cudakit loads them, and the errors their calls report.
//
// libcublas and libcublasLt are opened at run time, like the driver and NVRTC: the CUDA 13
// libraries first (on a driver for CUDA 13 or newer), then CUDA 12's; on the dynamic
// loader's path, in /usr/local/cuda/lib64 and in the nvidia-cublas pip wheels of the Python
// environments in sight (VIRTUAL_ENV, CONDA_PREFIX, each python3 on PATH, PYTHONPATH,
// ~/.local). CUDAKIT_LIBCUBLAS and CUDAKIT_LIBCUBLASLT name the files instead. Nothing else
// in cudakit needs them: a program that never uses Blas or BlasLt never opens them, and
// where they are missing, the first use throws FeatureUnavailable naming every file tried.
//
//   if (cudakit::blas_available()) std::printf("cuBLAS %s\n", cudakit::blas_library().version.c_str());
//
// Thread safety: everything here may be used from any thread.
#pragma once

#include <cublas_api.h>

#include <string>

#include "cudakit/export.hpp"
#include "cudakit/error.hpp"

namespace cudakit {

/// Where cuBLAS was loaded from, and its version.
struct BlasLibrary {
  std::string path;     // the libcublas file, as the dynamic loader resolved it
  std::string lt_path;  // the libcublasLt file
  std::string version;  // "13.1.0"
};

/// Loads cuBLAS and cuBLASLt (once, thread-safe) and says where from. Throws
/// FeatureUnavailable naming every file tried when they cannot be found.
CUDAKIT_API BlasLibrary blas_library();

/// Whether cuBLAS and cuBLASLt can be loaded (loads them). Never throws for missing
/// libraries; the reason is blas_library()'s exception.
CUDAKIT_API bool blas_available();

/// A cuBLAS or cuBLASLt call returned an error. The message names the call, the operation
/// with its shapes, the stream and the status, e.g.
///   cublasGemmEx (gemm of __nv_bfloat16, C[m×n] = A[m×k]·B[k×n] with m = 127, n = 65,
///   k = 33, row-major) on stream 0x… on device 0 (NVIDIA H200): CUBLAS_STATUS_NOT_SUPPORTED:
///   the requested operation is not supported
class CUDAKIT_API BlasError : public Error {
 public:
  /// `operation` describes what was asked (the shapes); `resource` the stream or device.
  BlasError(cublasStatus_t status, std::string call, std::string operation, std::string resource);

  /// The library's status.
  cublasStatus_t status() const noexcept { return status_; }
  /// "CUBLAS_STATUS_NOT_SUPPORTED".
  const std::string& status_name() const noexcept { return status_name_; }
  /// The library call, "cublasGemmEx".
  const std::string& call() const noexcept { return call_; }
  /// What cudakit asked of it, with the shapes.
  const std::string& operation() const noexcept { return operation_; }
  /// The stream or device in words; empty when none.
  const std::string& resource() const noexcept { return resource_; }
  ErrorKind kind() const noexcept override { return ErrorKind::blas; }

 private:
  cublasStatus_t status_;
  std::string status_name_, call_, operation_, resource_;
};

/// The address of a function of the cuBLAS or cuBLASLt cudakit loaded ("cublasSgeam"), for
/// calls cudakit does not wrap, so that a program need not link cuBLAS itself:
///   auto geam = reinterpret_cast<decltype(&cublasSgeam)>(cudakit::blas_symbol("cublasSgeam"));
/// Null when neither library has it. Loads them first (FeatureUnavailable without them).
CUDAKIT_API void* blas_symbol(const char* name);

/// "CUBLAS_STATUS_NOT_SUPPORTED" for a status (works without the library).
CUDAKIT_API std::string blas_status_name(cublasStatus_t status);

/// A cuBLAS handle (a Blas or BlasLt) was used by a second thread while a first was inside
/// one of its calls. A handle is used by one thread at a time: give each thread its own.
class CUDAKIT_API HandleInUse : public Error {
 public:
  /// what() is the whole message.
  using Error::Error;
  ErrorKind kind() const noexcept override { return ErrorKind::handle_in_use; }
};

}  // namespace cudakit
