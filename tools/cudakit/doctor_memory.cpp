// The doctor's memory checks: copies both ways through pageable and pinned host
// memory, fills, and cross-stream ordering of a buffer written late on one stream and
// read on another; the memory pool's statistics and its out-of-memory path, buffers from
// a memory resource, and whether the kernel maps a download's fresh pages in one call.
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
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

// A buffer from PoolResource holds its data and is counted in the pool's statistics; an
// allocation larger than the device ends in OutOfMemory naming the pool's reserve, after
// the pool released its unused memory, and the process goes on.
CUDAKIT_DOCTOR_CHECK("memory pool statistics, resources and out of memory", 55, true,
                     [](const Device* d) -> CheckOutcome {
  if (!d->supports_memory_pools()) return CheckOutcome::skipped_because("the device or driver has no memory pools");
  Stream s(*d);
  PoolResource pool(*d);
  const PoolUsage before = pool.pool().usage();
  auto host = random_floats(1 << 16);
  {
    DeviceBuffer<float> x(s, host.size(), uninitialized, pool);
    copy(s, host, x);
    if (download(s, x) != host) return CheckOutcome("a buffer from PoolResource changed the data");
    const PoolUsage during = pool.pool().usage();
    if (during.live_allocations != before.live_allocations + 1 || during.used_bytes < host.size() * sizeof(float))
      return CheckOutcome("the pool's statistics miss the buffer: " +
                                          std::to_string(during.live_allocations) + " live allocations, " +
                                          std::to_string(during.used_bytes) + " bytes in use");
  }
  s.synchronize();
  if (pool.pool().usage().live_allocations != before.live_allocations)
    return CheckOutcome("the pool's count of live allocations did not go back down");
  const std::size_t too_much = d->total_memory() + (std::size_t(1) << 30);
  try {
    DeviceBuffer<char> huge(s, too_much, uninitialized);
    return CheckOutcome("an allocation larger than the device succeeded");
  } catch (const OutOfMemory& e) {
    if (e.requested() != too_much || e.pool_reserved_bytes() == OutOfMemory::no_pool)
      return CheckOutcome(std::string("the out-of-memory error lacks its numbers: ") + e.what());
  }
  DeviceBuffer<float> after(s, 16, zeroed);  // the process goes on
  if (download(s, after) != std::vector<float>(16, 0.0f)) return CheckOutcome("allocation after OOM");
  return {};
});

// Whether the kernel maps a download's fresh pages in one call (MADV_POPULATE_WRITE,
// Linux 5.14+); without it, downloads into new memory fault page by page.
CUDAKIT_DOCTOR_CHECK("host prefault of fresh download memory", 56, false, [](const Device*) -> CheckOutcome {
  constexpr std::size_t bytes = 256 * 1024;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return CheckOutcome(std::string("mmap failed: ") + std::strerror(errno));
  constexpr int populate_write = 23;  // MADV_POPULATE_WRITE, for headers older than it
  const int r = ::madvise(p, bytes, populate_write);
  const int error = errno;
  const bool zeros = r != 0 || static_cast<unsigned char*>(p)[bytes - 1] == 0;
  ::munmap(p, bytes);
  if (r != 0 && error == EINVAL)
    return CheckOutcome::skipped_because("the kernel does not take MADV_POPULATE_WRITE (Linux 5.14 and newer): "
                                         "downloads into new memory pay a page fault per page");
  if (r != 0) return CheckOutcome(std::string("madvise(MADV_POPULATE_WRITE): ") + std::strerror(error));
  if (!zeros) return CheckOutcome("a prefaulted fresh page did not read as zeros");
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
