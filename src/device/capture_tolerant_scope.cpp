// The relaxed-mode scope for lazy set-up beside a capture (capture_tolerant_scope.hpp).
#include "device/capture_tolerant_scope.hpp"

#include "cudakit/detail/capture_counts.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"

namespace cudakit::detail {

using driver::cu;

void CaptureTolerantScope::relax() {
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  CUresult r = cu.ThreadExchangeStreamCaptureMode(&mode);
  if (r == CUDA_SUCCESS) {
    previous_ = mode;
    exchanged_ = true;
    return;
  }
  refusal_ = r;
  if (is_sticky(r)) {
    check(r, cu.ThreadExchangeStreamCaptureMode.name(), device_ >= 0 ? Resource::of_device(device_) : Resource::none());
  }
}

void CaptureTolerantScope::restore() noexcept {
  CUstreamCaptureMode mode = previous_;
  CUresult r = CUDA_SUCCESS;
  try {
    r = cu.ThreadExchangeStreamCaptureMode(&mode);
  } catch (...) {
  }
  // Non-sticky: the thread stays relaxed, which only lets more calls through. Sticky: the
  // context is dead; parked (and so poisoning the device for what follows).
  if (is_sticky(r))
    park_driver_error(r, cu.ThreadExchangeStreamCaptureMode.name(),
                      device_ >= 0 ? Resource::of_device(device_) : Resource::none(), "capture mode restore");
}

}  // namespace cudakit::detail
