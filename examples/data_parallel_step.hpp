// The step both data-parallel examples run, one rank per GPU: each rank's kernel computes
// a gradient-like buffer from its own input (grad = x * (rank + 1) + rank / 4), an
// all-reduce sums the gradients of every rank, and every rank checks the sum against the
// host. Inputs are fresh random numbers drawn from a job seed and the rank, so that each
// rank can compute every other rank's gradient on the host without exchanging them.
#pragma once

#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "cudakit/cudakit.hpp"
#include "test_kernels.hpp"

namespace example {

/// Elements per rank: 16 Mi floats (64 MiB), an all-reduce NCCL runs at full bandwidth.
inline constexpr int gradient_elements = 1 << 24;

/// Rank `rank`'s input, from the job's seed.
inline std::vector<float> rank_input(std::uint64_t job_seed, int rank) {
  std::mt19937_64 rng(job_seed * 1000003 + static_cast<std::uint64_t>(rank));
  std::uniform_int_distribution<int> d(4, 35);  // quarters in [1, 9): sums of a few ranks are exact
  std::vector<float> x(gradient_elements);
  for (auto& v : x) v = static_cast<float>(d(rng)) / 4.0f;
  return x;
}

/// What rank `rank`'s kernel computes from its input.
inline float gradient(float x, int rank) { return x * static_cast<float>(rank + 1) + static_cast<float>(rank) / 4.0f; }

/// One rank's part: its stream, the kernels' module on its device, input and gradient.
struct RankStep {
  cudakit::Device device;
  int rank;
  cudakit::Stream stream{device};
  cudakit::Module module = cudakit::Module::load(device, cudakit_kernels::test_fatbin());
  cudakit::DeviceBuffer<float> x;
  cudakit::DeviceBuffer<float> grad{stream, gradient_elements, cudakit::uninitialized};

  RankStep(cudakit::Device d, int r, std::uint64_t job_seed)
      : device(d), rank(r), x(cudakit::upload(stream, rank_input(job_seed, r))) {}

  /// The gradient kernel (scale_offset: out = in * scale + offset).
  void compute_gradient() {
    auto kernel = module.kernel<void(const float*, float*, float, float, int)>("scale_offset");
    cudakit::launch(stream, kernel, {cudakit::grid_for(gradient_elements, 256), 256}, std::as_const(x), grad,
                    static_cast<float>(rank + 1), static_cast<float>(rank) / 4.0f, gradient_elements);
  }

  /// Compares the summed gradient with the host's; prints the first mismatch. 0 when right.
  int check(std::uint64_t job_seed, int ranks, const char* name) {
    std::vector<float> sum(gradient_elements, 0.0f);
    for (int r = 0; r < ranks; ++r) {
      std::vector<float> in = rank_input(job_seed, r);
      for (int i = 0; i < gradient_elements; ++i) sum[i] += gradient(in[i], r);
    }
    std::vector<float> out = cudakit::download(stream, grad);
    for (int i = 0; i < gradient_elements; ++i)
      if (out[i] != sum[i]) {
        std::printf("%s: FAILED: rank %d, element %d: %g instead of %g\n", name, rank, i, out[i], sum[i]);
        return 1;
      }
    return 0;
  }
};

}  // namespace example
