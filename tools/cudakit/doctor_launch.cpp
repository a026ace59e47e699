// The doctor's module and launch checks (issue 4): the embedded fatbin loads (native
// machine code where it has some for this GPU), kernel lookups (a missing name lists the
// module's kernels), a typed launch checked against the host, and NVRTC, which needs no
// GPU and so runs also where there is none.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "command.hpp"
#include "cudakit/cudakit.hpp"

#ifdef CUDAKIT_HAVE_TEST_KERNELS
#include "test_kernels.hpp"
#endif

namespace cudakit::tool {
namespace {

#ifdef CUDAKIT_HAVE_TEST_KERNELS
CUDAKIT_DOCTOR_CHECK("modules", 70, true, [](const Device* d) -> std::string {
  Module m = Module::load(*d, cudakit_kernels::test_fatbin());
  const LoadReport& r = m.report();
  const int arch = d->compute_capability().major * 10 + d->compute_capability().minor;
  const auto& native = r.contents.machine_code;
  bool has_native = std::find(native.begin(), native.end(), arch) != native.end();
  if (has_native && m.jit_compiled()) return "JIT-compiled although the image has machine code: " + r.describe();
  if (!has_native && !m.jit_compiled()) return "runs native code the image lacks for sm_" + std::to_string(arch) + ": " + r.describe();
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
  return {};
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

CUDAKIT_DOCTOR_CHECK("NVRTC", 90, false, [](const Device*) -> std::string {
  Program p("extern \"C\" __global__ void twice(float* v, int n) {\n"
            "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "  if (i < n) v[i] *= 2.0f;\n"
            "}\n",
            "doctor_nvrtc.cu");
  CompiledProgram out = p.compile({.arch = "sm_90", .output = ProgramOutput::cubin, .use_cache = false});
  if (out.arch() != "sm_90") return "compiled for " + out.arch() + " instead of sm_90";
  ImageContents c = inspect_image(std::as_bytes(out.image()));
  if (c.format != ImageFormat::cubin || std::find(c.machine_code.begin(), c.machine_code.end(), 90) == c.machine_code.end())
    return "NVRTC's output is not a cubin for sm_90: " + c.describe();
  return {};
});

}  // namespace
}  // namespace cudakit::tool
