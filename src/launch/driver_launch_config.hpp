// Internal: the one conversion from a LaunchConfig to the driver's launch structures. A
// launch (cuLaunchKernelEx), a graph kernel node (its parameters, then its attributes) and
// an occupancy query (cuOccupancyMaxActiveClusters) all read the same CUlaunchConfig.
#pragma once

#include <cuda.h>

#include <span>

#include "cudakit/launch_config.hpp"

namespace cudakit::detail {

/// A LaunchConfig as the driver takes it: the grid, block and dynamic shared memory, the
/// stream, and the launch attributes the configuration asks for (cluster first, then
/// cooperative, priority, programmatic dependent launch), all on the stack. Not copyable:
/// `config.attrs` points into the object itself.
class DriverLaunchConfig {
 public:
  DriverLaunchConfig(const LaunchConfig& c, CUstream stream) noexcept;
  DriverLaunchConfig(const DriverLaunchConfig&) = delete;
  DriverLaunchConfig& operator=(const DriverLaunchConfig&) = delete;

  /// For cuLaunchKernelEx and the occupancy queries.
  const CUlaunchConfig& config() const noexcept { return config_; }
  /// The attributes, for a graph kernel node (cuGraphKernelNodeSetAttribute, one each).
  std::span<const CUlaunchAttribute> attributes() const noexcept { return {attributes_, config_.numAttrs}; }
  /// A graph kernel node's parameters: the same shape, `function` and its arguments.
  CUDA_KERNEL_NODE_PARAMS kernel_node_params(CUfunction function, void** params) const noexcept;

 private:
  CUlaunchAttribute attributes_[4];
  CUlaunchConfig config_;
};

}  // namespace cudakit::detail
