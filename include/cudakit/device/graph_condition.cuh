// Device side of a graph's conditional nodes (CUDA 12.3+): the call through which a
// graph's own kernels set the condition of an if or while node (graph.hpp's add_if and
// add_while, graph_cache.hpp's run_loop).
//
//   #include <cudakit/device/graph_condition.cuh>
//   __global__ void advance(unsigned long long loop, int* steps_left, const int* finished) {
//     if (threadIdx.x == 0 && blockIdx.x == 0) {
//       int left = --*steps_left;
//       if (left <= 0 || *finished) cudakit::device::set_condition(loop, 0);   // ends the loop
//     }
//   }
//
// The handle is ConditionalHandle::value, passed as a plain 64-bit argument. One thread
// sets it (concurrent sets race, a CUDA rule); the value counts when the body ends (while)
// or when the node is reached (if).
//
// No CUDA runtime header: usable from nvcc (where cudaGraphSetConditional is a builtin)
// and from NVRTC programs, where this header declares the builtin itself (the text of this
// header is cudakit::device_header_text(), device_headers.hpp).
#pragma once

#if defined(__CUDACC_RTC__)
extern "C" __device__ void cudaGraphSetConditional(unsigned long long handle, unsigned int value);
#endif

namespace cudakit {
namespace device {

/// Sets the condition `handle` of the graph this kernel runs in to `value` (0 ends a while
/// loop after the current iteration, or skips an if body).
__device__ __forceinline__ void set_condition(unsigned long long handle, unsigned int value) {
  cudaGraphSetConditional(handle, value);
}

}  // namespace device
}  // namespace cudakit
