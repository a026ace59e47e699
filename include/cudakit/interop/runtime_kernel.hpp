// `__global__` functions compiled into your own program (nvcc, the runtime API's fatbin)
// launched through cudakit's typed launch, their pointer parameters tracked like a module
// kernel's:
//
//   __global__ void scale(const float* in, float* out, float factor, int n);
//
//   auto k = cudakit::runtime_kernel(scale, gpu.device());   // Kernel<void(const float*, float*, float, int)>
//   gpu.launch(k, cudakit::grid_for(n, 256), 256, x, y, 2.0f, n);  // x read, y written
//
// The signature is the function's own, so it cannot disagree with the kernel; name it
// (runtime_kernel<void(const float*, float*, float, int)>(scale, device)) to pick one
// overload or template instance. The runtime hands out its context-independent kernel
// (cudaGetKernel); cudakit takes the function of it in the device's primary context, the
// one the runtime uses too (borrowed_kernel.hpp). The runtime keeps its kernels loaded
// until the process ends.
//
// Only code that links the CUDA runtime includes this header (nvcc links it by default):
// it calls cudaGetKernel, which the runtime has from CUDA 12.1 on. cudakit itself never
// links the runtime.
#pragma once

#include <cuda_runtime_api.h>

#if CUDART_VERSION < 12010
#error "cudakit/interop/runtime_kernel.hpp needs the CUDA 12.1 runtime or newer (cudaGetKernel)"
#endif

#include <string>
#include <type_traits>

#include "cudakit/borrowed_kernel.hpp"
#include "cudakit/error.hpp"

namespace cudakit {

/// `kernel`, a `__global__` function of this program, as a typed kernel on `device`.
/// Throws InvalidArgument when the runtime does not know it as a kernel, Error with the
/// runtime's words for any other failure of cudaGetKernel, and what borrow_kernel throws.
template <class Sig>
  requires std::is_function_v<Sig>
Kernel<Sig> runtime_kernel(Sig* kernel, const Device& device) {
  cudaKernel_t handle = nullptr;
  cudaError_t e = ::cudaGetKernel(&handle, reinterpret_cast<const void*>(kernel));
  if (e != cudaSuccess) {
    std::string words = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
    if (e == cudaErrorInvalidDeviceFunction || e == cudaErrorInvalidValue || e == cudaErrorSymbolNotFound)
      throw InvalidArgument("runtime_kernel: the CUDA runtime knows no kernel at this address (" + words +
                            "); pass a __global__ function compiled into this program by nvcc");
    throw Error("runtime_kernel: cudaGetKernel failed: " + words);
  }
  return borrow_kernel<Sig>(reinterpret_cast<CUkernel>(handle), device);
}

}  // namespace cudakit
