// CopyBatch against the fake driver: every direction in one cuMemcpyBatchAsync, the
// fallback without it and inside captures, tracking of every buffer, the refusals.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "cudakit/batched_copy.hpp"
#include "cudakit/capture.hpp"
#include "cudakit/graph_exec.hpp"
#include "memory_fixture.hpp"

namespace cudakit {
namespace {

using driver::EntryId;
using testing::message_of;

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(1.0f, 1000.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

class CopyBatchTest : public testing::MemoryTest {
 protected:
  static constexpr std::size_t pieces = 100, piece = 64;

  // Up: pinned -> device in pieces, across: device -> device, down: device -> pinned,
  // each piece's place permuted, so that a copy landing in the wrong place shows.
  void run_batch(Stream& s, BatchPath path) {
    auto values = random_floats(pieces * piece, 11);
    PinnedBuffer<float> in(pieces * piece, uninitialized), out(pieces * piece, uninitialized);
    std::copy(values.begin(), values.end(), in.data());
    std::fill(out.data(), out.data() + out.size(), -1.0f);  // poison
    DeviceBuffer<float> a(s, pieces * piece, uninitialized), b(s, pieces * piece, uninitialized);
    auto slot = [](std::size_t i) { return (i * 37) % pieces; };
    CopyBatch up, across, down;
    for (std::size_t i = 0; i < pieces; ++i) {
      up.add(in.span().subspan(i * piece, piece), a.subspan(slot(i) * piece, piece));
      across.add(a.subspan(slot(i) * piece, piece), b.subspan(i * piece, piece));
      down.add(b.subspan(i * piece, piece), out.span().subspan(i * piece, piece));
    }
    EXPECT_EQ(up.size(), pieces);
    up.submit(s, path);
    across.submit(s, path);
    down.submit(s, path);
    s.synchronize();
    EXPECT_TRUE(std::equal(values.begin(), values.end(), out.data()));
  }
};

TEST_F(CopyBatchTest, EveryDirectionGoesToTheDriverAsOneBatchAndEveryElementArrives) {
  Stream s(dev());
  run_batch(s, BatchPath::automatic);
  EXPECT_EQ(fake().calls(EntryId::MemcpyBatchAsync), 3);
  EXPECT_EQ(fake().calls(EntryId::MemcpyAsync), 0);
}

TEST_F(CopyBatchTest, OnePerCopyMovesTheSameBytes) {
  Stream s(dev());
  run_batch(s, BatchPath::one_per_copy);
  EXPECT_EQ(fake().calls(EntryId::MemcpyBatchAsync), 0);
  EXPECT_EQ(fake().calls(EntryId::MemcpyAsync), static_cast<int>(3 * pieces));
}

class CopyBatchOnAnOlderDriverTest : public CopyBatchTest {
 protected:
  void configure(fake::Driver& d) override {
    d.driver_version = 12060;
    d.missing = {EntryId::MemcpyBatchAsync};
  }
};

TEST_F(CopyBatchOnAnOlderDriverTest, WithoutTheDriversBatchEachCopyIsSubmittedAlone) {
  Stream s(dev());
  EXPECT_FALSE(CopyBatch::driver_batches());
  run_batch(s, BatchPath::automatic);
  EXPECT_EQ(fake().calls(EntryId::MemcpyAsync), static_cast<int>(3 * pieces));
}

TEST_F(CopyBatchTest, ABatchOnAnotherStreamWaitsForTheLastWriterOfItsSources) {
  Stream writer(dev()), copier(dev());
  DeviceBuffer<float> a(writer, 256, uninitialized), b(writer, 256, uninitialized);
  fill(writer, a, 4.0f);
  CopyBatch batch;
  batch.add(a.subspan(0, 128), b.subspan(128, 128));
  batch.add(a.subspan(128, 128), b.subspan(0, 128));
  int waits = fake().calls(EntryId::StreamWaitEvent);
  batch.submit(copier);
  EXPECT_GT(fake().calls(EntryId::StreamWaitEvent), waits);
  EXPECT_EQ(download(writer, b), std::vector<float>(256, 4.0f));
}

TEST_F(CopyBatchTest, ACapturedBatchBecomesOneNodePerCopyAndTheGraphKeepsTheBuffers) {
  Stream s(dev());
  auto in = std::make_unique<PinnedBuffer<float>>(64, zeroed);
  auto d = std::make_unique<DeviceBuffer<float>>(s, 64, zeroed);
  float* in_host = in->data();
  const float* device_memory = d->data();
  CopyBatch batch;
  batch.add(in->span().first(32), d->last(32));
  batch.add(in->span().last(32), d->first(32));
  Graph g = capture_nonempty(s, [&] { batch.submit(s); });
  EXPECT_EQ(g.node_count(), 2u);
  in.reset();
  d.reset();
  EXPECT_EQ(fake().live("pinned host memory"), 1u);
  EXPECT_EQ(fake().live("device memory"), 1u);
  GraphExec exec = g.instantiate();
  for (int i = 0; i < 64; ++i) in_host[i] = float(i + 1);
  exec.launch(s);
  s.synchronize();
  EXPECT_EQ(device_memory[0], 33.0f);
  EXPECT_EQ(device_memory[32], 1.0f);
}

TEST_F(CopyBatchTest, PageableMemoryOverlapsAndMixedDevicesAreRefusedWhenAdded) {
  Stream s(dev());
  std::vector<float> pageable(16, 1.0f);
  DeviceBuffer<float> d(s, 16, zeroed);
  CopyBatch batch;
  auto e = message_of<InvalidArgument>([&] { batch.add(pageable, d); });
  EXPECT_NE(e.find("pageable"), std::string::npos) << e;
  EXPECT_THROW(batch.add(d.first(8), d.subspan(4, 8)), InvalidArgument);
  EXPECT_THROW(batch.add(d.first(8), d.last(4)), InvalidArgument) << "extents differ";
  EXPECT_TRUE(batch.empty());
}

TEST_F(CopyBatchTest, TheCopyKernelRefusesRegisteredHostMemoryBeforeAnythingIsSubmitted) {
  Stream s(dev());
  std::vector<float> host(64, 2.0f);
  HostRegistration registration(host);
  DeviceBuffer<float> d(s, 64, zeroed);
  CopyBatch batch;
  batch.add(host, d);  // registered: page-locked, so the driver's paths take it
  auto e = message_of<InvalidArgument>([&] { batch.submit(s, BatchPath::copy_kernel); });
  EXPECT_NE(e.find("HostRegistration"), std::string::npos) << e;
  EXPECT_EQ(fake().calls(EntryId::LaunchKernel), 0);
  batch.submit(s);
  EXPECT_EQ(download(s, d), host);
}

class CopyBatchTwoDevicesTest : public testing::MemoryTest {
 protected:
  void configure(fake::Driver& d) override { d.devices.resize(2); }
};

TEST_F(CopyBatchTwoDevicesTest, BuffersOfTwoDevicesOrAStreamOfAnotherDeviceAreRefused) {
  Stream s0(dev(0)), s1(dev(1));
  DeviceBuffer<float> a(s0, 16, zeroed), b(s1, 16, zeroed), c(s0, 16, zeroed);
  CopyBatch batch;
  auto e = message_of<InvalidArgument>([&] { batch.add(a, b); });
  EXPECT_NE(e.find("copies between devices are not batched"), std::string::npos) << e;
  CopyBatch other;
  other.add(a, c);
  e = message_of<InvalidArgument>([&] { other.submit(s1); });
  EXPECT_NE(e.find("on device 0, the stream on device 1"), std::string::npos) << e;
}

}  // namespace
}  // namespace cudakit
