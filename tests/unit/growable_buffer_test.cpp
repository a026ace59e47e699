// GrowableBuffer against the fake driver, which checks the driver's virtual-memory rules
// (granularity, mapping inside reservations, access before use, unmap before the
// reservation goes): growth in place, shrinking after every user, graphs that keep their
// chunks mapped, out of memory that leaves the buffer as it was, peers.
#include <gtest/gtest.h>

#include <random>
#include <type_traits>
#include <vector>

#include "cudakit/capture.hpp"
#include "cudakit/detail/kernel_binding.hpp"
#include "cudakit/graph_exec.hpp"
#include "cudakit/growable_buffer.hpp"
#include "cudakit/launch.hpp"
#include "cudakit/managed_buffer.hpp"
#include "cudakit/module.hpp"
#include "fake_kernels.hpp"
#include "graph_fixture.hpp"
#include "memory_fixture.hpp"

namespace cudakit {
namespace {

using driver::EntryId;
using testing::message_of;

constexpr std::size_t granularity = std::size_t(2) << 20;  // the fake's
constexpr std::size_t floats_per_chunk = granularity / sizeof(float);

static_assert(!std::is_copy_constructible_v<GrowableBuffer<float>> &&
              std::is_nothrow_move_constructible_v<GrowableBuffer<float>>);
static_assert(detail::binding<float*, GrowableBuffer<float>&>() == detail::Binding::buffer_write);
static_assert(detail::binding<const float*, const GrowableBuffer<float>&>() == detail::Binding::buffer_read);
static_assert(device_range<GrowableBuffer<float>&> && writable_device_range<GrowableBuffer<float>&>);

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(1.0f, 1000.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

class GrowableBufferTest : public testing::MemoryTest {
 protected:
  std::size_t physical() { return fake().live("physical memory"); }
  std::size_t reservations() { return fake().live("address reservation"); }
};

TEST_F(GrowableBufferTest, ReservesAddressesAndMapsNothingUntilItGrows) {
  GrowableBuffer<float> b(dev(), 10 * floats_per_chunk);
  EXPECT_EQ(reservations(), 1u);
  EXPECT_EQ(physical(), 0u);
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.capacity(), 0u);
  EXPECT_EQ(b.max_size(), 10 * floats_per_chunk);
  EXPECT_EQ(b.granularity(), granularity);
  EXPECT_NE(b.device_pointer(), 0u);
  EXPECT_EQ(b.device_pointer() % granularity, 0u);
}

TEST_F(GrowableBufferTest, GrowsInPlaceAndKeepsItsContentsAcrossChunkBoundaries) {
  Stream s(dev());
  GrowableBuffer<float> b(dev(), 8 * floats_per_chunk);
  const CUdeviceptr address = b.device_pointer();
  b.resize(1000);
  EXPECT_EQ(b.capacity(), floats_per_chunk) << "one chunk of the granularity";
  auto first = random_floats(1000, 1);
  copy(s, first, b);
  b.resize(3 * floats_per_chunk + 17);  // a second chunk, larger
  EXPECT_EQ(b.device_pointer(), address) << "pointers never move";
  EXPECT_EQ(b.capacity(), 4 * floats_per_chunk);
  EXPECT_EQ(physical(), 2u);
  // A copy that straddles the boundary between the two chunks.
  auto across = random_floats(2000, 2);
  copy(s, across, b.subspan(floats_per_chunk - 1000, 2000));
  auto head = download(s, b.first(1000));
  EXPECT_EQ(head, first) << "growth moves nothing";
  EXPECT_EQ(download(s, b.subspan(floats_per_chunk - 1000, 2000)), across);
}

TEST_F(GrowableBufferTest, ShrinkWaitsForEveryStreamThatUsedTheBufferThenGivesChunksBack) {
  Stream writer(dev()), reader(dev());
  GrowableBuffer<float> b(dev(), 8 * floats_per_chunk);
  b.resize(floats_per_chunk);
  b.resize(4 * floats_per_chunk);
  fill(writer, b, 2.5f);
  DeviceBuffer<float> out(reader, b.size(), uninitialized);
  copy(reader, b, out);  // read on a second stream: tracked
  int syncs = fake().calls(EntryId::StreamSynchronize);
  b.resize(100);
  EXPECT_GT(fake().calls(EntryId::StreamSynchronize), syncs) << "the unmap waits for the streams that used it";
  EXPECT_EQ(physical(), 1u) << "the second chunk went, the first holds the 100 elements";
  EXPECT_EQ(b.capacity(), floats_per_chunk);
  EXPECT_EQ(fake().calls(EntryId::MemUnmap), 1);
  EXPECT_EQ(fake().calls(EntryId::MemRelease), 1);
  // The fixture fails the test on an unmap the host was not ordered after (a hazard).
}

TEST_F(GrowableBufferTest, GrowthTheDeviceCannotBackThrowsOutOfMemoryAndLeavesTheBufferAsItWas) {
  fake().devices[0].total_memory = 8 * granularity;
  Stream s(dev());
  GrowableBuffer<float> b(dev(), 64 * floats_per_chunk);
  b.resize(2 * floats_per_chunk);
  auto values = random_floats(b.size(), 3);
  copy(s, values, b);
  auto e = message_of<OutOfMemory>([&] { b.resize(20 * floats_per_chunk); });
  EXPECT_NE(e.find("cuMemCreate"), std::string::npos) << e;
  EXPECT_NE(e.find("asked for"), std::string::npos) << e;
  EXPECT_EQ(b.size(), 2 * floats_per_chunk);
  EXPECT_EQ(b.capacity(), 2 * floats_per_chunk);
  EXPECT_EQ(physical(), 1u);
  EXPECT_EQ(download(s, b), values);
  b.resize(6 * floats_per_chunk);  // what fits still grows
  EXPECT_EQ(b.capacity(), 6 * floats_per_chunk);
}

TEST_F(GrowableBufferTest, AFailedMappingOrAccessGrantLeavesNothingBehind) {
  GrowableBuffer<float> b(dev(), 8 * floats_per_chunk);
  for (EntryId failing : {EntryId::MemMap, EntryId::MemSetAccess}) {
    fake().fail(failing, fake().calls(failing) + 1, CUDA_ERROR_INVALID_VALUE);
    auto e = message_of<DriverError>([&] { b.resize(10); });
    EXPECT_NE(e.find(driver::entry_info(failing).name), std::string::npos) << e;
    EXPECT_EQ(b.size(), 0u);
    EXPECT_EQ(b.capacity(), 0u);
    EXPECT_EQ(physical(), 0u) << "the new chunk was released";
    fake().clear_faults();
  }
  b.resize(10);
  EXPECT_EQ(b.capacity(), floats_per_chunk);
}

TEST_F(GrowableBufferTest, ResizingPastTheReservationIsRefusedBeforeTheDriver) {
  GrowableBuffer<float> b(dev(), floats_per_chunk);
  auto e = message_of<InvalidArgument>([&] { b.resize(floats_per_chunk + 1); });
  EXPECT_NE(e.find("past the buffer's reservation"), std::string::npos) << e;
  EXPECT_EQ(fake().calls(EntryId::MemCreate), 0);
  EXPECT_THROW(b.reserve(floats_per_chunk * 2), InvalidArgument);
  EXPECT_THROW(GrowableBuffer<float>(dev(), 0), InvalidArgument);
}

TEST_F(GrowableBufferTest, AMovedFromBufferThrowsEmptyHandleAndTheNewOwnerFreesEverything) {
  GrowableBuffer<int> a(dev(), 100);
  a.resize(50);
  GrowableBuffer<int> b = std::move(a);
  EXPECT_THROW(a.resize(1), EmptyHandle);
  EXPECT_THROW((void)a.span(), EmptyHandle);
  EXPECT_EQ(b.size(), 50u);
  b.reset();
  EXPECT_EQ(physical(), 0u);
  EXPECT_EQ(reservations(), 0u);
}

TEST_F(GrowableBufferTest, DestroyingTheBufferUnmapsEveryChunkAfterItsUsersAndFreesTheReservation) {
  Stream s(dev());
  {
    GrowableBuffer<float> b(dev(), 8 * floats_per_chunk);
    b.resize(10);
    b.resize(3 * floats_per_chunk);
    fill(s, b, 1.0f);
  }
  EXPECT_EQ(physical(), 0u);
  EXPECT_EQ(reservations(), 0u);
  EXPECT_EQ(fake().calls(EntryId::MemUnmap), 2);
}

TEST_F(GrowableBufferTest, ADeviceWithoutVirtualMemoryManagementIsRefusedWithFeatureUnavailable) {
  fake().devices[0].attributes[CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED] = 0;
  auto e = message_of<FeatureUnavailable>([&] { GrowableBuffer<float> b(dev(), 10); });
  EXPECT_NE(e.find("virtual memory management"), std::string::npos) << e;
  EXPECT_EQ(reservations(), 0u);
}

// Typed launches take growable and managed buffers like DeviceBuffers: the constness of
// each parameter decides the access, and a use on a second stream is ordered (the fake's
// ordering model fails the test on an unordered pair).
TEST_F(GrowableBufferTest, TypedLaunchesReadAndWriteGrowableAndManagedBuffersAcrossStreams) {
  Module module = Module::load(dev(), fake::cubin_image(testing::standard_image()));
  auto saxpy = module.kernel<testing::SaxpySig>("saxpy");
  Stream s1(dev()), s2(dev());
  const int n = static_cast<int>(floats_per_chunk + 100);  // across two chunks
  GrowableBuffer<float> x(dev(), 4 * floats_per_chunk);
  x.resize(floats_per_chunk);
  x.resize(static_cast<std::size_t>(n));
  ManagedBuffer<float> y(s1, static_cast<std::size_t>(n), uninitialized);
  auto xs = random_floats(static_cast<std::size_t>(n), 5), ys = random_floats(static_cast<std::size_t>(n), 6);
  copy(s1, xs, x);
  copy(s1, ys, y);
  int waits = fake().calls(EntryId::StreamWaitEvent);
  launch(s2, saxpy, LaunchConfig{1, 1}, 2.0f, x, y, n);  // x read, y written, on another stream
  EXPECT_GT(fake().calls(EntryId::StreamWaitEvent), waits);
  auto out = download(s1, y);
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], 2.0f * xs[i] + ys[i]) << i;
  module = Module();
}

class GrowableBufferGraphTest : public testing::GraphTestBase {};

TEST_F(GrowableBufferGraphTest, ACapturedGraphKeepsTheChunksMappedAfterAShrinkUntilItGoes) {
  Stream s(Device::get(0));
  GrowableBuffer<float> b(Device::get(0), 8 * floats_per_chunk);
  b.resize(floats_per_chunk);
  b.resize(3 * floats_per_chunk);  // a second chunk, of two granules
  const float* tail = reinterpret_cast<const float*>(b.device_pointer()) + 3 * floats_per_chunk - 1;
  auto g = std::make_unique<Graph>(capture_nonempty(s, [&] { cudakit::fill(s, b, 7.0f); }));
  auto exec = std::make_unique<GraphExec>(g->instantiate());
  b.resize(10);  // the graph still fills the whole old range
  EXPECT_EQ(fake().live("physical memory"), 2u) << "the graph holds the range: nothing unmapped";
  EXPECT_EQ(fake().calls(EntryId::MemUnmap), 0);
  EXPECT_EQ(b.capacity(), floats_per_chunk) << "the buffer's own capacity went down all the same";
  exec->launch(s);
  s.synchronize();
  EXPECT_EQ(*tail, 7.0f) << "the replay wrote the retired chunk, still mapped";
  b.resize(2 * floats_per_chunk);  // grows into the retired chunk again
  EXPECT_EQ(fake().live("physical memory"), 2u) << "the retired chunk was reused, not a new one made";
  b.resize(10);
  exec.reset();
  g.reset();
  run_deferred_releases();
  b.shrink_to_fit();  // held by the buffer alone now: retired chunks go back
  EXPECT_EQ(fake().live("physical memory"), 1u);
  EXPECT_EQ(fake().calls(EntryId::MemUnmap), 1);
}

class GrowableBufferPeerTest : public testing::MemoryTest {
 protected:
  void configure(fake::Driver& d) override { d.devices.resize(2); }
};

TEST_F(GrowableBufferPeerTest, ChunksGiveAccessToPeersWhoseAccessIsEnabled) {
  GrowableBuffer<float> b(dev(0), 4 * floats_per_chunk);
  b.resize(10);
  auto e = message_of<InvalidArgument>([&] { b.allow_access_from(dev(1)); });
  EXPECT_NE(e.find("enable_peer_access"), std::string::npos) << e;
  enable_peer_access(dev(1), dev(0));
  int grants = fake().calls(EntryId::MemSetAccess);
  b.allow_access_from(dev(1));  // the chunk mapped before
  EXPECT_EQ(fake().calls(EntryId::MemSetAccess), grants + 1);
  b.resize(2 * floats_per_chunk);  // a new chunk gets both devices at once
  auto& mappings = fake().mappings;
  ASSERT_EQ(mappings.size(), 2u);
  for (auto& [address, m] : mappings) EXPECT_EQ(m.devices, (std::set<int>{0, 1}));
}

}  // namespace
}  // namespace cudakit
