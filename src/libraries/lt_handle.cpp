// Pooled cuBLASLt handles (lt_handle.hpp).
#include "libraries/lt_handle.hpp"

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

HandlePool<LtSlot>& pool() {
  static auto* p = new HandlePool<LtSlot>;  // never destroyed: handles outlive main's statics
  return *p;
}

std::unique_ptr<LtSlot> create(const cublas::Api& api, int device) {
  auto slot = std::make_unique<LtSlot>();
  slot->api = &api;
  slot->device = device;
  ContextRef(library_context(device), device).make_current();  // a handle belongs to the current device
  cublasStatus_t status = capture_tolerant(device, [&] { return api.LtCreate(&slot->handle); });
  check_blas(status, cublas::Entry::LtCreate, Resource::of_device(device), [] { return std::string("a new handle"); });
  slot->workspace = make_blas_workspace(device);  // on failure, ~LtSlot destroys the handle
  return slot;
}

}  // namespace

LtSlot::~LtSlot() {
  plans.clear();
  if (handle == nullptr) return;
  try {
    ContextRef(library_context(device), device).make_current();
  } catch (...) {
    // A dead context: the destroy is tried all the same, and reports what it reports.
  }
  if (cublasStatus_t s = api->LtDestroy(handle); s != CUBLAS_STATUS_SUCCESS) {
    BlasError e(s, cublas::name_of(cublas::Entry::LtDestroy), "a pooled handle", describe(Resource::of_device(device)));
    park_error({CUDA_SUCCESS, "cuBLASLt handle release", e.what()});
  }
}

std::unique_ptr<LtSlot> lease_lt_slot(StreamRef stream, const char* operation) {
  stream.require_handle(operation);
  const int device = stream.device_ordinal();
  check_not_poisoned(operation, Resource::of(ResourceKind::stream, stream.handle(), device));
  const cublas::Api& api = cublas::api();
  std::unique_ptr<LtSlot> slot = pool().take(device, stream.handle());
  if (slot == nullptr) slot = create(api, device);
  slot->stream = stream.handle();
  return slot;
}

void return_lt_slot(std::unique_ptr<LtSlot> slot) noexcept {
  if (slot != nullptr) pool().give_back(std::move(slot));
}

void release_lt_handles_for_testing() { pool().take_all(); }

}  // namespace cudakit::detail
