// The doctor's checks of the memory capabilities a driver or device may lack: growable
// (virtual-memory) buffers, managed memory and batched copies. Each prints "skip" with
// the reason where the capability is missing, and otherwise checks every element of a
// round trip on fresh random data.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "command.hpp"
#include "cudakit/batched_copy.hpp"
#include "cudakit/cudakit.hpp"
#include "cudakit/growable_buffer.hpp"
#include "cudakit/managed_buffer.hpp"

namespace cudakit::tool {
namespace {

std::vector<float> random_floats(std::size_t n) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> d(-1000.0f, 1000.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

CUDAKIT_DOCTOR_CHECK("growable buffers (virtual memory)", 52, true, [](const Device* d) -> CheckOutcome {
  if (d->attribute(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) == 0)
    return CheckOutcome::skipped_because("the device has no virtual memory management");
  Stream stream(*d);
  GrowableBuffer<float> b(*d, std::size_t(64) << 20);
  const std::size_t chunk = b.granularity() / sizeof(float);
  b.resize(chunk / 2);
  const CUdeviceptr address = b.device_pointer();
  b.resize(3 * chunk + 7);  // three more chunks, the same address
  if (b.device_pointer() != address) return "the buffer moved when it grew";
  auto values = random_floats(b.size());
  copy(stream, values, b);
  if (download(stream, b) != values) return "a round trip through a grown buffer changed the data";
  b.resize(5);
  if (b.capacity() != chunk) return "a shrink kept " + std::to_string(b.capacity()) + " elements mapped";
  return CheckOutcome::passed("granularity " + std::to_string(b.granularity() >> 10) + " KiB");
});

CUDAKIT_DOCTOR_CHECK("managed memory", 53, true, [](const Device* d) -> CheckOutcome {
  if (d->attribute(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY) == 0)
    return CheckOutcome::skipped_because("the device has no managed memory");
  if (!driver::has(driver::EntryId::MemPrefetchAsync))
    return CheckOutcome::skipped_because("this driver's cuMemPrefetchAsync predates CUDA 12.2's locations");
  Stream stream(*d);
  const std::size_t n = std::size_t(1) << 20;  // 4 MiB: small, never oversubscribing
  ManagedBuffer<float> m(stream, n, uninitialized);
  auto values = random_floats(n);
  m.wait_for_users();
  std::memcpy(m.host().data(), values.data(), n * sizeof(float));
  if (d->attribute(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS) != 0) m.prefetch_to(stream, *d);
  DeviceBuffer<float> copy_of(stream, n, uninitialized);
  copy(stream, m, copy_of);
  if (download(stream, copy_of) != values) return "a copy out of managed memory changed the data";
  return {};
});

CUDAKIT_DOCTOR_CHECK("batched copies", 54, true, [](const Device* d) -> CheckOutcome {
  Stream stream(*d);
  const std::size_t pieces = 64, piece = 1024;
  auto values = random_floats(pieces * piece);
  PinnedBuffer<float> in(values.size(), uninitialized), out(values.size(), uninitialized);
  std::memcpy(in.data(), values.data(), values.size() * sizeof(float));
  std::memset(out.data(), 0xff, out.size() * sizeof(float));
  DeviceBuffer<float> a(stream, values.size(), uninitialized);
  CopyBatch up, down;
  for (std::size_t i = 0; i < pieces; ++i) {
    up.add(in.span().subspan(i * piece, piece), a.subspan((pieces - 1 - i) * piece, piece));
    down.add(std::as_const(a).subspan((pieces - 1 - i) * piece, piece), out.span().subspan(i * piece, piece));
  }
  up.submit(stream);
  down.submit(stream);
  stream.synchronize();
  if (std::memcmp(out.data(), values.data(), values.size() * sizeof(float)) != 0) return "a batched round trip changed the data";
  if (!CopyBatch::driver_batches())
    return CheckOutcome::skipped_because("this driver has no cuMemcpyBatchAsync (CUDA 12.8): batches are submitted one copy at a time");
  return CheckOutcome::passed("cuMemcpyBatchAsync");
});

}  // namespace
}  // namespace cudakit::tool
