// Which code a GPU runs from an image of kernels: its own machine code ("native sm_90"),
// or PTX that the driver JIT-compiles ("PTX JIT from compute_90"), as cudakit predicts it
// from the image's headers and the GPU's compute capability (module_image.hpp,
// choose_code), and whether the driver's account of a loaded kernel agrees.
//
// The driver tells, per kernel, the virtual architecture its code came from
// (CU_FUNC_ATTRIBUTE_PTX_VERSION) and the architecture of the machine code it runs
// (CU_FUNC_ATTRIBUTE_BINARY_VERSION). Machine code that nvcc built for sm_90 says 90 and
// 90; PTX for compute_75 JIT-compiled on an sm_90 GPU says 75 and 90.
#pragma once

#include <string>

#include "cudakit/device.hpp"
#include "cudakit/module_image.hpp"

namespace cudakit::tool {

struct KernelPath {
  CodeChoice choice;
  /// JIT although the image has machine code this GPU runs (CUDA_FORCE_PTX_JIT=1).
  bool forced_jit = false;
  /// The GPU's architecture, e.g. 90.
  int gpu_arch = 0;

  /// "native sm_90", "PTX JIT from compute_90 (CUDA_FORCE_PTX_JIT=1)", or "PTX JIT
  /// from compute_121 (the image has no machine code for sm_130)".
  std::string describe() const;
};

/// What a GPU of compute capability `gpu` runs from `contents` (JIT allowed). Throws
/// InvalidArgument when nothing in the image runs there.
KernelPath kernel_path(const ImageContents& contents, ComputeCapability gpu);

/// Empty when the driver's account of a kernel (its PTX_VERSION and BINARY_VERSION
/// attributes) agrees with `path`; otherwise what the driver did instead.
std::string driver_disagreement(const KernelPath& path, int ptx_version, int binary_version);

}  // namespace cudakit::tool
