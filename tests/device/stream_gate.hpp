// A gate that holds a stream until the test opens it. Ordering tests hold stream A with
// a gate, submit work behind it and work on stream B that must wait for it, and check
// that A is still held while the gate is closed: that precondition holds by construction,
// on a machine of any speed (a timed spin ends on its own, and under compute-sanitizer
// it ended before the host had submitted the work behind it).
//
// The gate owns one int of mapped page-locked memory, the flag (stream_gate_flag.h). Its
// constructor queues a one-thread kernel on the held stream that waits until the host
// writes gate_open into the flag. The kernel stops waiting after a bound (about 15 s of
// the device clock unless the test names another) and writes gate_timed_out: a test that waits on the held
// stream before it opens the gate then fails instead of hanging the suite.
//
//   StreamGate gate(a, device(), launch_wait);    // a is held
//   ... submit work on a and on b ...
//   expect_held(a, "the gate holds a");
//   gate.open();                                   // before anything waits on a
//   EXPECT_EQ(download(b, out), values);
//
// Under compute-sanitizer (the device suite's sanitize stage sets
// CUDAKIT_TEST_UNDER_SANITIZER=1) gates do not hold: the tools run kernels one at a time
// on the device, and initcheck makes the host wait for them at each launch, so a kernel
// queued on stream B, or the host itself, would wait behind a closed gate until its bound.
// There each gate is open before its kernel is queued: the tests submit and check the same
// work, whose memory accesses the tools check, and the checks that only concurrency can
// show (expect_held, the race arms) are left out.
//
// `launch_wait` queues the kernel: the program's own through the runtime
// (runtime_helpers.cuh), or the embedded test image's `wait_for_gate` (test_kernels.cu).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <exception>
#include <functional>
#include <string>

#include "cudakit/cudakit.hpp"
#include "stream_gate_flag.h"
#include "under_sanitizer.hpp"

namespace cudakit::testing {

class StreamGate {
 public:
  /// Queues the waiting kernel on `s`: `flag` is the flag's device address, `max_cycles`
  /// the bound in clock cycles.
  using LaunchWait = std::function<void(StreamRef s, int* flag, long long max_cycles)>;

  /// Whether gates hold streams in this process: not under compute-sanitizer (see above).
  static bool holds_streams() { return !under_sanitizer(); }

  /// How long the kernel waits at most by default: far longer than any test needs between
  /// holding and opening, under a sanitizer too.
  static constexpr double default_bound_ms = 15'000;

  /// Holds `held`, a stream of `device`, with the kernel `launch_wait` queues on it, for
  /// at most about `bound_ms` of the device clock.
  StreamGate(StreamRef held, const Device& device, const LaunchWait& launch_wait, double bound_ms = default_bound_ms)
      : held_(held), flag_(1, zeroed, PinnedOptions{.mapped = true}) {
    static_assert(gate_closed == 0, "zeroed memory is a closed gate");
    if (!holds_streams()) open();
    const long long khz = device.attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
    launch_wait(held_, reinterpret_cast<int*>(flag_.mapped_pointer()), static_cast<long long>(khz * bound_ms));
  }
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;

  /// Lets the held stream go on (the work queued behind the gate runs). Opening twice
  /// does nothing.
  void open() noexcept {
    if (opened_) return;
    opened_ = true;
    // The exchange tells whether the kernel gave up before the gate opened.
    const int before = std::atomic_ref<int>(flag_[0]).exchange(gate_open, std::memory_order_release);
    timed_out_ = timed_out_ || before == gate_timed_out;
  }

  /// Opens the gate if the test did not, then waits for the held stream, so that the flag
  /// is never freed while the kernel still reads it. A kernel that timed out fails the test.
  ~StreamGate() {
    open();
    try {
      held_.synchronize();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "the held stream failed: " << e.what();  // an error that ends its context's kernels
      return;
    }
    const int last = std::atomic_ref<int>(flag_[0]).load(std::memory_order_acquire);
    if (timed_out_ || last == gate_timed_out)
      ADD_FAILURE() << "the held stream timed out: the test waited on it before opening the gate"
                       " (under compute-sanitizer, set CUDAKIT_TEST_UNDER_SANITIZER=1)";
  }

 private:
  StreamRef held_;
  PinnedBuffer<int> flag_;
  bool opened_ = false;
  bool timed_out_ = false;
};

/// Expects `s` not to have finished its work: it is held by a gate, or waits for a stream
/// that is. Checks nothing where gates do not hold (StreamGate::holds_streams).
inline void expect_held(StreamRef s, const char* why) {
  if (StreamGate::holds_streams()) EXPECT_FALSE(s.query()) << why;
}

/// Skips a test that needs a gate to hold (a race it must show, the gate's own tests),
/// where gates do not hold.
#define CUDAKIT_SKIP_UNLESS_GATES_HOLD()                                                       \
  if (!::cudakit::testing::StreamGate::holds_streams())                                        \
  GTEST_SKIP() << "compute-sanitizer runs kernels one at a time: gates do not hold streams " \
                  "under it (stream_gate.hpp)"

}  // namespace cudakit::testing
