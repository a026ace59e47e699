// Kernels that someone else loaded, as cudakit kernels: a CUkernel (what the CUDA runtime
// hands out for a `__global__` function compiled into the program, cudaGetKernel, or what
// cuLibraryGetKernel gives for a library loaded outside cudakit) becomes a Function or a
// typed Kernel<Sig> on one device, launched and tracked like a module's kernel.
//
//   Kernel<void(const float*, float*, int)> k =
//       borrow_kernel<void(const float*, float*, int)>(kernel_handle, device);
//   launch(stream, k, LaunchConfig{grid_for(n, 256), 256}, x, y, n);   // x read, y written
//
// For a `__global__` function of your own program, cudakit/interop/runtime_kernel.hpp does
// the runtime's part (runtime_kernel(my_kernel, device)).
//
// The handle does not own the kernel: whoever loaded it keeps it loaded for as long as the
// handle (and any graph that captured a launch of it) is used; the runtime keeps its own
// kernels loaded until the process ends. Borrowing costs a few driver calls (the function
// in the device's primary context, its attributes and name): borrow once, launch many
// times.
//
// A typed borrow checks the signature against the kernel's parameters where the driver
// can describe them (CUDA 12.4+), asking only for the declared ones: a signature with
// fewer parameters than the kernel passes unnoticed there, since learning the count would
// take a failed driver call (which compute-sanitizer reports). runtime_kernel() takes the
// signature from the function itself, so it cannot differ.
//
// Thread safety: borrow from any thread; the handles are shared like any Function.
#pragma once

#include <cuda.h>

#include "cudakit/device.hpp"
#include "cudakit/export.hpp"
#include "cudakit/kernel.hpp"

namespace cudakit {

/// `kernel` as an untyped Function on `device` (its primary context). Throws
/// InvalidArgument for a null handle, DriverError when the driver refuses it
/// (cuKernelGetFunction), ContextPoisoned on a poisoned device.
CUDAKIT_API Function borrow_kernel(CUkernel kernel, const Device& device);

/// The same, typed: checked against the signature as described above.
template <class Sig>
Kernel<Sig> borrow_kernel(CUkernel kernel, const Device& device) {
  return Kernel<Sig>::checked(borrow_kernel(kernel, device));
}

}  // namespace cudakit
