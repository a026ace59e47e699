// Growable (virtual-memory) buffers, managed buffers and batched copies on a real GPU,
// on fresh random data, outputs poisoned first: kernels that read and write across the
// boundaries between physical chunks as a buffer grows and shrinks, a captured graph that
// keeps its chunks mapped after a shrink, prefetches and advice, and batches in every
// direction against the single copies they stand for. Managed buffers stay small here:
// never oversubscribe the GPU that the test shares.
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "cudakit/batched_copy.hpp"
#include "cudakit/growable_buffer.hpp"
#include "cudakit/managed_buffer.hpp"
#include "gpu_fixture.hpp"

namespace cudakit {
namespace {

using testing::GpuTest;

const char* kernels_source = R"(
extern "C" __global__ void scale_add(const float* x, float* y, float a, unsigned long long n) {
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  for (; i < n; i += (unsigned long long)gridDim.x * blockDim.x) y[i] = fmaf(a, x[i], 1.0f);
}
extern "C" __global__ void shift_copy(const float* x, float* y, unsigned long long shift, unsigned long long n) {
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  for (; i < n; i += (unsigned long long)gridDim.x * blockDim.x) y[i] = x[(i + shift) % n];
})";

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(1.0f, 2.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

class VirtualMemoryDeviceTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (device().attribute(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) == 0)
      GTEST_SKIP() << "this device has no virtual memory management";
    stream_.emplace(device());
    module_.emplace(Module::load(device(), Program(kernels_source, "vmm_test.cu").compile(device())));
  }
  Stream& stream() { return *stream_; }
  Kernel<void(const float*, float*, float, unsigned long long)> scale_add() {
    return module_->kernel<void(const float*, float*, float, unsigned long long)>("scale_add");
  }
  Kernel<void(const float*, float*, unsigned long long, unsigned long long)> shift_copy() {
    return module_->kernel<void(const float*, float*, unsigned long long, unsigned long long)>("shift_copy");
  }
  static LaunchConfig config() { return LaunchConfig{1024, 256}; }

  std::optional<Stream> stream_;
  std::optional<Module> module_;
  std::random_device seeds;
};

TEST_F(VirtualMemoryDeviceTest, KernelsReadAndWriteAcrossChunkBoundariesAsTheBufferGrowsAndShrinks) {
  const std::size_t max = std::size_t(256) << 20;  // floats: 1 GiB of addresses
  GrowableBuffer<float> x(device(), max), y(device(), max);
  const std::size_t chunk = x.granularity() / sizeof(float);
  const CUdeviceptr x_address = x.device_pointer();
  // Sizes that end inside a chunk, then on a boundary, then several chunks later.
  for (std::size_t n : {chunk / 2 + 3, 3 * chunk, 7 * chunk + 1, 2 * chunk - 5, 20 * chunk + 17}) {
    x.resize(n);
    y.resize(n);
    ASSERT_EQ(x.device_pointer(), x_address) << "pointers never move";
    auto values = random_floats(n, seeds());
    copy(stream(), values, x);
    std::vector<float> poison(n, -7.0f);
    copy(stream(), poison, y);
    const float a = 1.0f + float(seeds() % 100) / 8.0f;
    launch(stream(), shift_copy(), config(), x, y, static_cast<unsigned long long>(chunk - 1), static_cast<unsigned long long>(n));
    launch(stream(), scale_add(), config(), y, x, a, static_cast<unsigned long long>(n));
    auto out = download(stream(), x);
    // The kernel may fuse the multiply and the add (one rounding): so does the reference.
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(out[i], std::fma(a, values[(i + chunk - 1) % n], 1.0f)) << "element " << i << " of " << n;
  }
}

TEST_F(VirtualMemoryDeviceTest, ACapturedGraphKeepsItsChunksMappedAfterAShrink) {
  GrowableBuffer<float> x(device(), std::size_t(64) << 20), y(device(), std::size_t(64) << 20);
  const std::size_t chunk = x.granularity() / sizeof(float);
  const std::size_t n = 5 * chunk + 11;
  x.resize(chunk);  // two chunks each: a shrink to one element gives the second back
  y.resize(chunk);
  x.resize(n);
  y.resize(n);
  auto values = random_floats(n, seeds());
  copy(stream(), values, x);
  Graph g = capture_nonempty(stream(), [&] { launch(stream(), scale_add(), config(), x, y, 3.0f, static_cast<unsigned long long>(n)); });
  GraphExec exec = g.instantiate();
  float* tail = y.data() + (n - 1);
  y.resize(1);  // the graph still writes the whole old range: its chunks stay mapped
  x.resize(1);
  EXPECT_LT(y.capacity(), n);
  exec.launch(stream());
  stream().synchronize();
  float last = 0.0f;
  ASSERT_EQ(driver::cu.MemcpyDtoHAsync(&last, reinterpret_cast<CUdeviceptr>(tail), sizeof last, stream().handle()), CUDA_SUCCESS);
  stream().synchronize();
  EXPECT_EQ(last, 3.0f * values[n - 1] + 1.0f) << "the replay wrote memory past the new size, still mapped";
  x.resize(n);  // grows back into the retired chunks
  y.resize(n);
  exec.launch(stream());
  auto out = download(stream(), y);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], 3.0f * values[i] + 1.0f) << i;
}

TEST_F(VirtualMemoryDeviceTest, GrowthPastTheDevicesMemoryThrowsOutOfMemoryAndTheBufferStaysUsable) {
  MemoryInfo info = device().memory_info();
  const std::size_t max = (info.total_bytes / sizeof(float)) * 2;
  GrowableBuffer<float> x(device(), max);  // addresses for twice the device's memory
  x.resize(1 << 20);
  auto values = random_floats(x.size(), seeds());
  copy(stream(), values, x);
  EXPECT_THROW(x.resize(max), OutOfMemory);
  EXPECT_EQ(x.size(), std::size_t(1) << 20);
  EXPECT_EQ(download(stream(), x), values);
}

TEST_F(VirtualMemoryDeviceTest, ManagedMemoryIsReadAndWrittenByKernelsAndTheHostWithPrefetchesAndAdvice) {
  if (device().attribute(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS) == 0)
    GTEST_SKIP() << "no concurrent managed access on this device";
  const std::size_t n = (std::size_t(4) << 20) + 5;  // 16 MiB: small, never oversubscribing
  ManagedBuffer<float> x(stream(), n, uninitialized), y(stream(), n, uninitialized);
  auto values = random_floats(n, seeds());
  x.wait_for_users();
  std::memcpy(x.host().data(), values.data(), n * sizeof(float));  // the host writes in place
  for (float& v : y.host()) v = -3.0f;
  x.advise(ManagedAdvice::read_mostly);
  x.prefetch_to(stream(), device());
  y.prefetch_to(stream(), device());
  launch(stream(), scale_add(), config(), x, y, 0.5f, static_cast<unsigned long long>(n));
  y.prefetch_to_host(stream());
  y.wait_for_users();
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(y.host()[i], 0.5f * values[i] + 1.0f) << i;
}

TEST_F(VirtualMemoryDeviceTest, ManagedMemoryBeyondTheFreeMemoryIsRefusedBeforeTheDriver) {
  MemoryInfo info = device().memory_info();
  EXPECT_THROW(ManagedBuffer<char>(stream(), info.free_bytes + (std::size_t(1) << 30), uninitialized), OutOfMemory);
}

TEST_F(VirtualMemoryDeviceTest, BatchesInEveryDirectionMoveWhatTheSingleCopiesWould) {
  const std::size_t pieces = 1000, piece = 1024;  // 1,000 copies of 4 KiB
  auto values = random_floats(pieces * piece, seeds());
  PinnedBuffer<float> in(pieces * piece, uninitialized), out(pieces * piece, uninitialized);
  std::memcpy(in.data(), values.data(), values.size() * sizeof(float));
  std::fill(out.data(), out.data() + out.size(), -1.0f);
  DeviceBuffer<float> a(stream(), pieces * piece, zeroed), b(stream(), pieces * piece, zeroed);
  auto slot = [&](std::size_t i) { return (i * 613) % pieces; };  // a permutation: 613 is prime to 1000
  for (BatchPath path : {BatchPath::automatic, BatchPath::driver_batch, BatchPath::one_per_copy, BatchPath::copy_kernel}) {
    CopyBatch up, across, down;
    for (std::size_t i = 0; i < pieces; ++i) {
      up.add(in.span().subspan(i * piece, piece), a.subspan(slot(i) * piece, piece));
      across.add(a.subspan(slot(i) * piece, piece), b.subspan(i * piece, piece));
      down.add(b.subspan(i * piece, piece), out.span().subspan(i * piece, piece));
    }
    up.submit(stream(), path);
    across.submit(stream(), path);
    down.submit(stream(), path);
    stream().synchronize();
    ASSERT_EQ(std::memcmp(out.data(), values.data(), values.size() * sizeof(float)), 0);
    std::fill(out.data(), out.data() + out.size(), -1.0f);
  }
}

TEST_F(VirtualMemoryDeviceTest, TheCopyKernelCopiesMoreRegionsThanOneLaunchCarriesOfOddSizesAndAddresses) {
  // 3,000 regions (three launches), each of 1 to 4,099 bytes at an odd offset: the byte
  // path as well as the 16-byte one.
  const std::size_t regions = 3000, stride = 4160;
  std::mt19937 gen(seeds());
  std::vector<unsigned char> values(regions * stride);
  for (auto& v : values) v = static_cast<unsigned char>(gen() % 255 + 1);
  PinnedBuffer<unsigned char> in(values.size(), uninitialized), out(values.size(), uninitialized);
  std::memcpy(in.data(), values.data(), values.size());
  std::memset(out.data(), 0, out.size());
  DeviceBuffer<unsigned char> a(stream(), values.size(), zeroed);
  CopyBatch up, down;
  std::vector<std::pair<std::size_t, std::size_t>> placed;  // offset, bytes
  for (std::size_t i = 0; i < regions; ++i) {
    std::size_t bytes = i % 7 == 0 ? 4096 : gen() % 4099 + 1;
    std::size_t offset = i * stride + (i % 7 == 0 ? 0 : gen() % 61);
    placed.emplace_back(offset, bytes);
    up.add(in.span().subspan(offset, bytes), a.subspan(offset, bytes));
    down.add(std::as_const(a).subspan(offset, bytes), out.span().subspan(offset, bytes));
  }
  up.submit(stream(), BatchPath::copy_kernel);
  down.submit(stream(), BatchPath::copy_kernel);
  stream().synchronize();
  for (auto [offset, bytes] : placed)
    ASSERT_EQ(std::memcmp(out.data() + offset, values.data() + offset, bytes), 0) << "region at " << offset;
}

}  // namespace
}  // namespace cudakit
