// The cuBLAS libraries as loaded, and BlasError (blas_library.hpp).
#include <dlfcn.h>

#include <string>

#include "cudakit/blas_library.hpp"
#include "libraries/blas_error.hpp"
#include "libraries/cublas_api.hpp"

namespace cudakit {

namespace {

// The words cublas_api.h gives each status (the library's own are used only once loaded,
// and a status must be named without it too).
const char* description_of(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "the device does not support the operation (architecture mismatch)";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the requested operation is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "the functionality requires a license";
  }
  return "an unknown status";
}

}  // namespace

std::string blas_status_name(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "cuBLAS status " + std::to_string(static_cast<int>(status));
}

BlasError::BlasError(cublasStatus_t status, std::string call, std::string operation, std::string resource)
    : Error(call + (operation.empty() ? "" : " (" + operation + ")") + (resource.empty() ? "" : " on " + resource) +
            ": " + blas_status_name(status) + ": " + description_of(status)),
      status_(status),
      status_name_(blas_status_name(status)),
      call_(std::move(call)),
      operation_(std::move(operation)),
      resource_(std::move(resource)) {}

BlasLibrary blas_library() {
  const cublas::Api& api = cublas::api();
  std::size_t v = api.version;
  return {api.path, api.lt_path,
          std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100)};
}

void* blas_symbol(const char* name) {
  const cublas::Api& api = cublas::api();
  void* found = nullptr;
  if (api.blas_library != nullptr) found = dlsym(api.blas_library, name);
  if (found == nullptr && api.lt_library != nullptr) found = dlsym(api.lt_library, name);
  return found;
}

bool blas_available() {
  try {
    (void)cublas::api();
    return true;
  } catch (const FeatureUnavailable&) {
    return false;
  }
}

namespace detail {

void throw_blas_error(cublasStatus_t status, cublas::Entry call, std::string operation, const Resource& resource) {
  throw BlasError(status, cublas::name_of(call), std::move(operation),
                  resource.kind == ResourceKind::none && resource.device < 0 ? std::string() : describe(resource));
}

void park_blas_error(cublasStatus_t status, cublas::Entry call, const char* what, const Resource& resource,
                     const char* origin) noexcept {
  try {
    BlasError e(status, cublas::name_of(call), what,
                resource.kind == ResourceKind::none && resource.device < 0 ? std::string() : describe(resource));
    park_error({CUDA_SUCCESS, origin, e.what()});
  } catch (...) {
    park_error({CUDA_SUCCESS, origin, cublas::name_of(call)});
  }
}

}  // namespace detail

}  // namespace cudakit
