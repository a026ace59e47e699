#include "cudakit/occupancy.hpp"

#include "cudakit/context.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "driver/checked_call.hpp"
#include "launch/driver_launch_config.hpp"

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

void require_clusters(const detail::FunctionState& f, const char* what) {
  if (!f.clusters_supported)
    throw InvalidArgument(std::string(what) + " for kernel '" + f.label +
                          "': thread-block clusters need compute capability 9.0 or newer; the device is " +
                          f.compute_capability.arch());
}

// The cluster queries take the configuration's shape and its cluster attribute (the
// first one, when there is one); other attributes are not theirs to judge.
CUlaunchConfig cluster_config(const detail::DriverLaunchConfig& driver_config, const LaunchConfig& c) {
  CUlaunchConfig config = driver_config.config();
  config.numAttrs = c.cluster ? 1 : 0;
  return config;
}

}  // namespace

int max_active_blocks_per_multiprocessor(const Function& kernel, unsigned block_threads,
                                         std::size_t dynamic_shared_bytes) {
  detail::FunctionState& f = prepared(kernel, cu.OccupancyMaxActiveBlocksPerMultiprocessor.name());
  if (block_threads == 0) throw InvalidArgument("max_active_blocks_per_multiprocessor: a block of 0 threads");
  int blocks = 0;
  checked_call(cu.OccupancyMaxActiveBlocksPerMultiprocessor, resource_of(f),
               &blocks, f.function, static_cast<int>(block_threads), dynamic_shared_bytes);
  return blocks;
}

BlockSizeSuggestion suggested_block_size(const Function& kernel, std::size_t dynamic_shared_bytes,
                                         int block_size_limit) {
  detail::FunctionState& f = prepared(kernel, cu.OccupancyMaxPotentialBlockSize.name());
  BlockSizeSuggestion s;
  checked_call(cu.OccupancyMaxPotentialBlockSize, resource_of(f),
               &s.min_grid_size, &s.block_size, f.function, nullptr, dynamic_shared_bytes, block_size_limit);
  return s;
}

int max_active_clusters(const Function& kernel, const LaunchConfig& config) {
  detail::FunctionState& f = prepared(kernel, cu.OccupancyMaxActiveClusters.name());
  if (!config.cluster)
    throw InvalidArgument("max_active_clusters for kernel '" + f.label + "': the configuration names no cluster");
  require_clusters(f, "max_active_clusters");
  detail::DriverLaunchConfig driver_config(config, nullptr);
  CUlaunchConfig c = cluster_config(driver_config, config);
  int clusters = 0;
  checked_call(cu.OccupancyMaxActiveClusters, resource_of(f), &clusters, f.function, &c);
  return clusters;
}

int max_potential_cluster_size(const Function& kernel, const LaunchConfig& config) {
  detail::FunctionState& f = prepared(kernel, cu.OccupancyMaxPotentialClusterSize.name());
  require_clusters(f, "max_potential_cluster_size");
  detail::DriverLaunchConfig driver_config(config, nullptr);
  CUlaunchConfig c = cluster_config(driver_config, config);
  int size = 0;
  checked_call(cu.OccupancyMaxPotentialClusterSize, resource_of(f), &size, f.function, &c);
  return size;
}

}  // namespace cudakit
