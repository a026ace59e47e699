// CUB on a cudakit stream: a sum and a sort of fresh random data, their temporary storage
// from cudakit's memory pool and their buffers declared, then the same sum captured into a
// graph (with a scratch buffer made before the capture) and replayed. Checked against the
// host.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "cudakit/interop/cub.hpp"
#include "example_main.hpp"

namespace {

int run() {
  cudakit::Gpu gpu{0};
  const int n = (1 << 22) + 5;
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_int_distribution<std::int64_t> dist(-1'000'000, 1'000'000);
  std::vector<std::int64_t> host(n);
  for (auto& v : host) v = dist(rng);
  const std::int64_t want_sum = std::accumulate(host.begin(), host.end(), std::int64_t{0});

  cudakit::StreamRef s = gpu.stream();
  auto values = gpu.upload(host);
  auto sum = gpu.alloc<std::int64_t>(1, cudakit::uninitialized);
  cudakit::run_cub(s, cudakit::reads(values), cudakit::writes(sum), [&](void* temp, std::size_t& bytes, cudaStream_t h) {
    return cub::DeviceReduce::Sum(temp, bytes, values.data(), sum.data(), n, h);
  });
  const std::int64_t got_sum = gpu.download(sum).at(0);

  auto sorted = gpu.alloc<std::int64_t>(n, cudakit::uninitialized);
  cudakit::run_cub(s, cudakit::reads(values), cudakit::writes(sorted), [&](void* temp, std::size_t& bytes, cudaStream_t h) {
    return cub::DeviceRadixSort::SortKeys(temp, bytes, values.data(), sorted.data(), n, 0, 64, h);
  });
  std::vector<std::int64_t> got_sorted = gpu.download(sorted);
  std::vector<std::int64_t> want_sorted = host;
  std::sort(want_sorted.begin(), want_sorted.end());

  // The sum in a graph: the scratch buffer is sized by a first run outside the capture.
  cudakit::DeviceBuffer<std::byte> scratch;
  auto reduce = [&] {
    cudakit::run_cub(s, scratch, cudakit::reads(values), cudakit::writes(sum), [&](void* temp, std::size_t& bytes, cudaStream_t h) {
      return cub::DeviceReduce::Sum(temp, bytes, values.data(), sum.data(), n, h);
    });
  };
  reduce();
  cudakit::fill_pattern8(s, sum, 0xBD);  // poisoned: the replays must write it
  cudakit::GraphExec exec = gpu.capture_nonempty(reduce).instantiate();
  for (int i = 0; i < 10; ++i) gpu.launch(exec);
  const std::int64_t got_replayed = gpu.download(sum).at(0);

  if (got_sum != want_sum || got_replayed != want_sum) {
    std::printf("cub_reduce: FAILED: sum %lld, replayed %lld, host %lld\n", static_cast<long long>(got_sum),
                static_cast<long long>(got_replayed), static_cast<long long>(want_sum));
    return 1;
  }
  if (got_sorted != want_sorted) {
    std::printf("cub_reduce: FAILED: the radix sort differs from the host's sort\n");
    return 1;
  }
  std::printf("ok: CUB sum (%lld) and radix sort of %d random integers match the host, on a cudakit stream and in a "
              "replayed graph\n",
              static_cast<long long>(got_sum), n);
  return 0;
}

}  // namespace

int main() { return example::run("cub_reduce", run); }
