// CopyBatch against the fake driver: small copies in one launch of the copy kernel (a
// fake kernel under the same name and parameter table), larger ones and the driver path
// in one cuMemcpyBatchAsync, the fallbacks without either and inside captures, tracking
// of every buffer, the refusals.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "cudakit/batched_copy.hpp"
#include "cudakit/capture.hpp"
#include "cudakit/graph_exec.hpp"
#include "cudakit/host_registration.hpp"
#include "fake_modules.hpp"
#include "memory/copy_kernel.hpp"
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

// The copy kernel as the fake runs it: every region of the table, read and written on
// the launch's stream, one block per region.
fake::FakeKernel fake_copy_kernel() {
  fake::FakeKernel k;
  k.name = detail::copy_kernel_name;
  k.params = {fake::FakeParam{sizeof(detail::CopyRegions), alignof(detail::CopyRegions)}};
  k.body = [](const fake::FakeLaunch& launch) {
    auto table = std::make_unique<detail::CopyRegions>(launch.param<detail::CopyRegions>(0));
    EXPECT_EQ(launch.grid[0], table->count) << "one block per region";
    for (unsigned i = 0; i < table->count; ++i) {
      const detail::CopyRegion& r = table->regions[i];
      auto* destination = reinterpret_cast<void*>(r.destination);
      const auto* source = reinterpret_cast<const void*>(r.source);
      launch.read(source, r.bytes);
      launch.write(destination, r.bytes);
      std::memcpy(destination, source, r.bytes);
    }
  };
  return k;
}

std::vector<char> image_with(std::vector<fake::FakeKernel> kernels) {
  fake::FakeImage image;
  image.kernels = std::move(kernels);
  auto bytes = fake::cubin_image(fake::add_image(std::move(image)));
  return {bytes.begin(), bytes.end()};
}

class CopyBatchTest : public testing::MemoryTest {
 protected:
  static constexpr std::size_t pieces = 100, piece = 64;

  void SetUp() override {
    MemoryTest::SetUp();
    detail::set_copy_kernel_image_for_testing(image_with({fake_copy_kernel()}));
  }
  void TearDown() override {
    MemoryTest::TearDown();
    detail::set_copy_kernel_image_for_testing({});
  }
  /// Captures a batch of two H2D copies (each half of a pinned buffer to the other half of
  /// a device buffer) through `path`, drops both buffers, and replays the graph: the graph
  /// has `nodes` nodes, keeps both buffers, and copies what the host wrote after capture.
  void capture_two_copies_and_replay(BatchPath path, std::size_t nodes) {
    Stream s(dev());
    auto in = std::make_unique<PinnedBuffer<float>>(64, zeroed);
    auto d = std::make_unique<DeviceBuffer<float>>(s, 64, zeroed);
    float* in_host = in->data();
    const float* device_memory = d->data();
    CopyBatch batch;
    batch.add(in->span().first(32), d->last(32));
    batch.add(in->span().last(32), d->first(32));
    Graph g = capture_nonempty(s, [&] { batch.submit(s, path); });
    EXPECT_EQ(g.node_count(), nodes);
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
  /// The kernel's module as one that lacks the kernel: the kernel is unavailable.
  void without_the_copy_kernel() {
    fake::FakeKernel other;
    other.name = "something_else";
    detail::set_copy_kernel_image_for_testing(image_with({other}));
  }

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

TEST_F(CopyBatchTest, SmallCopiesInEveryDirectionGoToTheCopyKernelInOneLaunchAndEveryElementArrives) {
  Stream s(dev());
  run_batch(s, BatchPath::automatic);
  EXPECT_EQ(fake().calls(EntryId::LaunchKernel), 3);
  EXPECT_EQ(fake().calls(EntryId::MemcpyBatchAsync), 0);
  EXPECT_EQ(fake().calls(EntryId::MemcpyAsync), 0);
  EXPECT_EQ(fake().calls(EntryId::ModuleLoadDataEx), 1) << "loaded once, kept";
}

TEST_F(CopyBatchTest, TheDriversBatchTakesEveryDirectionInOneCall) {
  Stream s(dev());
  run_batch(s, BatchPath::driver_batch);
  EXPECT_EQ(fake().calls(EntryId::MemcpyBatchAsync), 3);
  EXPECT_EQ(fake().calls(EntryId::LaunchKernel), 0);
  EXPECT_EQ(fake().calls(EntryId::MemcpyAsync), 0);
}

TEST_F(CopyBatchTest, WithoutTheCopyKernelAutomaticTakesTheDriversBatch) {
  without_the_copy_kernel();
  Stream s(dev());
  run_batch(s, BatchPath::automatic);
  EXPECT_EQ(fake().calls(EntryId::MemcpyBatchAsync), 3);
  EXPECT_EQ(fake().calls(EntryId::LaunchKernel), 0);
  EXPECT_EQ(fake().calls(EntryId::ModuleUnload), 1) << "the module without the kernel is not kept";
}

TEST_F(CopyBatchTest, ACopyLargerThan64KiBSendsTheBatchToTheDriver) {
  Stream s(dev());
  constexpr std::size_t large = detail::copy_kernel_largest_automatic_region / sizeof(float) + 1;
  auto values = random_floats(large + 16, 5);
  PinnedBuffer<float> in(large + 16, uninitialized), out(large + 16, uninitialized);
  std::copy(values.begin(), values.end(), in.data());
  std::fill(out.data(), out.data() + out.size(), -1.0f);
  DeviceBuffer<float> d(s, large + 16, uninitialized);
  CopyBatch up, down;
  up.add(in.span().first(large), d.first(large));
  up.add(in.span().last(16), d.last(16));
  down.add(d.first(16), out.span().first(16));
  down.add(d.subspan(16, large), out.span().last(large));
  up.submit(s);
  down.submit(s);
  s.synchronize();
  EXPECT_EQ(fake().calls(EntryId::MemcpyBatchAsync), 2);
  EXPECT_EQ(fake().calls(EntryId::LaunchKernel), 0);
  EXPECT_TRUE(std::equal(values.begin(), values.end(), out.data()));
}

TEST_F(CopyBatchTest, AKernelBatchOnAnotherStreamWaitsForTheWriterAndItsReaderWaitsForIt) {
  Stream writer(dev()), copier(dev());
  auto values = random_floats(256, 7);
  DeviceBuffer<float> a(writer, 256, uninitialized), b(writer, 256, uninitialized);
  copy(writer, values, a);
  CopyBatch batch;
  batch.add(a.subspan(0, 128), b.subspan(128, 128));
  batch.add(a.subspan(128, 128), b.subspan(0, 128));
  batch.submit(copier);
  EXPECT_EQ(fake().calls(EntryId::LaunchKernel), 1);
  std::vector<float> expected(values.begin() + 128, values.end());
  expected.insert(expected.end(), values.begin(), values.begin() + 128);
  EXPECT_EQ(download(writer, b), expected);  // the fixture fails the test on an unordered access
}

TEST_F(CopyBatchTest, ACapturedKernelBatchIsOneNodeAndTheGraphKeepsTheBuffers) {
  capture_two_copies_and_replay(BatchPath::automatic, 1);
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
  run_batch(s, BatchPath::driver_batch);
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
  batch.submit(copier, BatchPath::driver_batch);
  EXPECT_GT(fake().calls(EntryId::StreamWaitEvent), waits);
  EXPECT_EQ(download(writer, b), std::vector<float>(256, 4.0f));
}

TEST_F(CopyBatchTest, ACapturedDriverBatchBecomesOneNodePerCopyAndTheGraphKeepsTheBuffers) {
  capture_two_copies_and_replay(BatchPath::driver_batch, 2);
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
  batch.submit(s);  // automatic: the driver's batch
  EXPECT_EQ(fake().calls(EntryId::LaunchKernel), 0);
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
