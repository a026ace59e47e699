// What the nvcc-compiled device tests share: the kernel of a stream gate, launched through
// the runtime inside declared work, and fresh random data for each run.
#pragma once

#include <cuda_runtime_api.h>

#include <random>
#include <vector>

#include "cudakit/cudakit.hpp"
#include "cudakit/interop/runtime_kernel.hpp"
#include "gpu_fixture.hpp"
#include "stream_gate.hpp"

namespace cudakit::testing {
namespace {

__global__ void wait_for_gate(int* flag, long long max_cycles) { wait_until_gate_opens(flag, max_cycles); }

// Queues the gate's kernel on `s` (StreamGate::LaunchWait): this program's own kernel,
// launched through the runtime as declared work with nothing declared (its device's
// context is current for the runtime, for a stream of any device).
inline void launch_wait_for_gate(StreamRef s, int* flag, long long max_cycles) {
  enqueue(s, reads(), [&](CUstream h) { wait_for_gate<<<1, 1, 0, h>>>(flag, max_cycles); });
}

// Loads each of `kernels` into `device`'s primary context now. The runtime loads a kernel
// at its first launch (lazy loading, CUDA's default), and a load may wait for the running
// kernels of its context: a first launch while a gate holds a stream of that context
// could wait for the gate, which the host, blocked in that launch, cannot open. Tests load
// what they launch while a gate holds before they hold (CUB and Thrust run once instead).
template <class... Sigs>
void load_kernels(const Device& device, Sigs*... kernels) {
  ((void)runtime_kernel(kernels, device), ...);
}

// Holds `s`, a stream of `device`, until the gate opens (stream_gate.hpp).
inline StreamGate hold(StreamRef s, const Device& device) {
  load_kernels(device, wait_for_gate);  // a second gate may hold another stream of the device
  return StreamGate(s, device, launch_wait_for_gate);
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
