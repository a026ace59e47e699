// Pooled cuBLAS handles (blas_handle.hpp): bound to a stream with their workspace, and
// released when unit tests reset the devices.
#include "libraries/blas_handle.hpp"

#include <string>

#include "device/capture_tolerant_scope.hpp"
#include "cudakit/error.hpp"
#include "libraries/blas_error.hpp"
#include "libraries/handle_pool.hpp"
#include "libraries/libraries_testing.hpp"

namespace cudakit::detail {

void BlasSlot::bind(StreamRef to, const char* operation) {
  Resource res = Resource::of(ResourceKind::stream, to.handle(), to.device_ordinal());
  auto what = [&] { return std::string(operation) + ": binding the handle to the stream"; };
  stream = nullptr;  // not bound until both calls succeeded
  CaptureTolerantScope tolerant(device);
  check_blas(api->SetStream(handle, to.handle()), cublas::Entry::SetStream, res, what);
  check_blas(api->SetWorkspace(handle, workspace.data(), workspace.size_bytes()), cublas::Entry::SetWorkspace, res,
             what);
  stream = to.handle();
}

void release_blas_handles_for_testing() { release_idle_handles<BlasSlot>(); }

}  // namespace cudakit::detail
