// Pooled cuBLAS handles (blas_handle.hpp): made, bound to a stream with their workspace,
// given back, and released when unit tests reset the devices.
#include "libraries/blas_handle.hpp"

#include <string>

#include "cudakit/context.hpp"
#include "cudakit/detail/capture_guard.hpp"
#include "cudakit/error.hpp"
#include "device/device_state.hpp"
#include "libraries/blas_error.hpp"
#include "libraries/capture_tolerant.hpp"
#include "libraries/blas_workspace.hpp"
#include "libraries/handle_pool.hpp"
#include "libraries/libraries_testing.hpp"

namespace cudakit::detail {

namespace {

HandlePool<BlasSlot>& pool() {
  static auto* p = new HandlePool<BlasSlot>;  // never destroyed: handles outlive main's statics
  return *p;
}

std::unique_ptr<BlasSlot> create(const cublas::Api& api, int device) {
  auto slot = std::make_unique<BlasSlot>();
  slot->api = &api;
  slot->device = device;
  ContextRef(library_context(device), device).make_current();  // a handle belongs to the current device
  cublasStatus_t status = capture_tolerant(device, [&] { return api.Create(&slot->handle); });
  check_blas(status, cublas::Entry::Create, Resource::of_device(device), [] { return std::string("a new handle"); });
  slot->workspace = make_blas_workspace(device);  // on failure, ~BlasSlot destroys the handle
  return slot;
}

// cublasSetStream resets the handle's workspace to cuBLAS's own, so the workspace is set
// again after it, every time.
void bind(BlasSlot& slot, StreamRef stream, const char* operation) {
  Resource res = Resource::of(ResourceKind::stream, stream.handle(), stream.device_ordinal());
  auto what = [&] { return std::string(operation) + ": binding the handle to the stream"; };
  slot.stream = nullptr;  // not bound until both calls succeeded
  CaptureTolerantScope tolerant(slot.device);
  check_blas(slot.api->SetStream(slot.handle, stream.handle()), cublas::Entry::SetStream, res, what);
  check_blas(slot.api->SetWorkspace(slot.handle, slot.workspace.data(), slot.workspace.size_bytes()),
             cublas::Entry::SetWorkspace, res, what);
  slot.stream = stream.handle();
}

}  // namespace

BlasSlot::~BlasSlot() {
  if (handle == nullptr) return;
  try {
    ContextRef(library_context(device), device).make_current();
  } catch (...) {
    // A dead context: the destroy is tried all the same, and reports what it reports.
  }
  if (cublasStatus_t s = api->Destroy(handle); s != CUBLAS_STATUS_SUCCESS) {
    BlasError e(s, cublas::name_of(cublas::Entry::Destroy), "a pooled handle", describe(Resource::of_device(device)));
    park_error({CUDA_SUCCESS, "cuBLAS handle release", e.what()});
  }
}

std::unique_ptr<BlasSlot> lease_blas_slot(StreamRef stream, const char* operation) {
  stream.require_handle(operation);
  const int device = stream.device_ordinal();
  check_not_poisoned(operation, Resource::of(ResourceKind::stream, stream.handle(), device));
  const cublas::Api& api = cublas::api();
  std::unique_ptr<BlasSlot> slot = pool().take(device, stream.handle());
  if (slot == nullptr) slot = create(api, device);
  if (slot->stream != stream.handle()) {
    try {
      bind(*slot, stream, operation);
    } catch (...) {
      return_blas_slot(std::move(slot));  // still a good handle, unbound
      throw;
    }
  }
  return slot;
}

void return_blas_slot(std::unique_ptr<BlasSlot> slot) noexcept {
  if (slot != nullptr) pool().give_back(std::move(slot));
}

void release_blas_handles_for_testing() { pool().take_all(); }

}  // namespace cudakit::detail
