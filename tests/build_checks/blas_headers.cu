// Compiled by nvcc -std=c++20: the cuBLAS headers (outside the umbrella) are valid CUDA C++.
#include <cudakit/blas.hpp>
#include <cudakit/blas_library.hpp>
#include <cudakit/blas_lt.hpp>

__global__ void scale(__nv_bfloat16* p) { p[threadIdx.x] = __float2bfloat16(2.0f); }

int cudakit_blas_headers_compile_as_cuda() { return static_cast<int>(cudakit::Epilogue::gelu_bias); }
