// The driver's stream-capture rules that the fake driver imitates, as scenarios written
// once against the raw driver table (driver::cu) and run twice: on the fake
// (tests/unit/capture_rules_test.cpp) and on a GPU (tests/device/capture_rules_device_test.cpp).
// Both files expand CUDAKIT_CAPTURE_RULES, so every scenario has its twin, and a rule the
// fake gets wrong fails on the GPU instead of passing unseen in the unit tests.
//
// Each scenario checks the code the rule returns, what it does to the capture (left
// active or invalidated) and how the capture then ends. A rule the fake imitates gets a
// scenario here. Where the fake is stricter than the driver on purpose, there is none:
// stream, event and module creation and primary-context retains refused under a strict
// capture mode (so a unit test sees cudakit make them there), stream-ordered allocation
// on a capturing stream and graph launches into a capture (not modelled).
//
// Every scenario runs on a DriverRig: the primary context of one device current, streams,
// events and memory made through the raw driver before the capture begins, and all of it
// released at the end (a capture a failed expectation left open is ended first).
#pragma once

#include <gtest/gtest.h>

#include <cuda.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cudakit/context.hpp"
#include "cudakit/device.hpp"
#include "cudakit/driver.hpp"

namespace cudakit::scenarios {

/// The raw driver with one device's primary context current, and what a scenario makes.
class DriverRig {
 public:
  explicit DriverRig(Device device) : context_(Context::primary(device)) {
    context_.make_current();
    EXPECT_EQ(driver::cu.MemAlloc(&scratch_, scratch_bytes), CUDA_SUCCESS);
  }

  ~DriverRig() {
    context_.make_current();
    for (CUstream s : streams_) end_open_capture(s);
    for (CUstream s : streams_) {
      driver::cu.StreamSynchronize(s);
      driver::cu.StreamDestroy(s);
    }
    for (CUgraph g : graphs_) driver::cu.GraphDestroy(g);
    for (CUevent e : events_) driver::cu.EventDestroy(e);
    for (CUdeviceptr p : memory_) driver::cu.MemFree(p);
    for (void* p : host_memory_) driver::cu.MemFreeHost(p);
    if (scratch_ != 0) driver::cu.MemFree(scratch_);
  }

  DriverRig(const DriverRig&) = delete;
  DriverRig& operator=(const DriverRig&) = delete;

  /// A new non-blocking stream, destroyed with the rig.
  CUstream stream() {
    CUstream s = nullptr;
    EXPECT_EQ(driver::cu.StreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
    streams_.push_back(s);
    return s;
  }

  /// A new event (timing disabled), destroyed with the rig.
  CUevent event() {
    CUevent e = nullptr;
    EXPECT_EQ(driver::cu.EventCreate(&e, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    events_.push_back(e);
    return e;
  }

  /// Device memory, freed with the rig (unless the scenario frees it).
  CUdeviceptr memory(std::size_t bytes) {
    CUdeviceptr p = 0;
    EXPECT_EQ(driver::cu.MemAlloc(&p, bytes), CUDA_SUCCESS);
    memory_.push_back(p);
    return p;
  }
  /// Page-locked host memory, freed with the rig (unless the scenario frees it).
  void* host_memory(std::size_t bytes) {
    void* p = nullptr;
    EXPECT_EQ(driver::cu.MemHostAlloc(&p, bytes, 0), CUDA_SUCCESS);
    host_memory_.push_back(p);
    return p;
  }
  /// The scenario freed it: the rig does not.
  void forget(CUdeviceptr p) { std::erase(memory_, p); }
  void forget(void* host) { std::erase(host_memory_, host); }

  /// One small piece of stream-ordered work (a memset of the rig's scratch memory).
  CUresult work(CUstream s) { return driver::cu.MemsetD8Async(scratch_, 0x5a, scratch_bytes, s); }

  /// Ends the capture that `s` began: its status, and the graph (destroyed with the rig).
  CUresult end_capture(CUstream s, CUgraph* graph = nullptr) {
    CUgraph g = nullptr;
    CUresult r = driver::cu.StreamEndCapture(s, &g);
    if (g != nullptr) graphs_.push_back(g);
    if (graph != nullptr) *graph = g;
    return r;
  }

  /// A new stream that began a capture in `mode` and captured one piece of work.
  CUstream capturing_stream(CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL) {
    CUstream s = stream();
    EXPECT_EQ(driver::cu.StreamBeginCapture(s, mode), CUDA_SUCCESS);
    EXPECT_EQ(work(s), CUDA_SUCCESS);
    return s;
  }

  /// `waiting` waits for event `via` recorded on `recorded`: a fork into a capture, or a
  /// join back. (Streams and events are made before a capture begins: the fake refuses
  /// to make them during one.)
  void wait_through(CUstream waiting, CUevent via, CUstream recorded) {
    EXPECT_EQ(driver::cu.EventRecord(via, recorded), CUDA_SUCCESS);
    EXPECT_EQ(driver::cu.StreamWaitEvent(waiting, via, 0), CUDA_SUCCESS);
  }

  /// Expects `s`'s capture invalidated: its status says so, work submitted to it is
  /// refused, and its end fails without a graph and ends it. `what` names the case.
  void expect_invalidated(CUstream s, const std::string& what) {
    EXPECT_EQ(status(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED) << what;
    EXPECT_EQ(work(s), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) << what;
    CUgraph g = nullptr;
    EXPECT_EQ(end_capture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) << what;
    EXPECT_EQ(g, nullptr) << what;
    EXPECT_EQ(status(s), CU_STREAM_CAPTURE_STATUS_NONE) << what;
  }

  /// The context the rig made current (for other threads).
  CUcontext context() const { return context_.handle(); }

  /// The driver's capture status of `s`.
  CUstreamCaptureStatus status(CUstream s) {
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    EXPECT_EQ(driver::cu.StreamIsCapturing(s, &st), CUDA_SUCCESS);
    return st;
  }

 private:
  static constexpr std::size_t scratch_bytes = 256;

  void end_open_capture(CUstream s) {
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    if (driver::cu.StreamIsCapturing(s, &st) != CUDA_SUCCESS || st == CU_STREAM_CAPTURE_STATUS_NONE) return;
    CUgraph g = nullptr;
    driver::cu.StreamEndCapture(s, &g);
    if (g != nullptr) driver::cu.GraphDestroy(g);
  }

  Context context_;
  CUdeviceptr scratch_ = 0;
  std::vector<CUstream> streams_;
  std::vector<CUevent> events_;
  std::vector<CUgraph> graphs_;
  std::vector<CUdeviceptr> memory_;
  std::vector<void*> host_memory_;
};

/// Runs `fn` on a new thread, with the rig's context current there too (set through the
/// raw driver: a retain would be an unsafe call there), and waits for it.
template <class F>
void on_another_thread(DriverRig& rig, F&& fn) {
  std::thread t([&] {
    EXPECT_EQ(driver::cu.CtxSetCurrent(rig.context()), CUDA_SUCCESS);
    fn();
  });
  t.join();
}

/// Page-aligned host memory that is not page-locked, for cuMemHostRegister.
inline std::unique_ptr<unsigned char, decltype(&std::free)> pageable_pages(std::size_t bytes) {
  return {static_cast<unsigned char*>(std::aligned_alloc(4096, bytes)), &std::free};
}

// ---- the rules ----

/// A stream that is capturing cannot begin a second capture; the first goes on.
inline void BeginCaptureOnACapturingStreamIsIllegal(DriverRig& rig) {
  CUstream s = rig.capturing_stream();
  EXPECT_EQ(driver::cu.StreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_ILLEGAL_STATE);
  EXPECT_EQ(rig.status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CUgraph g = nullptr;
  EXPECT_EQ(rig.end_capture(s, &g), CUDA_SUCCESS);
  EXPECT_NE(g, nullptr);
}

/// Only the stream that began a capture ends it: a forked stream gets UNMATCHED, and the
/// attempt invalidates the whole capture.
inline void EndCaptureOnAForkedStreamIsUnmatched(DriverRig& rig) {
  CUstream fork = rig.stream();
  CUevent forked = rig.event();
  CUstream s = rig.capturing_stream();
  rig.wait_through(fork, forked, s);
  EXPECT_EQ(rig.work(fork), CUDA_SUCCESS);
  CUgraph g = nullptr;
  EXPECT_EQ(driver::cu.StreamEndCapture(fork, &g), CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
  EXPECT_EQ(g, nullptr);
  rig.expect_invalidated(s, "a capture a forked stream tried to end");
}

/// A capture in global or thread-local mode ends only on the thread that began it: the
/// attempt from another thread is refused, and ends the capture without a graph all the
/// same (a second end finds no capture).
inline void EndCaptureFromAnotherThreadIsTheWrongThread(DriverRig& rig) {
  for (CUstreamCaptureMode mode : {CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL}) {
    CUstream s = rig.capturing_stream(mode);
    on_another_thread(rig, [&] {
      CUgraph g = nullptr;
      EXPECT_EQ(driver::cu.StreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD) << "mode " << mode;
      EXPECT_EQ(g, nullptr);
    });
    EXPECT_EQ(rig.status(s), CU_STREAM_CAPTURE_STATUS_NONE) << "mode " << mode;
    EXPECT_EQ(rig.end_capture(s), CUDA_ERROR_ILLEGAL_STATE) << "mode " << mode;
  }
}

/// A capture in relaxed mode may end on any thread.
inline void EndCaptureInRelaxedModeMayComeFromAnotherThread(DriverRig& rig) {
  CUstream s = rig.capturing_stream(CU_STREAM_CAPTURE_MODE_RELAXED);
  on_another_thread(rig, [&] {
    CUgraph g = nullptr;
    EXPECT_EQ(rig.end_capture(s, &g), CUDA_SUCCESS);
    EXPECT_NE(g, nullptr);
  });
  EXPECT_EQ(rig.status(s), CU_STREAM_CAPTURE_STATUS_NONE);
}

/// A fork that is not joined back fails the capture's end, which ends it on every stream.
inline void AnUnjoinedForkFailsTheCapture(DriverRig& rig) {
  CUstream fork = rig.stream();
  CUevent forked = rig.event();
  CUstream s = rig.capturing_stream();
  rig.wait_through(fork, forked, s);
  EXPECT_EQ(rig.work(fork), CUDA_SUCCESS);
  CUgraph g = nullptr;
  EXPECT_EQ(rig.end_capture(s, &g), CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
  EXPECT_EQ(g, nullptr);
  EXPECT_EQ(rig.status(s), CU_STREAM_CAPTURE_STATUS_NONE);
  EXPECT_EQ(rig.status(fork), CU_STREAM_CAPTURE_STATUS_NONE);
}

/// A stream that waits for an event recorded inside a capture joins that capture.
inline void AWaitOnAnEventRecordedInACaptureJoinsIt(DriverRig& rig) {
  CUstream waiting = rig.stream();
  CUevent forked = rig.event(), joined = rig.event();
  CUstream s = rig.capturing_stream();
  EXPECT_EQ(driver::cu.EventRecord(forked, s), CUDA_SUCCESS);
  EXPECT_EQ(rig.status(waiting), CU_STREAM_CAPTURE_STATUS_NONE);
  EXPECT_EQ(driver::cu.StreamWaitEvent(waiting, forked, 0), CUDA_SUCCESS);
  EXPECT_EQ(rig.status(waiting), CU_STREAM_CAPTURE_STATUS_ACTIVE);
  EXPECT_EQ(rig.work(waiting), CUDA_SUCCESS);
  rig.wait_through(s, joined, waiting);
  CUgraph g = nullptr;
  EXPECT_EQ(rig.end_capture(s, &g), CUDA_SUCCESS);
  EXPECT_NE(g, nullptr);
  EXPECT_EQ(rig.status(waiting), CU_STREAM_CAPTURE_STATUS_NONE);
}

/// Synchronizing or querying a capturing stream is unsupported and invalidates the
/// capture; work submitted to it after that is refused, and its end says so.
inline void SynchronizingOrQueryingACapturingStreamInvalidatesTheCapture(DriverRig& rig) {
  for (bool query : {false, true}) {
    const std::string what = query ? "cuStreamQuery" : "cuStreamSynchronize";
    CUstream s = rig.capturing_stream();
    EXPECT_EQ(query ? driver::cu.StreamQuery(s) : driver::cu.StreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
        << what;
    rig.expect_invalidated(s, what);
  }
}

/// Synchronizing the context while one of its streams captures is unsupported and
/// invalidates the capture.
inline void ContextSynchronizeDuringACaptureInvalidatesIt(DriverRig& rig) {
  for (CUstreamCaptureMode mode : {CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL}) {
    const std::string what = "mode " + std::to_string(mode);
    CUstream s = rig.capturing_stream(mode);
    EXPECT_EQ(driver::cu.CtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) << what;
    rig.expect_invalidated(s, what);
  }
}

/// The calls that are unsafe during a capture (memory allocation and release, page-locking
/// host memory): made in global or thread-local mode on the capturing thread, they are
/// unsupported and invalidate the capture.
inline void UnsafeCallsOnTheCapturingThreadInvalidateTheCapture(DriverRig& rig) {
  constexpr std::size_t bytes = 1 << 16;
  CUdeviceptr allocated = rig.memory(256);
  void* pinned = rig.host_memory(256);
  auto registered = pageable_pages(bytes), unregistered = pageable_pages(bytes);
  ASSERT_EQ(driver::cu.MemHostRegister(registered.get(), bytes, 0), CUDA_SUCCESS);
  CUdeviceptr new_device = 0;
  void* new_host = nullptr;
  struct Call {
    const char* name;
    std::function<CUresult()> make;
    std::function<void()> undo;  // should the driver have made the call after all
  };
  const Call calls[] = {
      {"cuMemAlloc", [&] { return driver::cu.MemAlloc(&new_device, 256); }, [&] { driver::cu.MemFree(new_device); }},
      {"cuMemFree", [&] { return driver::cu.MemFree(allocated); }, [&] { rig.forget(allocated); }},
      {"cuMemHostAlloc", [&] { return driver::cu.MemHostAlloc(&new_host, 256, 0); },
       [&] { driver::cu.MemFreeHost(new_host); }},
      {"cuMemFreeHost", [&] { return driver::cu.MemFreeHost(pinned); }, [&] { rig.forget(pinned); }},
      {"cuMemHostRegister", [&] { return driver::cu.MemHostRegister(unregistered.get(), bytes, 0); },
       [&] { driver::cu.MemHostUnregister(unregistered.get()); }},
      {"cuMemHostUnregister", [&] { return driver::cu.MemHostUnregister(registered.get()); },
       [&] { driver::cu.MemHostRegister(registered.get(), bytes, 0); }},
  };
  for (CUstreamCaptureMode mode : {CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL}) {
    for (const Call& call : calls) {
      const std::string what = std::string(call.name) + ", mode " + std::to_string(mode);
      CUstream s = rig.capturing_stream(mode);
      CUresult r = call.make();
      EXPECT_EQ(r, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) << what;
      if (r == CUDA_SUCCESS) call.undo();
      rig.expect_invalidated(s, what);
    }
  }
  EXPECT_EQ(driver::cu.MemHostUnregister(registered.get()), CUDA_SUCCESS) << "the refused unregister left it registered";
}

/// A thread in relaxed mode may make unsafe calls beside its own capture.
inline void RelaxedModeLetsUnsafeCallsThrough(DriverRig& rig) {
  CUstream s = rig.capturing_stream();
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  ASSERT_EQ(driver::cu.ThreadExchangeStreamCaptureMode(&mode), CUDA_SUCCESS);
  CUdeviceptr p = 0;
  EXPECT_EQ(driver::cu.MemAlloc(&p, 256), CUDA_SUCCESS);
  EXPECT_EQ(driver::cu.MemFree(p), CUDA_SUCCESS);
  ASSERT_EQ(driver::cu.ThreadExchangeStreamCaptureMode(&mode), CUDA_SUCCESS);
  EXPECT_EQ(mode, CU_STREAM_CAPTURE_MODE_RELAXED) << "the exchange gives back the mode it replaced";
  EXPECT_EQ(rig.status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
  EXPECT_EQ(rig.end_capture(s), CUDA_SUCCESS);
}

/// A capture in global mode forbids unsafe calls on every thread whose own mode is
/// global; one in thread-local mode forbids them on its own thread only.
inline void AGlobalCaptureRefusesUnsafeCallsOnOtherThreads(DriverRig& rig) {
  for (CUstreamCaptureMode mode : {CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL}) {
    const bool global = mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
    const std::string what = "mode " + std::to_string(mode);
    CUstream s = rig.capturing_stream(mode);
    on_another_thread(rig, [&] {
      CUdeviceptr p = 0;
      CUresult r = driver::cu.MemAlloc(&p, 256);
      EXPECT_EQ(r, global ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS) << what;
      if (r == CUDA_SUCCESS) driver::cu.MemFree(p);
    });
    if (global) rig.expect_invalidated(s, what);
    else EXPECT_EQ(rig.end_capture(s), CUDA_SUCCESS) << what;
  }
}

/// A capturing stream cannot wait for work outside its capture: a wait on an event
/// recorded on a stream that is not capturing is an isolation error that invalidates it.
inline void AWaitOnAnEventRecordedOutsideTheCaptureIsIsolation(DriverRig& rig) {
  CUstream s = rig.stream(), outside = rig.stream();
  CUevent e = rig.event();
  EXPECT_EQ(rig.work(outside), CUDA_SUCCESS);
  EXPECT_EQ(driver::cu.EventRecord(e, outside), CUDA_SUCCESS);
  ASSERT_EQ(driver::cu.StreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  EXPECT_EQ(driver::cu.StreamWaitEvent(s, e, 0), CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
  rig.expect_invalidated(s, "a wait across the capture's boundary");
}

/// A stream capturing into one graph cannot wait on an event recorded in another
/// capture: the two would merge. Both captures are invalidated.
inline void AWaitAcrossTwoCapturesIsAMergeError(DriverRig& rig) {
  CUevent in_a = rig.event();
  CUstream a = rig.stream(), b = rig.stream();
  ASSERT_EQ(driver::cu.StreamBeginCapture(a, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  ASSERT_EQ(driver::cu.StreamBeginCapture(b, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  EXPECT_EQ(rig.work(a), CUDA_SUCCESS);
  EXPECT_EQ(rig.work(b), CUDA_SUCCESS);
  EXPECT_EQ(driver::cu.EventRecord(in_a, a), CUDA_SUCCESS);
  EXPECT_EQ(driver::cu.StreamWaitEvent(b, in_a, 0), CUDA_ERROR_STREAM_CAPTURE_MERGE);
  rig.expect_invalidated(b, "the waiting capture");
  rig.expect_invalidated(a, "the capture the event was recorded in");
}

/// An event last recorded inside a capture that ended answers INVALID_VALUE to a query, a
/// synchronize and a wait; a record outside a capture makes it an ordinary event again.
inline void AnEventOfAnEndedCaptureIsInvalidUntilRecordedAgain(DriverRig& rig) {
  CUstream other = rig.stream();
  CUevent e = rig.event();
  CUstream s = rig.capturing_stream();
  EXPECT_EQ(driver::cu.EventRecord(e, s), CUDA_SUCCESS);
  EXPECT_EQ(rig.end_capture(s), CUDA_SUCCESS);
  EXPECT_EQ(driver::cu.EventQuery(e), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(driver::cu.EventSynchronize(e), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(driver::cu.StreamWaitEvent(other, e, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(driver::cu.EventRecord(e, other), CUDA_SUCCESS);
  EXPECT_EQ(driver::cu.EventSynchronize(e), CUDA_SUCCESS);
  EXPECT_EQ(driver::cu.StreamWaitEvent(s, e, 0), CUDA_SUCCESS);
}

/// A query or a synchronize of an event recorded in a capture that goes on is refused
/// (CAPTURED_EVENT) and invalidates the capture; the event then answers INVALID_VALUE,
/// to a query, a synchronize or a wait, until a record outside a capture.
inline void QueryingOrSynchronizingACapturedEventInvalidatesItsCapture(DriverRig& rig) {
  for (bool query : {true, false}) {
    const std::string what = query ? "a query" : "a synchronize";
    CUstream other = rig.stream();
    CUevent e = rig.event();
    CUstream s = rig.capturing_stream();
    EXPECT_EQ(driver::cu.EventRecord(e, s), CUDA_SUCCESS) << what;
    EXPECT_EQ(query ? driver::cu.EventQuery(e) : driver::cu.EventSynchronize(e), CUDA_ERROR_CAPTURED_EVENT) << what;
    rig.expect_invalidated(s, what + " of an event recorded in the capture");
    EXPECT_EQ(driver::cu.EventQuery(e), CUDA_ERROR_INVALID_VALUE) << what;
    EXPECT_EQ(driver::cu.EventSynchronize(e), CUDA_ERROR_INVALID_VALUE) << what;
    EXPECT_EQ(driver::cu.StreamWaitEvent(other, e, 0), CUDA_ERROR_INVALID_VALUE) << what;
    EXPECT_EQ(driver::cu.EventRecord(e, other), CUDA_SUCCESS) << what;
    EXPECT_EQ(driver::cu.EventSynchronize(e), CUDA_SUCCESS) << what;
  }
}

}  // namespace cudakit::scenarios

/// Every scenario above, for the two files that run them (X(name) per scenario).
#define CUDAKIT_CAPTURE_RULES(X)                                     \
  X(BeginCaptureOnACapturingStreamIsIllegal)                         \
  X(EndCaptureOnAForkedStreamIsUnmatched)                            \
  X(EndCaptureFromAnotherThreadIsTheWrongThread)                     \
  X(EndCaptureInRelaxedModeMayComeFromAnotherThread)                 \
  X(AnUnjoinedForkFailsTheCapture)                                   \
  X(AWaitOnAnEventRecordedInACaptureJoinsIt)                         \
  X(SynchronizingOrQueryingACapturingStreamInvalidatesTheCapture)    \
  X(ContextSynchronizeDuringACaptureInvalidatesIt)                   \
  X(UnsafeCallsOnTheCapturingThreadInvalidateTheCapture)             \
  X(RelaxedModeLetsUnsafeCallsThrough)                               \
  X(AGlobalCaptureRefusesUnsafeCallsOnOtherThreads)                  \
  X(AWaitOnAnEventRecordedOutsideTheCaptureIsIsolation)              \
  X(AWaitAcrossTwoCapturesIsAMergeError)                             \
  X(AnEventOfAnEndedCaptureIsInvalidUntilRecordedAgain)                       \
  X(QueryingOrSynchronizingACapturedEventInvalidatesItsCapture)
