// CUB and Thrust on cudakit streams (interop/cub.hpp, interop/thrust.hpp): results against
// the host on fresh random data, temporary storage from cudakit's pool, ordering across
// streams through what is declared, and CUB inside a captured graph with a scratch buffer.
#include <gtest/gtest.h>

#include <thrust/device_ptr.h>
#include <thrust/reduce.h>
#include <thrust/sort.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "cudakit/cudakit.hpp"
#include "cudakit/interop/cub.hpp"
#include "cudakit/interop/thrust.hpp"
#include "gpu_fixture.hpp"
#include "runtime_helpers.cuh"

namespace cudakit {
namespace {

using testing::fresh_integers;
using testing::expect_held;
using testing::GpuTest;
using testing::hold;
using testing::StreamGate;

__global__ void add_one(int* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] += 1;
}

std::vector<float> fresh_floats(std::size_t n) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-1000.0f, 1000.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

class CcclTest : public GpuTest {
 protected:
  static constexpr int n = 1'000'003;  // odd: the algorithms' tails are exercised
};

// ---- CUB ----

TEST_F(CcclTest, CubReduceSumMatchesTheHost) {
  Stream s(device());
  auto values = fresh_integers<std::int64_t>(n, -1'000'000, 1'000'000);
  DeviceBuffer<std::int64_t> in = upload(s, values), sum(s, 1, uninitialized);
  fill_pattern8(s, sum, 0xBD);
  run_cub(s, reads(in), writes(sum), [&](void* temp, std::size_t& bytes, cudaStream_t h) {
    return cub::DeviceReduce::Sum(temp, bytes, in.data(), sum.data(), n, h);
  });
  EXPECT_EQ(download(s, sum).at(0), std::accumulate(values.begin(), values.end(), std::int64_t{0}));
}

TEST_F(CcclTest, CubRadixSortPairsMatchesAStableHostSort) {
  Stream s(device());
  auto keys = fresh_integers<std::uint32_t>(n, 0, 1u << 20);  // repeats: stability shows
  std::vector<std::uint32_t> positions(n);
  std::iota(positions.begin(), positions.end(), 0u);
  DeviceBuffer<std::uint32_t> keys_in = upload(s, keys), values_in = upload(s, positions);
  DeviceBuffer<std::uint32_t> keys_out(s, n, uninitialized), values_out(s, n, uninitialized);
  run_cub(s, reads(keys_in, values_in), writes(keys_out, values_out), [&](void* temp, std::size_t& bytes, cudaStream_t h) {
    return cub::DeviceRadixSort::SortPairs(temp, bytes, keys_in.data(), keys_out.data(), values_in.data(),
                                           values_out.data(), n, 0, 32, h);
  });
  std::vector<std::uint32_t> order = positions;
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return keys[a] < keys[b]; });
  std::vector<std::uint32_t> sorted_keys(n);
  for (int i = 0; i < n; ++i) sorted_keys[i] = keys[order[i]];
  EXPECT_EQ(download(s, keys_out), sorted_keys);
  EXPECT_EQ(download(s, values_out), order);
}

TEST_F(CcclTest, ACubReductionOnStreamBWaitsForTheWriterHeldOnStreamA) {
  Stream a(device()), b(device());
  auto old_values = fresh_integers<std::int64_t>(n, 1, 1000), new_values = fresh_integers<std::int64_t>(n, 1, 1000);
  DeviceBuffer<std::int64_t> data = upload(a, old_values), source = upload(a, new_values), sum(b, 1, uninitialized);
  auto sum_on_b = [&](const DeviceBuffer<std::int64_t>& in, DeviceBuffer<std::int64_t>& out) {
    run_cub(b, reads(in), writes(out), [&](void* temp, std::size_t& bytes, cudaStream_t h) {
      return cub::DeviceReduce::Sum(temp, bytes, in.data(), out.data(), n, h);
    });
  };
  DeviceBuffer<std::int64_t> warm(b, 1, uninitialized);
  sum_on_b(source, warm);  // CUB's kernels load now, not behind the gate (runtime_helpers.cuh)
  a.synchronize();
  b.synchronize();
  StreamGate gate = hold(a, device());
  copy(a, source, data);  // a writes data once the gate opens
  sum_on_b(data, sum);
  expect_held(a, "the gate holds a");
  gate.open();
  EXPECT_EQ(download(b, sum).at(0), std::accumulate(new_values.begin(), new_values.end(), std::int64_t{0}));
}

TEST_F(CcclTest, CubInsideACaptureRunsOnAScratchBufferAndReplaysExactly) {
  Stream s(device());
  auto values = fresh_integers<int>(n, -100, 100);
  const std::int64_t start = std::accumulate(values.begin(), values.end(), std::int64_t{0});
  auto data = std::make_unique<DeviceBuffer<int>>(upload(s, values));
  DeviceBuffer<long long> sum(s, 1, uninitialized);
  DeviceBuffer<std::byte> scratch;
  auto reduce = [&](StreamRef on) {
    run_cub(on, scratch, reads(*data), writes(sum), [&](void* temp, std::size_t& bytes, cudaStream_t h) {
      return cub::DeviceReduce::Sum(temp, bytes, data->data(), sum.data(), n, h);
    });
  };
  reduce(s);  // sizes the scratch outside the capture
  EXPECT_GT(scratch.size(), 0u);
  Graph g = capture_nonempty(s, [&] {
    enqueue(s, writes(*data), [&](CUstream h) { add_one<<<(n + 255) / 256, 256, 0, h>>>(data->data(), n); });
    reduce(s);
  });
  data.reset();  // the graph keeps the data and the scratch
  GraphExec exec = g.instantiate();
  constexpr int replays = 100;
  for (int i = 0; i < replays; ++i) exec.launch(s);
  EXPECT_EQ(download(s, sum).at(0), start + std::int64_t{replays} * n);
}

TEST_F(CcclTest, CubWithoutScratchInsideACaptureIsRefusedAndTheStreamWorksAfter) {
  Stream s(device());
  DeviceBuffer<int> data = upload(s, fresh_integers<int>(1000, 1, 9));
  DeviceBuffer<long long> sum(s, 1, uninitialized);
  auto reduce = [&] {
    run_cub(s, reads(data), writes(sum), [&](void* temp, std::size_t& bytes, cudaStream_t h) {
      return cub::DeviceReduce::Sum(temp, bytes, data.data(), sum.data(), 1000, h);
    });
  };
  EXPECT_THROW((void)capture(s, reduce), CaptureError);
  reduce();
  auto host = download(s, data);
  EXPECT_EQ(download(s, sum).at(0), std::accumulate(host.begin(), host.end(), 0LL));
}

// ---- Thrust ----

TEST_F(CcclTest, ThrustSortOnACudakitStreamMatchesTheHost) {
  Stream s(device());
  auto keys = fresh_floats(n);
  DeviceBuffer<float> d = upload(s, keys);
  ThrustAllocator temp(s);
  enqueue(s, writes(d), [&](CUstream) {
    auto begin = thrust::device_pointer_cast(d.data());
    thrust::sort(thrust_on(s, temp), begin, begin + n);
  });
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(download(s, d), keys);
}

TEST_F(CcclTest, ThrustReduceReturnsTheSumOfFreshData) {
  Stream s(device());
  auto values = fresh_integers<long long>(n, -1'000'000, 1'000'000);
  DeviceBuffer<long long> d = upload(s, values);
  ThrustAllocator temp(s);
  long long sum = enqueue(s, reads(d), [&](CUstream) {
    auto begin = thrust::device_pointer_cast(d.data());
    return thrust::reduce(thrust_on(s, temp), begin, begin + n, 0LL);
  });
  EXPECT_EQ(sum, std::accumulate(values.begin(), values.end(), 0LL));
}

TEST_F(CcclTest, AReaderOnStreamBWaitsForAThrustSortHeldOnStreamA) {
  Stream a(device()), b(device());
  auto keys = fresh_floats(n);
  DeviceBuffer<float> d = upload(a, keys), out(b, n, uninitialized);
  fill_pattern8(b, out, 0xBD);
  ThrustAllocator temp(a);
  auto sort_on_a = [&](DeviceBuffer<float>& keys_on_a) {
    enqueue(a, writes(keys_on_a), [&](CUstream) {
      auto begin = thrust::device_pointer_cast(keys_on_a.data());
      thrust::sort(thrust_on(a, temp), begin, begin + n);
    });
  };
  DeviceBuffer<float> warm = upload(a, keys);
  sort_on_a(warm);  // Thrust's kernels load now, not behind the gate (runtime_helpers.cuh)
  a.synchronize();
  StreamGate gate = hold(a, device());
  sort_on_a(d);
  copy(b, d, out);  // b reads the sorted keys: waits for a
  expect_held(a, "the gate holds a");
  gate.open();
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(download(b, out), keys);
}

}  // namespace
}  // namespace cudakit
