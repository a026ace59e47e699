#include "cudakit/occupancy.hpp"

#include "cudakit/context.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"

namespace cudakit {

using driver::cu;

namespace {

Resource resource_of(const detail::FunctionState& f) {
  return Resource::of(ResourceKind::kernel, f.function, f.device, f.label.c_str());
}

detail::FunctionState& prepared(const Function& kernel, const char* call) {
  detail::FunctionState& f = kernel.state();
  check_not_poisoned(call, resource_of(f));
  ContextRef(f.context, f.device).make_current();
  return f;
}

CUlaunchConfig cluster_config(const detail::FunctionState& f, const LaunchConfig& c, CUlaunchAttribute& attribute,
                              const char* what) {
  if (!f.clusters_supported)
    throw InvalidArgument(std::string(what) + " for kernel '" + f.label +
                          "': thread-block clusters need compute capability 9.0 or newer; the device is " +
                          f.compute_capability.arch());
  CUlaunchConfig config = {};
  config.gridDimX = c.grid.x;
  config.gridDimY = c.grid.y;
  config.gridDimZ = c.grid.z;
  config.blockDimX = c.block.x;
  config.blockDimY = c.block.y;
  config.blockDimZ = c.block.z;
  config.sharedMemBytes = static_cast<unsigned>(c.shared_memory_bytes);
  if (c.cluster) {
    attribute = {};
    attribute.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attribute.value.clusterDim.x = c.cluster->x;
    attribute.value.clusterDim.y = c.cluster->y;
    attribute.value.clusterDim.z = c.cluster->z;
    config.attrs = &attribute;
    config.numAttrs = 1;
  }
  return config;
}

}  // namespace

int max_active_blocks_per_multiprocessor(const Function& kernel, unsigned block_threads,
                                         std::size_t dynamic_shared_bytes) {
  detail::FunctionState& f = prepared(kernel, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  if (block_threads == 0) throw InvalidArgument("max_active_blocks_per_multiprocessor: a block of 0 threads");
  int blocks = 0;
  check(cu.OccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f.function, static_cast<int>(block_threads),
                                                     dynamic_shared_bytes),
        "cuOccupancyMaxActiveBlocksPerMultiprocessor", resource_of(f));
  return blocks;
}

BlockSizeSuggestion suggested_block_size(const Function& kernel, std::size_t dynamic_shared_bytes,
                                         int block_size_limit) {
  detail::FunctionState& f = prepared(kernel, "cuOccupancyMaxPotentialBlockSize");
  BlockSizeSuggestion s;
  check(cu.OccupancyMaxPotentialBlockSize(&s.min_grid_size, &s.block_size, f.function, nullptr, dynamic_shared_bytes,
                                          block_size_limit),
        "cuOccupancyMaxPotentialBlockSize", resource_of(f));
  return s;
}

int max_active_clusters(const Function& kernel, const LaunchConfig& config) {
  detail::FunctionState& f = prepared(kernel, "cuOccupancyMaxActiveClusters");
  if (!config.cluster)
    throw InvalidArgument("max_active_clusters for kernel '" + f.label + "': the configuration names no cluster");
  CUlaunchAttribute attribute;
  CUlaunchConfig c = cluster_config(f, config, attribute, "max_active_clusters");
  int clusters = 0;
  check(cu.OccupancyMaxActiveClusters(&clusters, f.function, &c), "cuOccupancyMaxActiveClusters", resource_of(f));
  return clusters;
}

int max_potential_cluster_size(const Function& kernel, const LaunchConfig& config) {
  detail::FunctionState& f = prepared(kernel, "cuOccupancyMaxPotentialClusterSize");
  CUlaunchAttribute attribute;
  CUlaunchConfig c = cluster_config(f, config, attribute, "max_potential_cluster_size");
  int size = 0;
  check(cu.OccupancyMaxPotentialClusterSize(&size, f.function, &c), "cuOccupancyMaxPotentialClusterSize",
        resource_of(f));
  return size;
}

}  // namespace cudakit
