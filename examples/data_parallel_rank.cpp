// One rank of the data-parallel step (data_parallel_step.hpp) as a job of N processes,
// each on its own GPU, bootstrapped through cudakit's TCP rendezvous at rank 0; started
// N at a time by scripts/run-data-parallel.sh (N = 1 runs alone).
//
// Environment:
//   CUDAKIT_RANK         this process's rank (default 0)
//   CUDAKIT_RANKS        the number of processes (default 1)
//   CUDAKIT_RENDEZVOUS   rank 0's host:port (default 127.0.0.1:29517)
//   CUDAKIT_LOCAL_GPU    the GPU to use (default: the rank modulo the GPUs present)
// Every rank gets the same fresh job seed from the unique id, so each can check the sum.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "data_parallel_step.hpp"
#include "example_main.hpp"
#include "test_kernels.hpp"

namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

int run() {
  using namespace cudakit;
  const int rank = env_int("CUDAKIT_RANK", 0), ranks = env_int("CUDAKIT_RANKS", 1);
  const char* address = std::getenv("CUDAKIT_RENDEZVOUS");
  const int gpu = env_int("CUDAKIT_LOCAL_GPU", rank % Device::count());
  nccl::UniqueId id = nccl::tcp_rendezvous(address ? address : "127.0.0.1:29517", rank, ranks, std::chrono::seconds(60));
  nccl::Options options;
  options.timeout = std::chrono::seconds(120);
  nccl::Communicator comm(id, ranks, rank, Device::get(gpu), options);
  std::uint64_t job_seed = 0;
  std::memcpy(&job_seed, id.bytes.data(), sizeof job_seed);  // NCCL's random magic: the same on every rank

  example::RankStep step(Device::get(gpu), rank, job_seed);
  auto start = std::chrono::steady_clock::now();
  step.compute_gradient();
  nccl::all_reduce_in_place(comm, step.stream, step.grad);
  comm.synchronize(step.stream);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (step.check(job_seed, ranks, "data_parallel_rank") != 0) return 1;
  comm.destroy();
  std::printf("ok: rank %d of %d on GPU %d (NCCL %s): the summed gradient matches the host; step %.1f ms\n", rank, ranks,
              gpu, nccl::version_string().c_str(), ms);
  return 0;
}

}  // namespace

int main() {
  return example::run("data_parallel_rank", [] {
    try {
      cudakit::nccl::version();
    } catch (const cudakit::nccl::NcclUnavailable& e) {
      std::printf("data_parallel_rank: no NCCL: %s\n", e.what());
      return 2;
    }
    return run();
  });
}
