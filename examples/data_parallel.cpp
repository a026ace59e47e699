// A data-parallel step in one process over every GPU present (one rank per GPU; one GPU
// is one rank): each rank's kernel computes a gradient-like buffer, an all-reduce inside
// one nccl::group sums them, and every rank checks the sum against the host.
// Needs NCCL (libnccl.so.2, or CUDAKIT_LIBNCCL); NVLink multicast stays off.
#include <chrono>
#include <cstdio>
#include <random>

#include "data_parallel_step.hpp"
#include "example_main.hpp"
#include "test_kernels.hpp"

namespace {

int run() {
  std::vector<cudakit::Device> devices = cudakit::Device::all();
  const int ranks = static_cast<int>(devices.size());
  auto comms = cudakit::nccl::Communicator::create_all(devices);
  const std::uint64_t job_seed = std::random_device{}();
  std::vector<std::unique_ptr<example::RankStep>> steps;
  for (int r = 0; r < ranks; ++r) steps.push_back(std::make_unique<example::RankStep>(devices[r], r, job_seed));

  auto start = std::chrono::steady_clock::now();
  for (auto& s : steps) s->compute_gradient();
  cudakit::nccl::group([&] {
    for (int r = 0; r < ranks; ++r) cudakit::nccl::all_reduce_in_place(comms[r], steps[r]->stream, steps[r]->grad);
  });
  for (int r = 0; r < ranks; ++r) comms[r].synchronize(steps[r]->stream);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  for (auto& s : steps)
    if (s->check(job_seed, ranks, "data_parallel") != 0) return 1;
  std::printf("ok: %d rank%s (NCCL %s), %d gradients of %.0f MiB summed and checked on every rank; step %.1f ms\n",
              ranks, ranks == 1 ? "" : "s", cudakit::nccl::version_string().c_str(), ranks,
              example::gradient_elements * 4.0 / (1 << 20), ms);
  return 0;
}

}  // namespace

int main() {
  return example::run("data_parallel", [] {
    try {
      cudakit::nccl::version();
    } catch (const cudakit::nccl::NcclUnavailable& e) {
      std::printf("data_parallel: no NCCL: %s\n", e.what());
      return 2;
    }
    return run();
  });
}
