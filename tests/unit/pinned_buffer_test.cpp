// Page-locked host memory against the fake driver: PinnedBuffer and
// HostRegistration are tracked like device memory, so their cross-stream use is ordered
// and they are freed (unregistered) only after every stream that used them.
#include <gtest/gtest.h>

#include <type_traits>
#include <vector>

#include "memory_fixture.hpp"

namespace cudakit {
namespace {

using driver::EntryId;
using testing::message_of;

class PinnedBufferTest : public testing::MemoryTest {};

static_assert(!std::is_copy_constructible_v<PinnedBuffer<float>> && std::is_nothrow_move_constructible_v<PinnedBuffer<float>>);
static_assert(!std::is_copy_constructible_v<HostRegistration> && std::is_nothrow_move_constructible_v<HostRegistration>);
static_assert(std::ranges::contiguous_range<PinnedBuffer<float>&>);
static_assert(std::is_convertible_v<PinnedBuffer<float>&, std::span<float>>);
static_assert(std::is_convertible_v<const PinnedBuffer<float>&, std::span<const float>>);

TEST_F(PinnedBufferTest, AllocatesPortablePageLockedMemoryAndFreesIt) {
  {
    PinnedBuffer<int> p(100, zeroed);
    EXPECT_EQ(p.size(), 100u);
    EXPECT_EQ(p.size_bytes(), 400u);
    EXPECT_EQ(p[99], 0);
    p[3] = 7;
    EXPECT_EQ(p.span()[3], 7);
    EXPECT_EQ(fake().live("pinned host memory"), 1u);
    EXPECT_EQ(p.mapped_pointer(), 0u);
  }
  EXPECT_EQ(fake().live("pinned host memory"), 0u);
  EXPECT_EQ(calls(EntryId::MemFreeHost), 1);
  EXPECT_EQ(calls(EntryId::StreamSynchronize), 0) << "no stream used it: nothing to wait for";
}

TEST_F(PinnedBufferTest, MovedFromBufferIsEmptyAndEmptyBufferAllocatesNothing) {
  PinnedBuffer<float> a(10, uninitialized);
  PinnedBuffer<float> b = std::move(a);
  EXPECT_FALSE(a);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_TRUE(b);
  PinnedBuffer<float> none(0, uninitialized);
  EXPECT_EQ(calls(EntryId::MemHostAlloc), 1);
  a = std::move(b);
  EXPECT_EQ(fake().live("pinned host memory"), 1u);
}

TEST_F(PinnedBufferTest, MappedBufferHasADevicePointer) {
  PinnedBuffer<int> p(4, zeroed, {.mapped = true});
  EXPECT_EQ(p.mapped_pointer(), reinterpret_cast<CUdeviceptr>(p.data())) << "unified addressing";
  PinnedBuffer<int> w(4, zeroed, {.write_combined = true});
  EXPECT_EQ(w.mapped_pointer(), 0u);
}

TEST_F(PinnedBufferTest, FreeWaitsForTheStreamsAnAsyncCopyStillUses) {
  Stream a(dev()), b(dev());
  DeviceBuffer<float> d(a, 64, zeroed);
  {
    PinnedBuffer<float> p(64, uninitialized);
    copy(a, d, p);  // the stream writes p, later
    copy(b, p, d.subspan(0, 64));  // and b reads it: ordered after a's write
    fake().clear_log();
  }  // freed here: after both streams (the model checks cuMemFreeHost's host access)
  EXPECT_GE(calls(EntryId::StreamSynchronize), 1);
  EXPECT_EQ(calls(EntryId::MemFreeHost), 1);
}

TEST_F(PinnedBufferTest, ModelCatchesAPinnedFreeThatDoesNotWait) {
  // What the test above guards against: cuMemFreeHost while a copy on a stream still
  // uses the memory is a hazard the fake sees.
  ignore_hazards();
  Stream s(dev());
  DeviceBuffer<float> d(s, 16, zeroed);
  void* raw = nullptr;
  ASSERT_EQ(driver::cu.MemHostAlloc(&raw, 64, 0), CUDA_SUCCESS);
  ASSERT_EQ(driver::cu.MemcpyDtoHAsync(raw, d.device_pointer(), 64, s.handle()), CUDA_SUCCESS);
  ASSERT_EQ(driver::cu.MemFreeHost(raw), CUDA_SUCCESS);
  EXPECT_EQ(fake().hazards().size(), 1u);
  s.synchronize();
}

TEST_F(PinnedBufferTest, UseOnASecondStreamIsOrderedAfterTheFirst) {
  Stream a(dev()), b(dev());
  DeviceBuffer<float> src(a, 32, uninitialized), dst(b, 32, uninitialized);
  fill(a, src, 4.0f);
  PinnedBuffer<float> p(32, zeroed);
  copy(a, src, p);  // a writes p
  fake().clear_log();
  copy(b, p, dst);  // b reads p: waits for a
  EXPECT_EQ(calls(EntryId::StreamWaitEvent), 1);
  EXPECT_EQ(download(b, dst), std::vector<float>(32, 4.0f));
}

TEST_F(PinnedBufferTest, RepeatedUseOnOneStreamCostsNoEvent) {
  Stream s(dev());
  DeviceBuffer<float> d(s, 32, zeroed);
  PinnedBuffer<float> p(32, zeroed);
  fake().clear_log();
  for (int i = 0; i < 20; ++i) {
    copy(s, p, d);
    copy(s, d, p);
  }
  EXPECT_EQ(calls(EntryId::EventRecord), 0);
  EXPECT_EQ(calls(EntryId::StreamWaitEvent), 0);
  s.synchronize();
}

TEST_F(PinnedBufferTest, SynchronizeWaitsForEveryStreamThatUsedIt) {
  Stream a(dev()), b(dev());
  DeviceBuffer<float> d(a, 8, zeroed);
  fill(a, d, 9.0f);
  PinnedBuffer<float> p(8, zeroed);
  copy(a, d, p);
  copy(b, p, d);
  fake().clear_log();
  p.synchronize();
  EXPECT_EQ(calls(EntryId::StreamSynchronize), 2);
  // The host may now touch it: the model agrees.
  fake().access(nullptr, reinterpret_cast<std::uintptr_t>(p.data()), p.size_bytes(), true, "host refill");
  EXPECT_EQ(p[7], 9.0f);
}

TEST_F(PinnedBufferTest, OutOfPageLockedMemoryReportsTheNumbersAndTheProcessGoesOn) {
  fake().pinned_host_limit = 1 << 20;
  auto m = message_of<OutOfMemory>([&] { PinnedBuffer<char> big(2 << 20, uninitialized); });
  EXPECT_NE(m.find("cuMemHostAlloc on pinned buffer on device 0"), std::string::npos) << m;
  EXPECT_NE(m.find("asked for 2.00 MiB (2097152 B)"), std::string::npos) << m;
  EXPECT_NE(m.find("free of"), std::string::npos) << m;
  try {
    PinnedBuffer<char> big(2 << 20, uninitialized);
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.requested(), 2u << 20);
    EXPECT_GT(e.total_bytes(), 0u) << "the host's physical memory";
  }
  PinnedBuffer<char> fits(1000, zeroed);
  EXPECT_EQ(fits[999], 0);
}

TEST_F(PinnedBufferTest, FailedMapLeaksNothing) {
  fake().fail(EntryId::MemHostGetDevicePointer, 1, CUDA_ERROR_INVALID_VALUE);
  EXPECT_THROW(PinnedBuffer<int>(4, zeroed, {.mapped = true}), DriverError);
  EXPECT_EQ(fake().live("pinned host memory"), 0u);
}

// ---- registrations ----

TEST_F(PinnedBufferTest, RegistrationPageLocksAndUnlocksExistingMemory) {
  std::vector<float> host(1000, 1.0f);
  {
    HostRegistration r(host);
    EXPECT_EQ(r.data(), host.data());
    EXPECT_EQ(fake().live("host registration"), 1u);
    HostRegistration moved = std::move(r);
    EXPECT_FALSE(r);
    EXPECT_TRUE(moved);
  }
  EXPECT_EQ(fake().live("host registration"), 0u);
  EXPECT_EQ(calls(EntryId::MemHostUnregister), 1);
}

TEST_F(PinnedBufferTest, OverlappingRegistrationIsRefusedByTheDriver) {
  std::vector<float> host(1000);
  HostRegistration r(host);
  auto m = message_of<DriverError>([&] { HostRegistration again(host.data() + 10, 40); });
  EXPECT_NE(m.find("cuMemHostRegister on host registration"), std::string::npos) << m;
  EXPECT_NE(m.find("CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"), std::string::npos) << m;
}

TEST_F(PinnedBufferTest, UnregisteringWaitsForTheStreamsThatUsedIt) {
  Stream s(dev());
  std::vector<float> host(64, 2.0f);
  DeviceBuffer<float> d(s, 64, uninitialized);
  {
    HostRegistration r(host, {.mapped = true});
    EXPECT_EQ(r.mapped_pointer(), reinterpret_cast<CUdeviceptr>(host.data()));
    copy(s, host, d);  // direct: reads the registered range on s
    copy(s, d, host);  // and writes it
    fake().clear_log();
  }
  EXPECT_EQ(calls(EntryId::StreamSynchronize), 1);
  EXPECT_EQ(host[63], 2.0f);
}

TEST_F(PinnedBufferTest, EmptyRegistrationRegistersNothing) {
  HostRegistration none(nullptr, 0);
  EXPECT_FALSE(none);
  EXPECT_THROW(HostRegistration(nullptr, 16), InvalidArgument);
  EXPECT_EQ(calls(EntryId::MemHostRegister), 0);
}

// ---- device memory out of memory (the pool path and the plain path) ----

TEST_F(PinnedBufferTest, DeviceOutOfMemoryReportsTheNumbersAndTheProcessGoesOn) {
  Stream s(dev());
  for (Allocator allocator : {Allocator::pool, Allocator::plain}) {
    const std::size_t asked = std::size_t(17) << 30;  // the fake device has 16 GiB
    try {
      DeviceBuffer<char> huge(s, asked, uninitialized, allocator);
      FAIL() << "allocated more than the device has";
    } catch (const OutOfMemory& e) {
      EXPECT_EQ(e.requested(), asked);
      EXPECT_EQ(e.total_bytes(), std::size_t(16) << 30);
      EXPECT_EQ(e.free_bytes(), std::size_t(16) << 30);
      std::string m = e.what();
      EXPECT_NE(m.find("asked for 17.00 GiB"), std::string::npos) << m;
      EXPECT_NE(m.find("with 16.00 GiB (17179869184 B) free of 16.00 GiB"), std::string::npos) << m;
    }
    DeviceBuffer<float> fine(s, 1000, zeroed, allocator);
    EXPECT_EQ(download(s, fine)[999], 0.0f);
  }
  EXPECT_EQ(calls(EntryId::MemPoolTrimTo), 2) << "each failure trims the pool and tries again";
  EXPECT_EQ(calls(EntryId::MemAllocAsync), 3);
  EXPECT_EQ(calls(EntryId::MemAlloc), 3);
}

}  // namespace
}  // namespace cudakit
