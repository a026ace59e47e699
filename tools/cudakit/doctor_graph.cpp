// The doctor's graph checks: capture and replay with the input's owner dropped
// after capture, then an in-place kernel-argument update.
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "command.hpp"
#include "cudakit/cudakit.hpp"

#ifdef CUDAKIT_HAVE_TEST_KERNELS
#include "test_kernels.hpp"

namespace cudakit::tool {
namespace {

// y0 + k * a * x, checked element by element against the host.
std::string compare(const std::vector<float>& got, const std::vector<float>& y0, const std::vector<float>& x,
                    double factor, const char* when) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    double expect = y0[i] + factor * x[i];
    if (std::fabs(got[i] - expect) > 1e-4 * (1.0 + std::fabs(expect)))
      return std::string(when) + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " +
             std::to_string(expect);
  }
  return {};
}

CUDAKIT_DOCTOR_CHECK("capture, replay and update", 85, true, [](const Device* d) -> std::string {
  Stream s(*d);
  Module m = Module::load(*d, cudakit_kernels::test_fatbin());
  auto saxpy = m.kernel<void(float, const float*, float*, int)>("saxpy");
  const int n = 1 << 16;
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> hx(n), hy(n);
  for (auto& v : hx) v = dist(rng);
  for (auto& v : hy) v = dist(rng);
  auto x = std::make_unique<DeviceBuffer<float>>(upload(s, hx));
  DeviceBuffer<float> y = upload(s, hy);
  const LaunchConfig config{grid_for(n, 256), 256};
  Graph graph = capture_nonempty(s, [&] { launch(s, saxpy, config, 2.0f, *x, y, n); });
  x.reset();  // the graph keeps x alive
  GraphExec exec = graph.instantiate();
  for (int i = 0; i < 10; ++i) exec.launch(s);
  if (auto why = compare(download(s, y), hy, hx, 20.0, "after 10 replays"); !why.empty()) return why;
  DeviceBuffer<float> x2 = upload(s, hx);
  exec.update_kernel_arguments(graph.kernel_nodes().front(), saxpy, -1.0f, x2, y, n);
  for (int i = 0; i < 5; ++i) exec.launch(s);
  return compare(download(s, y), hy, hx, 15.0, "after an argument update and 5 replays");
});

}  // namespace
}  // namespace cudakit::tool
#endif
