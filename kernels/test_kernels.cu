// Kernels the device tests, examples and benchmarks launch. extern "C" keeps their
// names plain for module lookups; each says what it is for.
#include <cstdint>

#include "stream_gate_flag.h"

extern "C" {

// Does nothing: the launch-cost benchmarks time submission, not work.
__global__ void empty_kernel() {}

// Takes 8 arguments and does nothing: launch cost with a larger parameter block.
__global__ void empty_kernel_8(const float*, float*, int, int, float, float, long long, long long) {}

// Spins for `cycles` clock cycles: slow work on a stream. A test that must know the
// stream is still held until it says so uses wait_for_gate instead.
__global__ void spin_kernel(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

// Holds its stream until the host opens the gate (stream_gate_flag.h): the kernel of a
// stream gate for tests that load this image (tests/device/stream_gate.hpp).
__global__ void wait_for_gate(int* flag, long long max_cycles) {
  cudakit::testing::wait_until_gate_opens(flag, max_cycles);
}

// y[i] = a * x[i] + y[i]
__global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// out[i] = in[i] * scale + offset
__global__ void scale_offset(const float* in, float* out, float scale, float offset, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * scale + offset;
}

// out[i] = a[i] + b[i]
__global__ void add_arrays(const float* a, const float* b, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

// data[i] += 1 (an in-place read-modify-write, for write-after-write ordering tests)
__global__ void increment(float* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] += 1.0f;
}

// Copies in to out after spinning `cycles`: a slow reader or writer for hazard tests.
__global__ void slow_copy(const float* in, float* out, int n, long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
}

// Sum of in[0..n) into *out (one block's shared-memory reduction, then an atomic add).
__global__ void reduce_sum(const float* in, float* out, int n) {
  extern __shared__ float partial[];
  float sum = 0.f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) sum += in[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}

// A five-point stencil in 2-D on an nx by ny grid (edges copied).
__global__ void stencil_2d(const float* in, float* out, int nx, int ny) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= nx || y >= ny) return;
  int i = y * nx + x;
  if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
    out[i] = in[i];
    return;
  }
  out[i] = 0.2f * (in[i] + in[i - 1] + in[i + 1] + in[i - nx] + in[i + nx]);
}

// Writes through `ptr` (pass a bad address to poison the context on purpose).
__global__ void write_through(int* ptr) { *ptr = 42; }

// Writes each block's rank in its cluster into out (a cluster-launch test). Clusters
// exist from sm_90 on; older GPUs refuse a cluster launch before this runs, so their
// code only has to compile (it writes an impossible rank).
__global__ void cluster_ids(unsigned* out) {
  unsigned rank = ~0u;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
#endif
  if (threadIdx.x == 0) out[blockIdx.x] = rank;
}

// Graph conditional nodes (CUDA 12.3+): sets the condition to whether *flag is nonzero.
__global__ void set_condition_from(cudaGraphConditionalHandle condition, const int* flag) {
  if (threadIdx.x == 0 && blockIdx.x == 0) cudaGraphSetConditional(condition, *flag != 0 ? 1u : 0u);
}

// The body of a while node: counts *remaining down and clears the condition at zero.
__global__ void count_down(cudaGraphConditionalHandle condition, int* remaining) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    int left = --*remaining;
    if (left <= 0) cudaGraphSetConditional(condition, 0u);
  }
}

}  // extern "C"

// A template kernel (C++ name, mangled): name expressions resolve it.
template <typename T>
__global__ void fill_value(T* out, T value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}
template __global__ void fill_value<float>(float*, float, int);
template __global__ void fill_value<int>(int*, int, int);
