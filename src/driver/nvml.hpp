// Internal: the one question cudakit asks NVML (the NVIDIA driver's management library,
// libnvidia-ml.so.1): are two GPUs linked by NVLink? The CUDA driver API does not say.
//
// NVML is opened at run time on the first question and never required: without it, or
// when it cannot answer, the answer is "unknown". Only this folder calls nvml* functions.
#pragma once

#include <optional>
#include <string>

namespace cudakit::nvml {

/// Whether NVML reports NVLink peer-to-peer between the GPUs at these PCI addresses
/// ("0000:19:00.0"); nullopt when NVML is missing or cannot tell.
std::optional<bool> nvlink_between(const std::string& pci_bus_id_a, const std::string& pci_bus_id_b);

namespace testing {
/// Unit tests: answers nvlink_between with `answer` instead of asking NVML (null: ask NVML again).
using Answer = std::optional<bool> (*)(const std::string&, const std::string&);
void replace(Answer answer);
}  // namespace testing

}  // namespace cudakit::nvml
