// A copy/compute pipeline: the input, in chunks, goes to the GPU, through a kernel
// (scale_offset) and back, on 4 streams so that one chunk's upload overlaps another's
// kernel and a third's download. The same chunks on one stream, one after another, are
// the baseline. Host memory is pinned (page-locked), which asynchronous copies need to
// overlap. Each stream has its own device buffers, and each chunk its own pinned ones, so
// no two streams ever share a buffer (cudakit would order them if they did).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "example_main.hpp"
#include "test_kernels.hpp"

namespace {

using ScaleOffset = void(const float*, float*, float, float, int);

constexpr int chunks = 16;
constexpr int chunk_elements = 1 << 21;  // 8 MiB of floats
constexpr float scale = 2.0f, offset = 0.5f;

struct Work {
  std::vector<cudakit::PinnedBuffer<float>> in, out;  // one each per chunk
};

// Runs every chunk through upload, kernel and download on `streams` (chunk c on stream
// c % streams.size()); returns the wall time in milliseconds.
double run_chunks(const cudakit::Gpu& gpu, const cudakit::Kernel<ScaleOffset>& kernel,
                  std::vector<cudakit::StreamRef>& streams, Work& work) {
  // Device buffers per stream, allocated (and warmed) before timing.
  std::vector<cudakit::DeviceBuffer<float>> d_in, d_out;
  for (auto s : streams) {
    d_in.emplace_back(s, chunk_elements, cudakit::uninitialized);
    d_out.emplace_back(s, chunk_elements, cudakit::uninitialized);
  }
  for (auto s : streams) s.synchronize();
  gpu.synchronize();

  auto t0 = std::chrono::steady_clock::now();
  for (int c = 0; c < chunks; ++c) {
    std::size_t k = std::size_t(c) % streams.size();
    cudakit::StreamRef s = streams[k];
    cudakit::copy(s, work.in[c], d_in[k]);
    cudakit::launch(s, kernel, cudakit::LaunchConfig{cudakit::grid_for(chunk_elements, 256), 256}, d_in[k], d_out[k],
                    scale, offset, chunk_elements);
    cudakit::copy(s, d_out[k], work.out[c]);
  }
  for (auto s : streams) s.synchronize();
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

// Wrong elements of every chunk's output; prints the first few.
long long check(const Work& work) {
  long long wrong = 0;
  for (int c = 0; c < chunks; ++c)
    for (int i = 0; i < chunk_elements; ++i) {
      float want = std::fma(work.in[c][i], scale, offset);
      float got = work.out[c][i];
      if (!(std::fabs(got - want) <= 1e-6f)) {
        if (wrong < 5) std::printf("pipeline: chunk %d element %d: %.9g instead of %.9g\n", c, i, got, want);
        ++wrong;
      }
    }
  return wrong;
}

void poison(Work& work) {
  for (auto& o : work.out) std::fill(o.begin(), o.end(), std::numeric_limits<float>::quiet_NaN());
}

int run() {
  cudakit::Gpu gpu{0};
  cudakit::Module module = gpu.load(cudakit_kernels::test_fatbin());
  auto kernel = module.kernel<ScaleOffset>("scale_offset");

  Work work;
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int c = 0; c < chunks; ++c) {
    work.in.emplace_back(chunk_elements, cudakit::uninitialized);
    work.out.emplace_back(chunk_elements, cudakit::uninitialized);
    for (auto& v : work.in.back()) v = dist(rng);
  }

  std::vector<cudakit::Stream> owned;
  for (int i = 0; i < 4; ++i) owned.push_back(gpu.new_stream());
  std::vector<cudakit::StreamRef> four;
  for (auto& s : owned) four.push_back(s.ref());
  std::vector<cudakit::StreamRef> one{gpu.stream()};

  // A warm-up of each, then the best of 5 rounds; every round's output is checked.
  double serial_ms = 1e30, pipelined_ms = 1e30;
  for (int round = 0; round < 6; ++round) {
    poison(work);
    double t = run_chunks(gpu, kernel, one, work);
    if (long long wrong = check(work); wrong != 0) {
      std::printf("pipeline: FAILED: %lld wrong elements on one stream\n", wrong);
      return 1;
    }
    if (round > 0) serial_ms = std::min(serial_ms, t);
    poison(work);
    t = run_chunks(gpu, kernel, four, work);
    if (long long wrong = check(work); wrong != 0) {
      std::printf("pipeline: FAILED: %lld wrong elements on 4 streams\n", wrong);
      return 1;
    }
    if (round > 0) pipelined_ms = std::min(pipelined_ms, t);
  }
  double mib = double(chunks) * chunk_elements * sizeof(float) / (1024.0 * 1024.0);
  std::printf("%d chunks of %d floats, %.0f MiB each way, best of 5: serial %.2f ms, 4 streams %.2f ms\n", chunks,
              chunk_elements, mib, serial_ms, pipelined_ms);
  std::printf("ok: 4-stream pipeline %.2fx faster than serial (%.2f ms vs %.2f ms)\n", serial_ms / pipelined_ms,
              pipelined_ms, serial_ms);
  return 0;
}

}  // namespace

int main() { return example::run("pipeline", run); }
