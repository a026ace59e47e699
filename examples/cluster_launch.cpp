// A thread-block cluster launch (compute capability 9.0+): cluster_ids, from the embedded
// fatbin, writes each block's rank within its cluster; with clusters of 2 blocks, block b
// must have rank b % 2. On a GPU without clusters it says why and exits 0.
#include <cstdio>
#include <vector>

#include "example_main.hpp"
#include "test_kernels.hpp"

namespace {

int run() {
  cudakit::Gpu gpu{0};
  if (!gpu.device().supports_clusters()) {
    std::printf("ok: skipped: %s (%s) has no thread-block clusters (compute capability 9.0+ needed)\n",
                gpu.device().name().c_str(), gpu.arch().c_str());
    return 0;
  }
  cudakit::Module module = gpu.load(cudakit_kernels::test_fatbin());
  auto cluster_ids = module.kernel<void(unsigned*)>("cluster_ids");

  const unsigned blocks = 128, cluster = 2;
  auto ranks = gpu.alloc<unsigned>(blocks, cudakit::uninitialized);
  gpu.fill(ranks, 0xffffffffu);  // a block that does not write leaves this visible
  gpu.launch(cluster_ids, cudakit::LaunchConfig{.grid = blocks, .block = 32, .cluster = cudakit::Dim3{cluster}}, ranks);
  std::vector<unsigned> host = gpu.download(ranks);

  int wrong = 0;
  for (unsigned b = 0; b < blocks; ++b) {
    if (host[b] != b % cluster) {
      if (wrong < 5) std::printf("cluster_launch: block %u has rank %u instead of %u\n", b, host[b], b % cluster);
      ++wrong;
    }
  }
  if (wrong != 0) {
    std::printf("cluster_launch: FAILED: %d of %u blocks have the wrong rank\n", wrong, blocks);
    return 1;
  }
  std::printf("ok: %u blocks in clusters of %u on %s, every block's rank right\n", blocks, cluster,
              gpu.device().name().c_str());
  return 0;
}

}  // namespace

int main() { return example::run("cluster_launch", run); }
