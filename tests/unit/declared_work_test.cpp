// Declared work (declared_work.hpp) on the fake driver: the declared buffers are ordered as
// a typed launch orders its arguments, captured work keeps them alive, and the callable's
// result and exceptions pass through. The fake's ordering model fails a test whose
// conflicting accesses on two streams were not ordered.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>

#include "cudakit/copy.hpp"
#include "cudakit/declared_work.hpp"
#include "cudakit/host_registration.hpp"
#include "cudakit/pinned_buffer.hpp"
#include "graph_fixture.hpp"

namespace cudakit {
namespace {

using driver::cu;
using detail::library_context;

// Whether writes() accepts an argument of type B (a constraint, so this can be asked).
template <class B>
concept writable = requires(B&& b) { writes(std::forward<B>(b)); };

static_assert(writable<DeviceBuffer<float>&>);
static_assert(writable<DeviceSpan<float>>);
static_assert(!writable<const DeviceBuffer<float>&>, "a const buffer can only be declared as read");
static_assert(!writable<DeviceSpan<const float>>, "a view of const elements can only be declared as read");
static_assert(!writable<DeviceSpan<const float>&>);
static_assert(writable<const DeviceSpan<float>&>, "a view's own constness leaves its elements writable, as for launches");
static_assert(writable<PinnedBuffer<int>&>);
static_assert(!writable<const PinnedBuffer<int>&>, "a const pinned buffer can only be declared as read");
static_assert(!writable<const HostRegistration&>);

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

TEST_F(DeclaredWorkTest, EmptyDeclarationListsOrderNothingButStillCheckTheStream) {
  Stream s(dev());
  int ran = 0;
  enqueue(s, reads(), writes(), [&](CUstream) { ++ran; });
  enqueue(s, reads(), [&](CUstream) { ++ran; });
  enqueue(s, writes(), [&](CUstream) { ++ran; });
  EXPECT_EQ(ran, 3);
  EXPECT_EQ(records() + waits(), 0);
  EXPECT_THROW(enqueue(StreamRef{}, reads(), writes(), [&](CUstream) { ++ran; }), EmptyHandle);
  EXPECT_EQ(ran, 3);
}

TEST_F(DeclaredWorkTest, AnEmptyBufferDeclaresNothing) {
  Stream s1(dev()), s2(dev());
  DeviceBuffer<float> empty;
  DeviceBuffer<float> was_reset(s1, 64, zeroed);
  was_reset.reset();
  bool ran = false;
  enqueue(s2, reads(empty, was_reset), writes(DeviceSpan<float>{}), [&](CUstream) { ran = true; });
  EXPECT_TRUE(ran);
  EXPECT_EQ(records() + waits(), 0);
}

TEST_F(DeclaredWorkTest, AMovedFromBufferIsRefusedBeforeTheCallableRuns) {
  Stream s1(dev()), s2(dev());
  DeviceBuffer<float> a(s1, 64, zeroed);
  DeviceBuffer<float> moved = std::move(a);
  bool ran = false;
  // NOLINTNEXTLINE(bugprone-use-after-move): the point
  EXPECT_THROW(enqueue(s2, reads(moved), writes(a), [&](CUstream) { ran = true; }), EmptyHandle);
  EXPECT_THROW(enqueue(s2, reads(a), [&](CUstream) { ran = true; }), EmptyHandle);
  EXPECT_FALSE(ran);
  EXPECT_EQ(records() + waits(), 0);
}

TEST_F(DeclaredWorkTest, ViewsOfDifferentElementTypesInOneCallAreEachOrdered) {
  Stream s1(dev()), s2(dev());
  DeviceBuffer<float> f(s1, 16, uninitialized);
  DeviceBuffer<int> i(s1, 16, uninitialized);
  DeviceBuffer<double> d(s1, 16, uninitialized);
  DeviceBuffer<float> out(s2, 16, uninitialized);
  raw_fill(s1.handle(), f, 3.0f);
  ASSERT_EQ(cu.MemsetD32Async(i.device_pointer(), 7, i.size(), s1.handle()), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemsetD32Async(d.device_pointer(), 0, d.size() * 2, s1.handle()), CUDA_SUCCESS);
  // The writes above were raw: tell the buffers, as declared work would have.
  enqueue(s1, writes(f, i, d), [](CUstream) {});
  const DeviceSpan<const float> f_view = f.span();
  enqueue(s2, reads(f_view, i.span().first(8)), writes(d.span().last(4), out), [&](CUstream h) {
    raw_copy(h, f, out);
    ASSERT_EQ(cu.MemsetD32Async(d.device_pointer() + 12 * sizeof(double), 1, 8, h), CUDA_SUCCESS);
  });
  EXPECT_EQ(waits(), 3) << "each buffer written on s1 is waited for once on s2";
  s2.synchronize();
  EXPECT_EQ(at(out, 15), 3.0f);
}

TEST_F(DeclaredWorkTest, PinnedBuffersAreOrderedLikeDeviceMemory) {
  Stream s1(dev()), s2(dev());
  DeviceBuffer<float> source(s1, 64, uninitialized), out(s2, 64, uninitialized);
  raw_fill(s1.handle(), source, 9.0f);
  enqueue(s1, writes(source), [](CUstream) {});
  PinnedBuffer<float> staging(64, zeroed);
  download(s1, source, staging);  // s1 writes the pinned buffer
  // A raw host-to-device copy out of it on s2 must wait for that write.
  enqueue(s2, reads(staging), writes(out), [&](CUstream h) {
    ASSERT_EQ(cu.MemcpyHtoDAsync(out.device_pointer(), staging.data(), 64 * sizeof(float), h), CUDA_SUCCESS);
  });
  EXPECT_EQ(waits(), 1);
  // And a raw write into it on s1 waits for that read on s2.
  enqueue(s1, writes(staging), [&](CUstream h) {
    ASSERT_EQ(cu.MemcpyDtoHAsync(staging.data(), source.device_pointer(), 64 * sizeof(float), h), CUDA_SUCCESS);
  });
  EXPECT_EQ(waits(), 2);
  s1.synchronize();
  s2.synchronize();
  EXPECT_EQ(at(out, 63), 9.0f);
}

TEST_F(DeclaredWorkTest, DeclaringOneBufferAsReadAndWrittenOrdersItAsAWrite) {
  Stream s1(dev()), s2(dev()), s3(dev());
  DeviceBuffer<float> a(s1, 64, zeroed), r(s2, 64, uninitialized);
  enqueue(s2, reads(a), writes(r), [&](CUstream h) { raw_copy(h, a, r); });  // waits for s1's write
  const int before = waits();
  enqueue(s3, reads(a), writes(a), [&](CUstream h) { raw_fill(h, a, 1.0f); });
  EXPECT_EQ(waits() - before, 2) << "the write waited for the reader on s2 and the writer on s1";
  s3.synchronize();
}

TEST_F(DeclaredWorkTest, InsideManualOrderingNothingIsOrdered) {
  Stream s1(dev()), s2(dev());
  DeviceBuffer<float> a(s1, 64, uninitialized), b(s2, 64, uninitialized);
  raw_fill(s1.handle(), a, 4.0f);
  {
    ManualOrdering manual;
    s2.wait(s1);  // ordered by hand: one record, one wait
    enqueue(s2, reads(a), writes(b), [&](CUstream h) { raw_copy(h, a, b); });
  }
  EXPECT_EQ(waits(), 1) << "only the wait made by hand";
  s2.synchronize();
  EXPECT_EQ(at(b, 0), 4.0f);
}

TEST_F(DeclaredWorkTest, InsideACaptureManualOrderingStillKeepsTheDeclaredBuffers) {
  Stream s(dev());
  auto a = std::make_unique<DeviceBuffer<float>>(s, 64, zeroed);
  Graph g = capture_nonempty(s, [&] {
    ManualOrdering manual;
    enqueue(s, writes(*a), [&](CUstream h) { raw_fill(h, *a, 3.0f); });
  });
  std::size_t before = live_memory();
  a.reset();
  EXPECT_EQ(live_memory(), before) << "the graph keeps the buffer declared under ManualOrdering";
  GraphExec exec = g.instantiate();
  exec.launch(s);
  s.synchronize();
}

TEST_F(DeclaredWorkTest, AnExceptionInsideACaptureEndsTheCaptureAndTheStreamWorksAfter) {
  Stream s(dev());
  DeviceBuffer<float> a(s, 8, zeroed);
  EXPECT_THROW((void)capture(s, [&] {
    enqueue(s, writes(a), [&](CUstream h) {
      raw_fill(h, a, 1.0f);
      throw std::runtime_error("library failed inside the capture");
    });
  }),
               std::runtime_error);
  expect_no_capture_left(s);
  enqueue(s, writes(a), [&](CUstream h) { raw_fill(h, a, 6.0f); });
  s.synchronize();
  EXPECT_EQ(at(a, 7), 6.0f);
}

class TwoDeviceDeclaredWorkTest : public DeclaredWorkTest {
  void configure(fake::Driver& d) override { d.devices.resize(2); }
};

TEST_F(TwoDeviceDeclaredWorkTest, ABufferOnAPeerDeviceIsOrderedAcrossDevices) {
  Stream s0(Device::get(0)), s1(Device::get(1));
  DeviceBuffer<float> there(s1, 64, uninitialized), here(s0, 64, uninitialized);
  enqueue(s1, writes(there), [&](CUstream h) { raw_fill(h, there, 8.0f); });
  // A peer copy on device 0's stream reads the buffer device 1's stream wrote.
  enqueue(s0, reads(there), writes(here), [&](CUstream h) {
    ASSERT_EQ(cu.MemcpyPeerAsync(here.device_pointer(), library_context(0), there.device_pointer(),
                                 library_context(1), 64 * sizeof(float), h),
              CUDA_SUCCESS);
  });
  EXPECT_EQ(waits(), 1) << "one event recorded on device 1's stream, waited on by device 0's";
  s0.synchronize();
  EXPECT_EQ(at(here, 63), 8.0f);
}

}  // namespace
}  // namespace cudakit
