// The staging buffers behind pageable copies, on the fake driver: what one request of the
// README idiom costs in driver calls, which buffer each thread gets, that a thread never
// waits for a buffer another thread keeps idle, and the public reserve/release calls.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "cudakit/staging.hpp"
#include "memory_fixture.hpp"

namespace cudakit {
namespace {

using driver::EntryId;

class StagingTest : public testing::MemoryTest {
 protected:
  void SetUp() override {
    MemoryTest::SetUp();
    previous = detail::host_access_hook;  // the fake's ordering model
    detail::host_access_hook = &StagingTest::note;
  }
  void TearDown() override {
    detail::host_access_hook = previous;
    MemoryTest::TearDown();
  }

  // The staging buffer each thread filled last (the host writes into it on upload).
  static const void* last_filled_by_this_thread() { return last_filled; }

  // Runs `f` on another thread and fails the test if it has not returned after 10 s (a
  // thread waiting for a buffer nobody gives back would hang here).
  static void finishes(const char* what, std::function<void()> f) {
    auto done = std::async(std::launch::async, std::move(f));
    ASSERT_EQ(done.wait_for(std::chrono::seconds(10)), std::future_status::ready) << what << " hangs";
    done.get();
  }

 private:
  static void note(CUstream stream, const void* begin, std::size_t bytes, bool write, const char* what) {
    if (stream == nullptr && write) last_filled = begin;
    if (previous != nullptr) previous(stream, begin, bytes, write, what);
  }
  static inline thread_local const void* last_filled = nullptr;
  static inline detail::HostAccessHook previous = nullptr;
};

// One request as the README teaches it: a vector in, new buffers, a vector out.
std::vector<float> idiom_request(StreamRef s, const std::vector<float>& input) {
  DeviceBuffer<float> in = upload(s, input);
  DeviceBuffer<float> x(s, input.size(), uninitialized);
  copy(s, in, x);
  return download(s, x);
}

TEST_F(StagingTest, AnIdiomRequestInSteadyStateMakesOnlyItsCopiesWaitAndOneQuery) {
  Stream s(dev());
  auto input = values(10000, 3);  // 40 KB: one staging buffer each way
  ASSERT_EQ(idiom_request(s, input), input);  // warm: the staging buffer exists
  fake().clear_log();
  for (int i = 0; i < 5; ++i) ASSERT_EQ(idiom_request(s, values(10000, i)), values(10000, i));
  // Per request: the upload fills the buffer the download left idle (no query); the
  // download finds it recorded by the upload (one query) and waits for its own copy.
  EXPECT_EQ(calls(EntryId::MemHostAlloc), 0) << "no new staging buffer";
  EXPECT_EQ(calls(EntryId::EventCreate), 0);
  EXPECT_EQ(calls(EntryId::MemcpyHtoDAsync), 5);
  EXPECT_EQ(calls(EntryId::MemcpyDtoHAsync), 5);
  EXPECT_EQ(calls(EntryId::EventRecord), 10) << "one per staged copy";
  EXPECT_EQ(calls(EntryId::EventQuery), 5) << "one per request";
  EXPECT_EQ(calls(EntryId::EventSynchronize), 5) << "only the download's own copy is waited for";
  EXPECT_EQ(calls(EntryId::StreamSynchronize), 0);
  EXPECT_EQ(calls(EntryId::StreamWaitEvent), 0);
  EXPECT_EQ(calls(EntryId::MemAllocAsync), 10);
  EXPECT_EQ(calls(EntryId::MemFreeAsync), 10);
  EXPECT_EQ(detail::staging_chunk_count(0), 1) << "one thread, one buffer";
}

TEST_F(StagingTest, EachThreadGetsBackTheBufferItUsedLast) {
  // Two threads take turns. From a shared first-in-first-out list each would get the
  // buffer the other just gave back; kept by the thread, each gets its own every time.
  constexpr int turns = 10;
  std::mutex m;
  std::condition_variable cv;
  int turn = 0;
  std::vector<std::set<const void*>> seen(2);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      Stream s(dev());
      DeviceBuffer<float> d(s, 1000, uninitialized);
      for (int i = 0; i < turns; ++i) {
        std::unique_lock lock(m);
        cv.wait(lock, [&] { return turn % 2 == t; });
        copy(s, values(1000, t * 100 + i), d);
        seen[t].insert(last_filled_by_this_thread());
        ++turn;
        cv.notify_all();
      }
      EXPECT_EQ(download(s, d), values(1000, t * 100 + turns - 1));
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(seen[0].size(), 1u) << "thread 0 filled more than one staging buffer";
  EXPECT_EQ(seen[1].size(), 1u) << "thread 1 filled more than one staging buffer";
  EXPECT_NE(*seen[0].begin(), *seen[1].begin());
  EXPECT_EQ(detail::staging_chunk_count(0), 2);
}

TEST_F(StagingTest, AThreadTakesTheBufferAnIdleThreadKeepsInsteadOfWaiting) {
  small_staging(64, 1);  // one buffer in all
  std::promise<void> parked, finish;
  std::thread keeper([&] {
    Stream s(dev());
    DeviceBuffer<float> d = upload(s, values(16));  // the only buffer stays with this thread
    parked.set_value();
    finish.get_future().wait();  // alive and idle
  });
  parked.get_future().wait();
  finishes("an upload while another thread keeps the only buffer", [&] {
    Stream s(dev());
    DeviceBuffer<float> d = upload(s, values(16, 2));
    EXPECT_EQ(download(s, d), values(16, 2));
  });
  finish.set_value();
  keeper.join();
  EXPECT_EQ(detail::staging_chunk_count(0), 1);
}

TEST_F(StagingTest, AThreadThatEndsGivesItsBufferBack) {
  small_staging(64, 1);
  std::thread([&] {
    Stream s(dev());
    DeviceBuffer<float> d = upload(s, values(16));
  }).join();
  finishes("an upload after the thread that kept the only buffer ended", [&] {
    Stream s(dev());
    EXPECT_EQ(download(s, upload(s, values(16, 4))), values(16, 4));
  });
  EXPECT_EQ(detail::staging_chunk_count(0), 1);
}

TEST_F(StagingTest, AnIdleBufferIsReusedWhileAnotherIsStillInFlight) {
  // A buffer whose copy never completes (its stream busy, as far as queries tell) must
  // not make the pool grow at each copy while an idle buffer is there.
  small_staging(64, 4);
  Stream busy(dev()), s(dev());
  DeviceBuffer<float> e(busy, 16, uninitialized), d(s, 16, uninitialized);
  fill(s, d, 2.5f);
  fake().fail(EntryId::EventQuery, 0, CUDA_ERROR_NOT_READY);  // every recorded buffer looks in flight
  copy(busy, values(16), e);                                  // one buffer, recorded, in flight
  for (int i = 0; i < 3; ++i) EXPECT_EQ(download(s, d), std::vector<float>(16, 2.5f));
  fake().clear_faults();
  EXPECT_EQ(detail::staging_chunk_count(0), 2) << "the in-flight buffer and one for the downloads";
}

TEST_F(StagingTest, ThreadsServingRequestsMakeNoMoreBuffersThanThreads) {
  constexpr int threads = 4;
  std::atomic<int> wrong{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      Stream s(dev());
      for (int i = 0; i < 25; ++i) {
        auto input = values(2000, t * 1000 + i);
        if (idiom_request(s, input) != input) ++wrong;
      }
    });
  for (auto& th : pool) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(detail::staging_chunk_count(0), threads);
}

TEST_F(StagingTest, FewerBuffersThanThreadsUnderDelaysNeitherHangNorCorrupt) {
  // Widen the windows between parking, stealing and waiting: every event record and
  // query sleeps a little, so threads overlap in each step.
  small_staging(64, 2);
  fake().delay(EntryId::EventRecord, std::chrono::microseconds(50));
  fake().delay(EntryId::EventQuery, std::chrono::microseconds(50));
  constexpr int threads = 6;
  std::atomic<int> wrong{0};
  finishes("six threads on two staging buffers", [&] {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        Stream s(dev());
        for (int i = 0; i < 15; ++i) {
          auto input = values(40 + t, t * 100 + i);  // 160+ bytes: three buffers per copy
          if (idiom_request(s, input) != input) ++wrong;
        }
      });
    for (auto& th : pool) th.join();
  });
  fake().delay(EntryId::EventRecord, std::chrono::microseconds(0));
  fake().delay(EntryId::EventQuery, std::chrono::microseconds(0));
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(detail::staging_chunk_count(0), 2);
}

TEST_F(StagingTest, ReserveMakesBuffersUpFrontAndCopiesThenMakeNone) {
  Device d = dev();
  EXPECT_EQ(staging_usage(d).buffers, 0);
  reserve_staging(d, std::size_t(3) << 20);
  EXPECT_EQ(staging_usage(d).buffers, 3);
  EXPECT_EQ(staging_usage(d).bytes, std::size_t(3) << 20);
  EXPECT_EQ(calls(EntryId::MemHostAlloc), 3);
  reserve_staging(d, std::size_t(2) << 20);  // already there
  reserve_staging(d, 0);
  EXPECT_EQ(calls(EntryId::MemHostAlloc), 3);
  Stream s(d);
  auto input = values(100000, 7);
  EXPECT_EQ(idiom_request(s, input), input);
  EXPECT_EQ(calls(EntryId::MemHostAlloc), 3) << "the copies used the reserved buffers";
  reserve_staging(d, std::size_t(1) << 30);  // more than the pool may hold: up to its limit
  EXPECT_EQ(staging_usage(d).buffers, detail::default_staging_max_chunks);
}

TEST_F(StagingTest, ReleaseIdleFreesEveryBufferNoCopyUsesAlsoThoseOtherThreadsKeep) {
  Device d = dev();
  std::thread([&] {
    Stream s(d);
    EXPECT_EQ(download(s, upload(s, values(1000))), values(1000));
  }).join();
  std::promise<void> parked, finish;
  std::thread keeper([&] {
    Stream s(d);
    DeviceBuffer<float> b = upload(s, values(1000, 2));
    s.synchronize();
    parked.set_value();
    finish.get_future().wait();
  });
  parked.get_future().wait();
  Stream s(d);
  DeviceBuffer<float> b = upload(s, values(1000, 3));
  s.synchronize();
  const StagingUsage before = staging_usage(d);
  EXPECT_GE(before.buffers, 1);
  EXPECT_EQ(release_idle_staging(d), before.bytes);
  EXPECT_EQ(staging_usage(d).buffers, 0);
  EXPECT_EQ(calls(EntryId::MemFreeHost), before.buffers);
  finish.set_value();
  keeper.join();
  // The next copy makes a buffer again, and every thread's parked slot is empty.
  EXPECT_EQ(download(s, b), values(1000, 3));
  EXPECT_EQ(staging_usage(d).buffers, 1);
  EXPECT_EQ(release_idle_staging(Device::get(0)), std::size_t(1) << 20);
}

TEST_F(StagingTest, ReleaseIdleKeepsABufferACopyStillUses) {
  Device d = dev();
  Stream s(d);
  DeviceBuffer<float> b = upload(s, values(1000));  // its buffer is recorded, parked
  fake().fail(EntryId::EventQuery, 0, CUDA_ERROR_NOT_READY);
  EXPECT_EQ(release_idle_staging(d), 0u);
  EXPECT_EQ(staging_usage(d).buffers, 1);
  fake().clear_faults();
  EXPECT_EQ(release_idle_staging(d), std::size_t(1) << 20);
}

// A host element type whose construction records how far the download had gone.
struct Probe {
  float value;
  Probe() : value(0) {
    copies_queued = fake::Driver::current().calls(EntryId::MemcpyDtoHAsync);
    waits = fake::Driver::current().calls(EntryId::EventSynchronize);
  }
  static inline int copies_queued = -1;
  static inline int waits = -1;
};

TEST_F(StagingTest, ADownloadIntoANewVectorQueuesTheCopyBeforeMakingTheVector) {
  Stream s(dev());
  std::vector<Probe> host(300);
  for (std::size_t i = 0; i < host.size(); ++i) host[i].value = static_cast<float>(i) + 0.5f;
  DeviceBuffer<Probe> d = upload(s, host);
  fake().clear_log();
  std::vector<Probe> out = download(s, d);
  EXPECT_EQ(Probe::copies_queued, 1) << "the vector was made before its copy was queued";
  EXPECT_EQ(Probe::waits, 0) << "the vector was made after the wait: its making did not overlap the copy";
  ASSERT_EQ(out.size(), host.size());
  for (std::size_t i = 0; i < host.size(); ++i) ASSERT_EQ(out[i].value, host[i].value) << i;
}

TEST_F(StagingTest, ADownloadIntoANewVectorOfManyBuffersKeepsTheirOrder) {
  small_staging(64, 3);  // 4000 bytes through three 64-byte buffers, four in flight at most
  Stream s(dev());
  auto host = values<double>(500, 9);
  DeviceBuffer<double> d = upload(s, host);
  EXPECT_EQ(download(s, d), host);
  EXPECT_TRUE(download(s, d.first(0)).empty());
}

}  // namespace
}  // namespace cudakit
