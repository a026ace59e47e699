// Thrust on a cudakit stream: a sort of fresh random keys with Thrust's temporary storage
// from cudakit's memory pool (no cudaMalloc, no synchronization after the sort), declared
// as a write so that a copy on another stream waits for it. Checked against std::sort.
#include <thrust/device_ptr.h>
#include <thrust/sort.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "cudakit/interop/thrust.hpp"
#include "example_main.hpp"

namespace {

int run() {
  cudakit::Gpu gpu{0};
  const int n = (1 << 22) + 9;
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-1e6f, 1e6f);
  std::vector<float> host(n);
  for (auto& v : host) v = dist(rng);

  auto keys = gpu.upload(host);
  cudakit::ThrustAllocator temp(gpu.stream());
  cudakit::enqueue(gpu.stream(), cudakit::writes(keys), [&](CUstream) {
    auto begin = thrust::device_pointer_cast(keys.data());
    thrust::sort(cudakit::thrust_on(gpu.stream(), temp), begin, begin + n);
  });
  // Another stream reads the sorted keys: cudakit orders the copy after the sort.
  cudakit::Stream other = gpu.new_stream();
  cudakit::DeviceBuffer<float> copy(other, n, cudakit::uninitialized);
  cudakit::copy(other, keys, copy);
  std::vector<float> got = cudakit::download(other, copy);

  std::sort(host.begin(), host.end());
  if (got != host) {
    auto at = std::mismatch(got.begin(), got.end(), host.begin()).first - got.begin();
    std::printf("thrust_sort: FAILED: first difference at %lld\n", static_cast<long long>(at));
    return 1;
  }
  std::printf("ok: Thrust sort of %d random keys on a cudakit stream (pool-backed temporary storage) matches std::sort\n",
              n);
  return 0;
}

}  // namespace

int main() { return example::run("thrust_sort", run); }
