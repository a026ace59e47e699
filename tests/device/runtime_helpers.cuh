// What the nvcc-compiled device tests share: a spin kernel that holds a stream, launched
// through the runtime inside declared work, and fresh random data for each run.
#pragma once

#include <cuda_runtime_api.h>

#include <random>
#include <vector>

#include "cudakit/cudakit.hpp"
#include "gpu_fixture.hpp"

namespace cudakit::testing {
namespace {

__global__ void spin_for(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

// Holds `s` for about `ms` milliseconds of `device`'s clock: a spin kernel launched through
// the runtime, as declared work with nothing declared (its device's context is current for
// the runtime, for a stream of any device).
inline void hold(StreamRef s, const Device& device, double ms) {
  const long long cycles = cudakit::testing::spin_cycles(device, ms);
  enqueue(s, reads(), [&](CUstream h) { spin_for<<<1, 1, 0, h>>>(cycles); });
}

// Fresh random values in [1, 2) each run: never zero, never the poison (a NaN).
inline std::vector<float> fresh_values(std::size_t n) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(1.0f, 2.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Fresh random integers in [lo, hi] each run (sums of them stay exact).
template <class T>
std::vector<T> fresh_integers(std::size_t n, T lo, T hi) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_int_distribution<T> dist(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

}  // namespace
}  // namespace cudakit::testing
