// Pooled cuBLAS handles (blas_handle.hpp): made, bound to a stream with their workspace,
// given back, and released when unit tests reset the devices.
#include "libraries/blas_handle.hpp"

#include <string>

#include "cudakit/detail/capture_guard.hpp"
#include "cudakit/error.hpp"
#include "libraries/blas_error.hpp"
#include "libraries/handle_setup.hpp"
#include "libraries/handle_pool.hpp"
#include "libraries/libraries_testing.hpp"

namespace cudakit::detail {

namespace {

HandlePool<BlasSlot>& pool() {
  static auto* p = new HandlePool<BlasSlot>;  // never destroyed: handles outlive main's statics
  return *p;
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
  if (handle != nullptr)
    destroy_library_handle(device, cublas::Entry::Destroy, "cuBLAS handle release", [&] { return api->Destroy(handle); });
}

std::unique_ptr<BlasSlot> lease_blas_slot(StreamRef stream, const char* operation) {
  std::unique_ptr<BlasSlot> slot = pool().take_for(stream, operation);
  if (slot == nullptr)
    slot = make_slot<BlasSlot>(cublas::api(), stream.device_ordinal(), cublas::Entry::Create,
                             [](BlasSlot& made) { return made.api->Create(&made.handle); });
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
