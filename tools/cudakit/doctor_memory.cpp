// The doctor's memory checks: copies both ways through pageable and pinned host
// memory, fills, and cross-stream ordering of a buffer written late on one stream and
// read on another.
#include <algorithm>
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

std::vector<float> random_floats(std::size_t n) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> d(-1000.0f, 1000.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

CUDAKIT_DOCTOR_CHECK("memory and copies", 50, true, [](const Device* d) -> std::string {
  Gpu gpu{*d};
  const std::size_t n = (std::size_t(1) << 22) + 5;  // 16 MiB: several staging chunks
  auto host = random_floats(n);
  auto buffer = gpu.upload(host);  // pageable
  if (gpu.download(buffer) != host) return "pageable upload/download changed the data";
  PinnedBuffer<float> pinned(n, uninitialized), back(n, zeroed);
  std::copy(host.rbegin(), host.rend(), pinned.begin());
  gpu.copy(pinned, buffer);  // pinned, the other way round
  gpu.download(buffer, back);
  if (!std::equal(back.begin(), back.end(), host.rbegin())) return "pinned upload/download changed the data";
  gpu.fill(buffer.subspan(1, n - 2), 7.5f);
  auto filled = gpu.download(buffer);
  if (filled.front() != host.back() || filled.back() != host.front() ||
      std::any_of(filled.begin() + 1, filled.end() - 1, [](float v) { return v != 7.5f; }))
    return "fill of all but the first and last element is wrong";
  return {};
});

#ifdef CUDAKIT_HAVE_TEST_KERNELS
CUDAKIT_DOCTOR_CHECK("cross-stream ordering", 60, true, [](const Device* d) -> std::string {
  // Stream A spins (about 10 ms), then writes x slowly; stream B then reads x, with a
  // typed launch and with a copy. Without cudakit's ordering B would read the old data.
  Module m = Module::load(*d, cudakit_kernels::test_fatbin());
  auto spin = m.kernel<void(long long)>("spin_kernel");
  auto slow_copy = m.kernel<void(const float*, float*, int, long long)>("slow_copy");
  auto saxpy = m.kernel<void(float, const float*, float*, int)>("saxpy");
  Stream a(*d), b(*d);
  const int n = 1 << 16;
  const std::vector<float> threes(n, 3.0f);
  auto src = upload(a, threes);
  DeviceBuffer<float> x(a, n, uninitialized), y(b, n, zeroed), z(b, n, uninitialized);
  fill(a, x, -1.0f);
  a.synchronize();  // x holds the old data (-1) before the race begins
  launch(a, spin, LaunchConfig{1, 1}, 20'000'000LL);
  launch(a, slow_copy, LaunchConfig{grid_for(n, 256), 256}, src, x, n, 20'000'000LL);
  launch(b, saxpy, LaunchConfig{grid_for(n, 256), 256}, 2.0f, x, y, n);  // y = 2 * x
  copy(b, x, z);
  auto hy = download(b, y);
  auto hz = download(b, z);
  a.synchronize();
  if (std::any_of(hy.begin(), hy.end(), [](float v) { return v != 6.0f; }))
    return "a launch on stream B read the buffer before stream A's write";
  if (std::any_of(hz.begin(), hz.end(), [](float v) { return v != 3.0f; }))
    return "a copy on stream B read the buffer before stream A's write";
  return {};
});
#endif

}  // namespace
}  // namespace cudakit::tool
