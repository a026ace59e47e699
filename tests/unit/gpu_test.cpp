// The Gpu facade against the fake driver: construction, allocation, and the thin forwards
// (upload, download, fill, copy) to the lower layers on the Gpu's own stream.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "cudakit/gpu.hpp"
#include "fake_kernels.hpp"
#include "memory_fixture.hpp"

namespace cudakit {
namespace {

class GpuTest : public testing::MemoryTest {};

TEST_F(GpuTest, ConstructsOnTheDeviceWithItsOwnStream) {
  Gpu gpu{0};
  EXPECT_EQ(gpu.device().ordinal(), 0);
  EXPECT_EQ(gpu.stream().device_ordinal(), 0);
  EXPECT_FALSE(gpu.arch().empty());
  Stream other = gpu.new_stream();
  EXPECT_NE(other.ref().handle(), gpu.stream().handle());
  Gpu moved = std::move(gpu);
  EXPECT_EQ(moved.device().ordinal(), 0);
  moved.synchronize();
}

TEST_F(GpuTest, AllocGivesBuffersOfTheAskedSize) {
  Gpu gpu{0};
  auto a = gpu.alloc<float>(1000, uninitialized);
  auto z = gpu.alloc<int>(33, zeroed);
  EXPECT_EQ(a.size(), 1000u);
  EXPECT_EQ(z.size(), 33u);
  EXPECT_EQ(gpu.download(z), std::vector<int>(33, 0));
}

TEST_F(GpuTest, UploadThenDownloadRoundTripsTheData) {
  Gpu gpu{0};
  for (std::size_t n : {std::size_t(1), std::size_t(1000), std::size_t(65537)}) {
    auto host = values(n, static_cast<int>(n));
    DeviceBuffer<float> d = gpu.upload(host);
    ASSERT_EQ(d.size(), n);
    EXPECT_EQ(gpu.download(d), host) << n << " elements";
    std::vector<float> into(n, -1.0f);
    gpu.download(d, into);
    EXPECT_EQ(into, host) << n << " elements, into a host range";
  }
  // Pinned memory both ways.
  auto expected = values(64, 5);
  PinnedBuffer<float> pinned(64, uninitialized);
  std::copy(expected.begin(), expected.end(), pinned.begin());
  auto d = gpu.upload(pinned);
  PinnedBuffer<float> back(64, zeroed);
  gpu.download(d, back);
  EXPECT_TRUE(std::equal(back.begin(), back.end(), expected.begin()));
}

TEST_F(GpuTest, FillSetsEveryElement) {
  Gpu gpu{0};
  auto d = gpu.alloc<float>(777, uninitialized);
  gpu.fill(d, 2.5f);
  EXPECT_EQ(gpu.download(d), std::vector<float>(777, 2.5f));
  auto u = gpu.alloc<std::uint16_t>(5, zeroed);
  gpu.fill(u.span(), std::uint16_t{0xabcd});
  EXPECT_EQ(gpu.download(u), std::vector<std::uint16_t>(5, 0xabcd));
}

TEST_F(GpuTest, CopyInEveryDirection) {
  Gpu gpu{0};
  auto host = values(100, 3);
  auto a = gpu.alloc<float>(100, uninitialized);
  auto b = gpu.alloc<float>(100, zeroed);
  gpu.copy(host, a);  // host to device
  gpu.copy(a, b);     // device to device
  std::vector<float> out(100, 0.0f);
  gpu.copy(b, out);   // device to host, asynchronous
  gpu.synchronize();
  EXPECT_EQ(out, host);
}

TEST_F(GpuTest, LoadAndLaunchOnTheGpusStream) {
  Gpu gpu{0};
  int image = testing::standard_image();
  Module m = gpu.load(fake::fatbin_image(image, {80, 90}, {}));
  auto fill = m.kernel<void(float*, float, int)>("fill");
  auto saxpy = m.kernel<void(float, const float*, float*, int)>("saxpy");
  const int n = 1000;
  auto x = gpu.alloc<float>(n, uninitialized);
  auto y = gpu.alloc<float>(n, uninitialized);
  gpu.launch(fill, LaunchConfig{grid_for(n, 256), 256}, x, 3.0f, n);
  gpu.launch(fill, grid_for(n, 128), 128, y, 1.0f, n);
  gpu.launch(saxpy, grid_for(n, 256), 256, 2.0f, x, y, n);
  EXPECT_EQ(gpu.download(y), std::vector<float>(n, 7.0f));
  auto last = fake::launches().back();
  EXPECT_EQ(last.kernel, "saxpy");
  EXPECT_EQ(last.grid[0], 4u);
  EXPECT_EQ(last.block[0], 256u);
}

}  // namespace
}  // namespace cudakit
