// Compiled by nvcc -std=c++20: every public header must be valid CUDA C++.
#include <cudakit/cudakit.hpp>

__global__ void touch(float* p) { p[threadIdx.x] = 1.0f; }

int cudakit_headers_compile_as_cuda() { return static_cast<int>(cudakit::driver::entry_count); }
