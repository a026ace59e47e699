// Device side of programmatic dependent launch (compute capability 9.0+): the two calls a
// kernel launched with LaunchConfig::programmatic_dependent_launch (or added to a graph
// with it) uses to overlap with the kernel before it.
//
//   #include <cudakit/device/programmatic_launch.cuh>
//   __global__ void next(const float* weights, const float* activations, float* out) {
//     float w = weights[i];                                  // not written by the predecessor
//     cudakit::device::wait_for_predecessors();             // before reading its output
//     out[i] = w * activations[i];
//     cudakit::device::trigger_dependents();                // the next kernel may launch
//   }
//
// The rule (docs/launch.md): a dependent kernel waits before it reads what its
// predecessor wrote, and before it writes what its predecessor reads. Work before the wait
// may only touch memory the predecessor leaves alone (weights, its own scratch).
// trigger_dependents only lets the next kernel launch early; what this kernel writes after
// the trigger is still visible to the next kernel once that one has waited (the wait is
// for the predecessor's completion and its memory, not for the trigger).
//
// Inline PTX, no CUDA runtime header: usable from nvcc and from NVRTC programs (the text
// of this header is cudakit::device_header_text(), device_headers.hpp). On architectures
// before sm_90 both calls compile to nothing (a launch there cannot be programmatic).
#pragma once

namespace cudakit {
namespace device {

/// Blocks until every grid this one depends on programmatically has completed and its
/// memory operations are visible (griddepcontrol.wait, cudaGridDependencySynchronize).
/// Returns at once in a kernel launched without a programmatic dependency.
__device__ __forceinline__ void wait_for_predecessors() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// Lets the kernels that depend on this one programmatically launch once every block of
/// this grid has called it or exited (griddepcontrol.launch_dependents,
/// cudaTriggerProgrammaticLaunchCompletion). Calling it early costs nothing in
/// correctness: the dependents still wait for this grid's completion.
__device__ __forceinline__ void trigger_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

}  // namespace device
}  // namespace cudakit
