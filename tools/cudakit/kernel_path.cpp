#include "kernel_path.hpp"

#include <algorithm>

namespace cudakit::tool {

namespace {

// Whether `contents` has machine code a GPU of `gpu` runs: its major architecture, an
// equal or older minor version (the driver's rule, module_image.hpp).
bool has_machine_code_for(const ImageContents& contents, ComputeCapability gpu) {
  return std::any_of(contents.machine_code.begin(), contents.machine_code.end(),
                     [&](int arch) { return arch / 10 == gpu.major && arch % 10 <= gpu.minor; });
}

}  // namespace

std::string KernelPath::describe() const {
  if (choice.kind == CodeKind::native) return "native sm_" + std::to_string(choice.arch);
  std::string s = "PTX JIT from compute_" + std::to_string(choice.arch);
  if (forced_jit) return s + " (CUDA_FORCE_PTX_JIT=1)";
  return s + " (the image has no machine code for sm_" + std::to_string(gpu_arch) + ")";
}

KernelPath kernel_path(const ImageContents& contents, ComputeCapability gpu) {
  KernelPath path;
  path.choice = choose_code(contents, gpu, JitPolicy::allow, "the kernels' image");
  path.gpu_arch = gpu.number();
  path.forced_jit = path.choice.kind == CodeKind::jit && has_machine_code_for(contents, gpu);
  return path;
}

std::string driver_disagreement(const KernelPath& path, int ptx_version, int binary_version) {
  const int arch = path.choice.arch;
  bool agrees = path.choice.kind == CodeKind::native
                    ? binary_version == arch && (ptx_version == arch || ptx_version == 0)
                    : ptx_version == arch && binary_version == path.gpu_arch;
  if (agrees) return {};
  return "cudakit predicted " + path.describe() + ", but the driver ran machine code for sm_" +
         std::to_string(binary_version) + " built from compute_" + std::to_string(ptx_version);
}

}  // namespace cudakit::tool
