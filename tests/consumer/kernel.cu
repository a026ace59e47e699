// A CUDA source that uses cudakit: the public headers compile as CUDA C++ in a consumer's
// own nvcc build, beside a kernel of its own, and the program links the library.
#include <cudakit/cudakit.hpp>

#include <cstdio>

__global__ void scale(float* data, float factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= factor;
}

int main() {
  try {
    cudakit::Gpu gpu{0};
    cudakit::DeviceBuffer<float> data = gpu.upload(std::vector<float>{1.0f, 2.0f, 3.0f});
    std::printf("cudakit %.*s from CUDA C++: %zu floats on %s\n", static_cast<int>(cudakit::version().size()),
                cudakit::version().data(), data.size(), gpu.device().name().c_str());
  } catch (const cudakit::DriverUnavailable& e) {
    std::printf("cudakit from CUDA C++, no driver (expected without a GPU): %s\n", e.what());
  }
  return 0;
}
