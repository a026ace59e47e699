// ManagedBuffer against the fake driver: allocation and its refusal beyond the device's
// free memory, tracking of prefetches across streams, advice, frees after every user.
#include <gtest/gtest.h>

#include <random>
#include <type_traits>
#include <vector>

#include "cudakit/capture.hpp"
#include "cudakit/detail/kernel_binding.hpp"
#include "cudakit/managed_buffer.hpp"
#include "memory_fixture.hpp"

namespace cudakit {
namespace {

using driver::EntryId;
using testing::message_of;

static_assert(!std::is_copy_constructible_v<ManagedBuffer<float>> && std::is_nothrow_move_constructible_v<ManagedBuffer<float>>);
static_assert(detail::binding<float*, ManagedBuffer<float>&>() == detail::Binding::buffer_write);
static_assert(device_range<ManagedBuffer<int>&>);

class ManagedBufferTest : public testing::MemoryTest {};

TEST_F(ManagedBufferTest, HostAndDeviceShareTheElementsAndTheFreeWaitsForTheStreamsThatUsedThem) {
  Stream s(dev()), other(dev());
  std::mt19937 gen(7);
  std::vector<int> values(1000);
  for (auto& v : values) v = static_cast<int>(gen() % 100000) + 1;
  {
    ManagedBuffer<int> m(s, values.size(), zeroed);
    EXPECT_EQ(fake().live("device memory"), 1u);
    m.wait_for_users();
    for (int x : m.host()) ASSERT_EQ(x, 0);
    copy(other, values, m);  // a write on a second stream, ordered after the zero-fill
    auto back = download(s, m);
    EXPECT_EQ(back, values);
    m.wait_for_users();
    EXPECT_EQ(m.host()[999], values[999]);
  }
  EXPECT_EQ(fake().live("device memory"), 0u);
  EXPECT_EQ(fake().calls(EntryId::MemFree), 1);
}

TEST_F(ManagedBufferTest, MoreThanTheDeviceHasFreeIsRefusedUnlessOversubscriptionIsAllowed) {
  fake().devices[0].total_memory = std::size_t(64) << 20;
  Stream s(dev());
  DeviceBuffer<char> taken(s, std::size_t(32) << 20, uninitialized);
  auto e = message_of<OutOfMemory>([&] { ManagedBuffer<char> m(s, std::size_t(40) << 20, uninitialized); });
  EXPECT_NE(e.find("oversubscribe = true"), std::string::npos) << e;
  EXPECT_NE(e.find("free"), std::string::npos) << e;
  EXPECT_EQ(fake().calls(EntryId::MemAllocManaged), 0) << "refused before the driver";
  ManagedBuffer<char> m(s, std::size_t(40) << 20, uninitialized, {.oversubscribe = true});
  EXPECT_EQ(m.size(), std::size_t(40) << 20);
}

TEST_F(ManagedBufferTest, APrefetchOnAnotherStreamWaitsForTheLastWriter) {
  Stream writer(dev()), prefetcher(dev());
  ManagedBuffer<float> m(writer, 256, uninitialized);
  fill(writer, m, 3.0f);
  int waits = fake().calls(EntryId::StreamWaitEvent);
  m.prefetch_to(prefetcher, dev());
  EXPECT_EQ(fake().calls(EntryId::StreamWaitEvent), waits + 1);
  m.prefetch_to_host(prefetcher);
  EXPECT_EQ(fake().calls(EntryId::MemPrefetchAsync), 2);
  // The fixture fails on an unordered pair: the prefetch read after the fill's write.
}

TEST_F(ManagedBufferTest, AdviceReachesTheDriverForTheBufferTheDeviceAndTheHost) {
  Stream s(dev());
  ManagedBuffer<double> m(s, 64, uninitialized);
  m.advise(ManagedAdvice::read_mostly);
  m.advise(ManagedAdvice::preferred_location, dev());
  m.advise_host(ManagedAdvice::accessed_by);
  EXPECT_EQ(fake().calls(EntryId::MemAdvise), 3);
  fake().fail(EntryId::MemAdvise, 4, CUDA_ERROR_INVALID_VALUE);
  auto e = message_of<DriverError>([&] { m.advise(ManagedAdvice::not_read_mostly); });
  EXPECT_NE(e.find("cuMemAdvise"), std::string::npos) << e;
}

TEST_F(ManagedBufferTest, APrefetchInsideACaptureIsRefusedAndTheCaptureStaysValid) {
  Stream s(dev());
  ManagedBuffer<float> m(s, 16, zeroed);
  DeviceBuffer<float> d(s, 16, zeroed);
  Graph g = capture_nonempty(s, [&] {
    EXPECT_THROW(m.prefetch_to(s, dev()), CaptureError);
    fill(s, d, 1.0f);
  });
  EXPECT_EQ(fake().calls(EntryId::MemPrefetchAsync), 0);
}

TEST_F(ManagedBufferTest, AMovedFromBufferThrowsEmptyHandle) {
  Stream s(dev());
  ManagedBuffer<int> a(s, 8, zeroed);
  ManagedBuffer<int> b = std::move(a);
  EXPECT_THROW(a.prefetch_to(s, dev()), EmptyHandle);
  EXPECT_THROW((void)a.span(), EmptyHandle);
  EXPECT_EQ(b.size(), 8u);
  ManagedBuffer<int> none(s, 0, zeroed);
  EXPECT_EQ(fake().calls(EntryId::MemAllocManaged), 1);
}

}  // namespace
}  // namespace cudakit
