// Handle workspaces (handle_setup.hpp).
#include "libraries/handle_setup.hpp"

#include "device/capture_tolerant_scope.hpp"
#include "cudakit/device.hpp"
#include "device/device_state.hpp"

namespace cudakit::detail {

std::size_t blas_workspace_bytes(int device) {
  return Device::get(device).compute_capability().major >= 9 ? std::size_t{32} << 20 : std::size_t{4} << 20;
}

DeviceBuffer<std::byte> make_blas_workspace(int device) {
  std::size_t bytes = blas_workspace_bytes(device);
  CaptureTolerantScope tolerant(device);  // lazy set-up never breaks a capture (DESIGN 6)
  return DeviceBuffer<std::byte>(StreamRef(service_stream(device), device), bytes, uninitialized);
}

}  // namespace cudakit::detail
