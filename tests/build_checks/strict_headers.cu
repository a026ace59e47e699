// Compiled by nvcc with every warning an error (nvcc's and the host compiler's -Wall
// -Wextra): every public header, and the templates a program instantiates most, are
// warning-free CUDA C++. The list of headers is made at configure time from
// include/cudakit (every_public_header.cuh), so a new header is checked without an edit.
#include "every_public_header.cuh"

#include <cstdint>
#include <vector>

__global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] = a * x[i] + y[i];
}

// Never called: it instantiates the templates at compile time.
void cudakit_strict_headers_instantiate(cudakit::Gpu& gpu, const cudakit::Kernel<void(float, const float*, float*, int)>& k) {
  std::vector<float> host(16, 1.0f);
  cudakit::DeviceBuffer<float> x = gpu.upload(host);
  cudakit::DeviceBuffer<float> y(gpu.stream(), host.size(), cudakit::zeroed);
  cudakit::DeviceBuffer<double> d(gpu.stream(), 4, cudakit::uninitialized);
  cudakit::fill(gpu.stream(), d, 2.5);
  cudakit::fill(gpu.stream(), y.subspan(1), 1.0f);
  cudakit::copy(gpu.stream(), x, y);
  gpu.launch(k, cudakit::grid_for(16, 256), 256, 2.0f, x, y, 16);
  const cudakit::DeviceBuffer<float>& read_only = x;
  const float* p = read_only.data();
  cudakit::enqueue(gpu.stream(), cudakit::reads(read_only), cudakit::writes(y), [&](CUstream) { (void)p; });
  std::vector<float> out = gpu.download(y);
  (void)out;
  try {
    cudakit::Stream s(gpu.device());
  } catch (const cudakit::Error& e) {
    (void)(e.kind() == cudakit::ErrorKind::out_of_memory);
  }
}
