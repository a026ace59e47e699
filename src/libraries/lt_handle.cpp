// Pooled cuBLASLt handles (lt_handle.hpp).
#include "libraries/lt_handle.hpp"

#include "cudakit/error.hpp"
#include "libraries/blas_error.hpp"
#include "libraries/handle_setup.hpp"
#include "libraries/handle_pool.hpp"
#include "libraries/libraries_testing.hpp"

namespace cudakit::detail {

namespace {

HandlePool<LtSlot>& pool() {
  static auto* p = new HandlePool<LtSlot>;  // never destroyed: handles outlive main's statics
  return *p;
}

}  // namespace

LtSlot::~LtSlot() {
  plans.clear();
  if (handle != nullptr)
    destroy_library_handle(device, cublas::Entry::LtDestroy, "cuBLASLt handle release",
                           [&] { return api->LtDestroy(handle); });
}

std::unique_ptr<LtSlot> lease_lt_slot(StreamRef stream, const char* operation) {
  std::unique_ptr<LtSlot> slot = pool().take_for(stream, operation);
  if (slot == nullptr)
    slot = make_slot<LtSlot>(cublas::api(), stream.device_ordinal(), cublas::Entry::LtCreate,
                             [](LtSlot& made) { return made.api->LtCreate(&made.handle); });
  slot->stream = stream.handle();
  return slot;
}

void return_lt_slot(std::unique_ptr<LtSlot> slot) noexcept {
  if (slot != nullptr) pool().give_back(std::move(slot));
}

void release_lt_handles_for_testing() { pool().take_all(); }

}  // namespace cudakit::detail
