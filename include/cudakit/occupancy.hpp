// Occupancy: how many blocks of a kernel fit on the device at once.
//
//   int per_sm = max_active_blocks_per_multiprocessor(kernel, 256);
//   auto [block, min_grid] = suggested_block_size(kernel);
//   int clusters = max_active_clusters(kernel, LaunchConfig{.grid = 64, .block = 128, .cluster = Dim3{2}});
//
// Each is one driver query (not cached): size launches with them once, not per launch.
// Thread safety: call from any thread.
#pragma once

#include <cstddef>

#include "cudakit/export.hpp"
#include "cudakit/kernel.hpp"
#include "cudakit/launch_config.hpp"

namespace cudakit {

/// Blocks of `block_threads` threads (and `dynamic_shared_bytes` each) that fit on one
/// multiprocessor at once (cuOccupancyMaxActiveBlocksPerMultiprocessor).
CUDAKIT_API int max_active_blocks_per_multiprocessor(const Function& kernel, unsigned block_threads,
                                         std::size_t dynamic_shared_bytes = 0);

/// What suggested_block_size() returns.
struct CUDAKIT_API BlockSizeSuggestion {
  /// The block size with the highest occupancy.
  int block_size = 0;
  /// The smallest grid that reaches that occupancy on the whole device.
  int min_grid_size = 0;
};

/// The block size with the highest occupancy (cuOccupancyMaxPotentialBlockSize), for a fixed
/// dynamic shared memory size per block; `block_size_limit` caps it (0: no cap).
CUDAKIT_API BlockSizeSuggestion suggested_block_size(const Function& kernel, std::size_t dynamic_shared_bytes = 0,
                                         int block_size_limit = 0);

/// Clusters of `config.cluster` (required) that can be resident at once
/// (cuOccupancyMaxActiveClusters; compute capability 9.0+).
CUDAKIT_API int max_active_clusters(const Function& kernel, const LaunchConfig& config);

/// The largest cluster size the kernel can launch with in `config`'s shape
/// (cuOccupancyMaxPotentialClusterSize; compute capability 9.0+).
CUDAKIT_API int max_potential_cluster_size(const Function& kernel, const LaunchConfig& config);

}  // namespace cudakit
