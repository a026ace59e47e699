// Internal: how error messages name a device ("device 0 (NVIDIA H200)"). Device names
// belong to the device layer, which caches them; it hands this layer a function that
// reads that cache, so the error layer names devices without including a layer above it.
#pragma once

#include <string>

namespace cudakit::detail {

/// Returns the name of device `ordinal` if it is known without a driver call, or "".
using DeviceNameReader = std::string (*)(int ordinal) noexcept;

/// Sets the function error messages use to name devices. Until one is set, they name a
/// device by its ordinal only.
void set_device_name_reader(DeviceNameReader reader) noexcept;

}  // namespace cudakit::detail
