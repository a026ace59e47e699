#include "cudakit/launch_config.hpp"

#include "cudakit/error.hpp"
#include "launch/driver_launch_config.hpp"

namespace cudakit {

std::string to_string(Dim3 d) {
  return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " + std::to_string(d.z) + ")";
}

namespace detail {

DriverLaunchConfig::DriverLaunchConfig(const LaunchConfig& c, CUstream stream) noexcept : attributes_{}, config_{} {
  unsigned n = 0;
  if (c.cluster) {
    attributes_[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attributes_[n].value.clusterDim.x = c.cluster->x;
    attributes_[n].value.clusterDim.y = c.cluster->y;
    attributes_[n].value.clusterDim.z = c.cluster->z;
    ++n;
  }
  if (c.cooperative) {
    attributes_[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attributes_[n].value.cooperative = 1;
    ++n;
  }
  if (c.priority) {
    attributes_[n].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
    attributes_[n].value.priority = *c.priority;
    ++n;
  }
  if (c.programmatic_dependent_launch) {
    attributes_[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attributes_[n].value.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  config_.gridDimX = c.grid.x;
  config_.gridDimY = c.grid.y;
  config_.gridDimZ = c.grid.z;
  config_.blockDimX = c.block.x;
  config_.blockDimY = c.block.y;
  config_.blockDimZ = c.block.z;
  config_.sharedMemBytes = static_cast<unsigned>(c.shared_memory_bytes);
  config_.hStream = stream;
  config_.attrs = n == 0 ? nullptr : attributes_;
  config_.numAttrs = n;
}

CUDA_KERNEL_NODE_PARAMS DriverLaunchConfig::kernel_node_params(CUfunction function, void** params) const noexcept {
  CUDA_KERNEL_NODE_PARAMS p{};
  p.func = function;
  p.gridDimX = config_.gridDimX;
  p.gridDimY = config_.gridDimY;
  p.gridDimZ = config_.gridDimZ;
  p.blockDimX = config_.blockDimX;
  p.blockDimY = config_.blockDimY;
  p.blockDimZ = config_.blockDimZ;
  p.sharedMemBytes = config_.sharedMemBytes;
  p.kernelParams = params;
  return p;
}

void throw_bad_extent(long long value) {
  throw InvalidArgument("a launch extent of " + std::to_string(value) + " is negative");
}

void throw_bad_extent(unsigned long long value) {
  throw InvalidArgument("a launch extent of " + std::to_string(value) + " does not fit in 32 bits");
}

Dim3 grid_for_count(std::uint64_t n, unsigned block, bool negative) {
  if (negative) throw InvalidArgument("grid_for: a negative item count");
  if (block == 0) throw InvalidArgument("grid_for(" + std::to_string(n) + ", 0): a block of 0 threads");
  std::uint64_t blocks = n / block + (n % block != 0);
  if (blocks > 0xffffffffull)
    throw InvalidArgument("grid_for(" + std::to_string(n) + ", " + std::to_string(block) + ") needs " +
                          std::to_string(blocks) + " blocks, more than a grid dimension holds");
  return Dim3(static_cast<unsigned>(blocks));
}

}  // namespace detail

Dim3 grid_for(Dim3 extent, Dim3 block) {
  if (block.x == 0 || block.y == 0 || block.z == 0)
    throw InvalidArgument("grid_for(" + to_string(extent) + ", " + to_string(block) + "): a block with a zero extent");
  auto cover = [](unsigned n, unsigned b) { return n / b + (n % b != 0); };
  return Dim3(cover(extent.x, block.x), cover(extent.y, block.y), cover(extent.z, block.z));
}

}  // namespace cudakit
