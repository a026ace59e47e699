// Downloads into fresh host memory map its pages in one call (madvise
// MADV_POPULATE_WRITE) after the copies are queued and before the wait, instead of paying
// one page fault per page after the device's work. The system call is replaced by a
// recording one, which also plays a kernel that refuses the advice.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "cudakit/gpu.hpp"
#include "memory/prefault.hpp"
#include "memory_fixture.hpp"

namespace cudakit {
namespace {

using driver::EntryId;

// What the recording system call saw, one entry per call.
struct AdviseSeen {
  std::uintptr_t start = 0;
  std::size_t length = 0;
  int advice = 0;
  std::vector<EntryId> driver_calls_before;  // the fake's call log at the time
};
std::vector<AdviseSeen> seen;
int answer_errno = 0;  // 0: the call succeeds; else it fails with this errno

int recording_advise(void* start, std::size_t length, int advice) {
  seen.push_back({reinterpret_cast<std::uintptr_t>(start), length, advice, fake::Driver::current().log()});
  if (answer_errno == 0) return 0;
  errno = answer_errno;
  return -1;
}

class PrefaultTest : public testing::MemoryTest {
 protected:
  void SetUp() override {
    MemoryTest::SetUp();
    seen.clear();
    answer_errno = 0;
    detail::reset_prefault_for_testing();
    detail::set_advise_call_for_testing(&recording_advise);
  }
  void TearDown() override {
    detail::set_advise_call_for_testing(nullptr);
    detail::reset_prefault_for_testing();
    MemoryTest::TearDown();
  }

  static std::vector<float> random_values(std::size_t n) {
    std::mt19937 rng(std::random_device{}());
    std::uniform_real_distribution<float> d(1.0f, 1000.0f);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
  }

  // True when the call at `seen` covered [data, data + bytes) in whole pages.
  static bool covers(const AdviseSeen& s, const void* data, std::size_t bytes) {
    auto begin = reinterpret_cast<std::uintptr_t>(data);
    return s.start <= begin && begin + bytes <= s.start + s.length && s.start % 4096 == 0 && s.length % 4096 == 0 &&
           s.length < bytes + 2 * 4096;
  }

  static std::size_t last_index_of(const std::vector<EntryId>& log, EntryId e) {
    for (std::size_t i = log.size(); i-- > 0;)
      if (log[i] == e) return i;
    return log.size();
  }
  static bool waited_after(const std::vector<EntryId>& log, std::size_t from) {
    for (std::size_t i = from; i < log.size(); ++i)
      if (log[i] == EntryId::StreamSynchronize || log[i] == EntryId::EventSynchronize ||
          log[i] == EntryId::CtxSynchronize)
        return true;
    return false;
  }
};

TEST_F(PrefaultTest, ANewVectorIsPrefaultedOnceAfterTheCopyIsQueuedAndBeforeTheWait) {
  Stream s(dev());
  const std::size_t n = 64 * 1024;  // 256 KiB: the request scenario's output
  std::vector<float> host = random_values(n);
  DeviceBuffer<float> d = upload(s, host);
  fake().clear_log();
  std::vector<float> out = download(s, d);
  EXPECT_EQ(out, host);
  ASSERT_EQ(seen.size(), 1u) << "one call maps every page";
  EXPECT_EQ(seen[0].advice, detail::advice_populate_write);
  EXPECT_TRUE(covers(seen[0], out.data(), n * sizeof(float)))
      << "the call covers the vector's storage, in whole pages, and no more than its pages";
  const std::vector<EntryId>& log = seen[0].driver_calls_before;
  std::size_t copy = last_index_of(log, EntryId::MemcpyDtoHAsync);
  ASSERT_LT(copy, log.size()) << "the copy is queued before the pages are mapped";
  EXPECT_FALSE(waited_after(log, 0)) << "nothing waited before the call: it overlaps the device's work";
}

TEST_F(PrefaultTest, GpuDownloadReturningAVectorIsPrefaulted) {
  Gpu gpu(0);
  std::vector<float> host = random_values(32 * 1024);
  auto d = gpu.upload(std::span<const float>(host));
  std::vector<float> out = gpu.download(d);
  EXPECT_EQ(out, host);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(covers(seen[0], out.data(), out.size() * sizeof(float)));
}

TEST_F(PrefaultTest, ADownloadIntoPageableMemoryIsPrefaultedBeforeTheWait) {
  Stream s(dev());
  const std::size_t n = 40 * 1024 + 3;  // not a whole number of pages
  std::vector<float> host = random_values(n);
  DeviceBuffer<float> d = upload(s, host);
  auto raw = std::make_unique<float[]>(n);  // fresh memory the caller never wrote
  fake().clear_log();
  download(s, d, std::span<float>(raw.get(), n));
  EXPECT_EQ(0, std::memcmp(raw.get(), host.data(), n * sizeof(float)));
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(covers(seen[0], raw.get(), n * sizeof(float)));
  EXPECT_LT(last_index_of(seen[0].driver_calls_before, EntryId::MemcpyDtoHAsync), seen[0].driver_calls_before.size());
  EXPECT_FALSE(waited_after(seen[0].driver_calls_before, 0));
}

TEST_F(PrefaultTest, AStreamOrderedCopyIntoPageableMemoryIsPrefaulted) {
  Stream s(dev());
  const std::size_t n = 64 * 1024;
  std::vector<float> host = random_values(n);
  DeviceBuffer<float> d = upload(s, host);
  std::vector<float> out(n, -1.0f);
  copy(s, d, out);
  s.synchronize();
  EXPECT_EQ(out, host);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(covers(seen[0], out.data(), n * sizeof(float)));
}

TEST_F(PrefaultTest, SmallAndPageLockedDestinationsAreNotPrefaulted) {
  Stream s(dev());
  std::vector<float> host = random_values(1000);  // 4000 bytes: below the threshold
  DeviceBuffer<float> d = upload(s, host);
  EXPECT_EQ(download(s, d), host);
  std::vector<float> big = random_values(64 * 1024);
  DeviceBuffer<float> b = upload(s, big);
  PinnedBuffer<float> pinned(big.size(), uninitialized);
  download(s, b, pinned);
  EXPECT_EQ(0, std::memcmp(pinned.data(), big.data(), big.size() * sizeof(float)));
  EXPECT_TRUE(seen.empty()) << seen.size() << " calls";
}

TEST_F(PrefaultTest, AKernelThatRefusesTheAdviceIsAskedOnceAndDownloadsStillWork) {
  answer_errno = EINVAL;  // a kernel older than 5.14
  Stream s(dev());
  std::vector<float> host = random_values(64 * 1024);
  DeviceBuffer<float> d = upload(s, host);
  EXPECT_EQ(download(s, d), host);
  EXPECT_TRUE(detail::prefault_unsupported());
  EXPECT_EQ(download(s, d), host);
  EXPECT_EQ(seen.size(), 1u) << "after EINVAL cudakit stops asking";
}

TEST_F(PrefaultTest, OtherFailuresAreIgnoredAndTheCallIsMadeAgain) {
  answer_errno = ENOMEM;
  Stream s(dev());
  std::vector<float> host = random_values(64 * 1024);
  DeviceBuffer<float> d = upload(s, host);
  errno = 1234;
  EXPECT_EQ(download(s, d), host);
  EXPECT_EQ(download(s, d), host);
  EXPECT_FALSE(detail::prefault_unsupported());
  EXPECT_EQ(seen.size(), 2u);
}

TEST_F(PrefaultTest, TheRealCallChangesNoByteAndAcceptsAnUnalignedRange) {
  detail::set_advise_call_for_testing(nullptr);  // the system's madvise
  std::vector<unsigned char> v(300 * 1024);
  std::mt19937 rng(std::random_device{}());
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  std::vector<unsigned char> copy = v;
  detail::prefault_for_write(v.data() + 1, v.size() - 1);
  EXPECT_EQ(v, copy);
  std::unique_ptr<unsigned char[]> fresh(new unsigned char[256 * 1024]);
  detail::prefault_for_write(fresh.get() + 5, 200 * 1024);  // memory nobody wrote yet
  fresh[5] = 7;
  EXPECT_EQ(fresh[5], 7);
}

}  // namespace
}  // namespace cudakit
