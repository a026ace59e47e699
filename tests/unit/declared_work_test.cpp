// Declared work (declared_work.hpp) on the fake driver: the declared buffers are ordered as
// a typed launch orders its arguments, captured work keeps them alive, and the callable's
// result and exceptions pass through. The fake's ordering model fails a test whose
// conflicting accesses on two streams were not ordered.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>

#include "cudakit/declared_work.hpp"
#include "graph_fixture.hpp"

namespace cudakit {
namespace {

using driver::cu;

// Whether writes() accepts an argument of type B (a constraint, so this can be asked).
template <class B>
concept writable = requires(B&& b) { writes(std::forward<B>(b)); };

static_assert(writable<DeviceBuffer<float>&>);
static_assert(writable<DeviceSpan<float>>);
static_assert(!writable<const DeviceBuffer<float>&>, "a const buffer can only be declared as read");
static_assert(!writable<DeviceSpan<const float>>, "a view of const elements can only be declared as read");
static_assert(!writable<DeviceSpan<const float>&>);

class DeclaredWorkTest : public testing::GraphTestBase {
 protected:
  std::size_t live_memory() { return fake().live("device memory"); }
  // What a library call does with raw pointers: copy `from` into `to` on the stream.
  static void raw_copy(CUstream s, const DeviceBuffer<float>& from, DeviceBuffer<float>& to) {
    ASSERT_EQ(cu.MemcpyDtoDAsync(to.device_pointer(), from.device_pointer(), from.size() * sizeof(float), s),
              CUDA_SUCCESS);
  }
  static void raw_fill(CUstream s, DeviceBuffer<float>& to, float value) {
    unsigned bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    ASSERT_EQ(cu.MemsetD32Async(to.device_pointer(), bits, to.size(), s), CUDA_SUCCESS);
  }
};

TEST_F(DeclaredWorkTest, OnOneStreamItRecordsNoEventAndWaitsForNothing) {
  Stream s(dev());
  DeviceBuffer<float> a(s, 64, zeroed), b(s, 64, uninitialized);
  for (int i = 0; i < 20; ++i)
    enqueue(s, reads(a), writes(b), [&](CUstream h) { raw_copy(h, a, b); });
  EXPECT_EQ(records(), 0);
  EXPECT_EQ(waits(), 0);
}

TEST_F(DeclaredWorkTest, AReadOnASecondStreamWaitsForTheWriteOnTheFirst) {
  Stream s1(dev()), s2(dev());
  DeviceBuffer<float> a(s1, 64, uninitialized), b(s2, 64, uninitialized);
  enqueue(s1, writes(a), [&](CUstream h) { raw_fill(h, a, 5.0f); });
  enqueue(s2, reads(a), writes(b), [&](CUstream h) { raw_copy(h, a, b); });
  EXPECT_EQ(waits(), 1) << "one wait where the streams meet";
  s2.synchronize();
  EXPECT_EQ(at(b, 63), 5.0f);
}

TEST_F(DeclaredWorkTest, AWriteOnASecondStreamWaitsForEveryReader) {
  Stream s1(dev()), s2(dev()), s3(dev());
  DeviceBuffer<float> a(s1, 64, zeroed), r1(s1, 64, uninitialized), r2(s2, 64, uninitialized);
  enqueue(s1, reads(a), writes(r1), [&](CUstream h) { raw_copy(h, a, r1); });
  enqueue(s2, reads(a), writes(r2), [&](CUstream h) { raw_copy(h, a, r2); });
  enqueue(s3, writes(a), [&](CUstream h) { raw_fill(h, a, 1.0f); });
  s3.synchronize();
  EXPECT_GE(waits(), 2) << "the writer waited for both readers";
}

TEST_F(DeclaredWorkTest, TheCallableGetsTheStreamAsAHandleOrAsARefAndItsResultIsReturned) {
  Stream s(dev());
  DeviceBuffer<float> a(s, 8, zeroed);
  CUstream seen = enqueue(s, reads(a), [](CUstream h) { return h; });
  EXPECT_EQ(seen, s.handle());
  int device = enqueue(s, reads(a), [](StreamRef r) { return r.device_ordinal(); });
  EXPECT_EQ(device, 0);
}

TEST_F(DeclaredWorkTest, TheCallablesExceptionPropagates) {
  Stream s(dev());
  DeviceBuffer<float> a(s, 8, zeroed);
  EXPECT_THROW(enqueue(s, writes(a), [](CUstream) { throw std::runtime_error("library failed"); }), std::runtime_error);
  enqueue(s, writes(a), [&](CUstream h) { raw_fill(h, a, 2.0f); });  // the stream stays usable
  s.synchronize();
  EXPECT_EQ(at(a, 0), 2.0f);
}

TEST_F(DeclaredWorkTest, AnEmptyStreamIsRefusedBeforeTheCallableRuns) {
  DeviceBuffer<float> a(Stream(dev()), 8, zeroed);
  bool ran = false;
  EXPECT_THROW(enqueue(StreamRef{}, reads(a), [&](CUstream) { ran = true; }), EmptyHandle);
  EXPECT_FALSE(ran);
}

TEST_F(DeclaredWorkTest, CapturedWorkKeepsItsBuffersAliveAndAReplayOrdersThem) {
  Stream s(dev()), other(dev());
  auto a = std::make_unique<DeviceBuffer<float>>(s, 64, uninitialized);
  DeviceBuffer<float> out(other, 64, uninitialized);
  fill(*a, s, 1.0f);
  Graph g = capture_nonempty(s, [&] { enqueue(s, writes(*a), [&](CUstream h) { raw_fill(h, *a, 7.0f); }); });
  const DeviceBuffer<float>* kept = a.get();
  GraphExec exec = g.instantiate();
  exec.launch(s);
  // A read on another stream after the replay waits for it.
  enqueue(other, reads(*kept), writes(out), [&](CUstream h) { raw_copy(h, *kept, out); });
  other.synchronize();
  EXPECT_EQ(at(out, 0), 7.0f);
  std::size_t before = live_memory();
  a.reset();
  EXPECT_EQ(live_memory(), before) << "the graph keeps the declared buffer";
  exec.launch(s);
  s.synchronize();
}

TEST_F(DeclaredWorkTest, WorkFromAnotherThreadOnAStreamThisThreadCapturesIsRefused) {
  Stream s(dev());
  DeviceBuffer<float> a(s, 8, zeroed);
  Capture capture(s);
  bool refused = false;
  std::thread([&] {
    try {
      enqueue(s, reads(a), [](CUstream) {});
    } catch (const CaptureError&) {
      refused = true;
    }
  }).join();
  EXPECT_TRUE(refused);
  (void)capture.end();
}

}  // namespace
}  // namespace cudakit
