// The doctor's module and launch checks: the embedded fatbin loads and runs the code
// cudakit predicts (native machine code, or PTX the driver JIT-compiles), kernel lookups
// (a missing name lists the module's kernels), a typed launch checked against the host,
// and NVRTC, which needs no GPU and so runs also where there is none.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "command.hpp"
#include "cudakit/cudakit.hpp"
#include "kernel_path.hpp"

#ifdef CUDAKIT_HAVE_TEST_KERNELS
#include "test_kernels.hpp"
#endif

namespace cudakit::tool {
namespace {

#ifdef CUDAKIT_HAVE_TEST_KERNELS
// Loads the embedded kernels and says which code the GPU runs from them: cudakit's
// prediction from the image and the GPU (kernel_path.hpp), checked against the module's
// report and against what the driver says it ran.
CUDAKIT_DOCTOR_CHECK("modules", 70, true, [](const Device* d) -> CheckOutcome {
  Module m = Module::load(*d, cudakit_kernels::test_fatbin());
  const LoadReport& r = m.report();
  KernelPath path = kernel_path(r.contents, d->compute_capability());
  if (r.code != path.choice.kind || r.arch != path.choice.arch)
    return "the module reports " + std::string(to_string(r.code)) + " for " + std::to_string(r.arch) +
           ", but the image and the GPU say " + path.describe() + ": " + r.describe();
  Function saxpy = m.function("saxpy");
  std::string disagreement = driver_disagreement(path, saxpy.attribute(CU_FUNC_ATTRIBUTE_PTX_VERSION),
                                                 saxpy.attribute(CU_FUNC_ATTRIBUTE_BINARY_VERSION));
  if (!disagreement.empty()) return disagreement;
  m.kernel<void(float, const float*, float*, int)>("saxpy");
  try {
    m.kernel<void()>("no_such_kernel");
    return "looking up a missing kernel did not throw";
  } catch (const InvalidArgument& e) {
    std::string what = e.what();
    bool listed = what.find("its kernels are: ") != std::string::npos && what.find("saxpy") != std::string::npos;
    bool unlistable = what.find("cannot list a module's kernels") != std::string::npos;
    if (what.find("no_such_kernel") == std::string::npos || !(listed || unlistable))
      return "a missing kernel's error does not list the module's kernels: " + what;
  }
  return CheckOutcome::passed(path.describe());
});

CUDAKIT_DOCTOR_CHECK("typed launch", 80, true, [](const Device* d) -> std::string {
  Gpu gpu{*d};
  Module m = gpu.load(cudakit_kernels::test_fatbin());
  auto saxpy = m.kernel<void(float, const float*, float*, int)>("saxpy");
  const int n = (1 << 20) + 3;
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> hx(n), hy(n);
  for (auto& v : hx) v = dist(rng);
  for (auto& v : hy) v = dist(rng);
  auto x = gpu.upload(hx);
  auto y = gpu.upload(hy);
  gpu.launch(saxpy, grid_for(n, 256), 256, 1.75f, x, y, n);
  auto out = gpu.download(y);
  for (int i = 0; i < n; ++i)
    if (!(std::fabs(out[i] - std::fma(1.75f, hx[i], hy[i])) <= 1e-5f))
      return "saxpy element " + std::to_string(i) + " is " + std::to_string(out[i]) + ", the host says " +
             std::to_string(std::fma(1.75f, hx[i], hy[i]));
  return {};
});
#endif

// NVRTC compiles a kernel for the oldest and the newest architecture it supports, and
// each output is machine code for that architecture.
CUDAKIT_DOCTOR_CHECK("NVRTC", 90, false, [](const Device*) -> CheckOutcome {
  Program p("extern \"C\" __global__ void twice(float* v, int n) {\n"
            "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "  if (i < n) v[i] *= 2.0f;\n"
            "}\n",
            "doctor_nvrtc.cu");
  std::vector<int> archs = nvrtc_architectures();
  if (archs.empty()) return "NVRTC reports no architecture it compiles for";
  const int oldest = *std::min_element(archs.begin(), archs.end());
  const int newest = *std::max_element(archs.begin(), archs.end());
  for (int arch : {oldest, newest}) {
    const std::string sm = "sm_" + std::to_string(arch);
    CompiledProgram out = p.compile({.arch = sm, .output = ProgramOutput::cubin, .use_cache = false});
    if (out.arch() != sm) return "compiled for " + out.arch() + " instead of " + sm;
    ImageContents c = inspect_image(std::as_bytes(out.image()));
    if (c.format != ImageFormat::cubin || std::find(c.machine_code.begin(), c.machine_code.end(), arch) == c.machine_code.end())
      return "NVRTC's output for " + sm + " is not a cubin for " + sm + ": " + c.describe();
  }
  NvrtcVersion v = nvrtc_version();
  return CheckOutcome::passed("NVRTC " + std::to_string(v.major) + "." + std::to_string(v.minor) + ": sm_" +
                              std::to_string(oldest) + " and sm_" + std::to_string(newest));
});

}  // namespace
}  // namespace cudakit::tool
