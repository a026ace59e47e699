// The stream gate the ordering tests hold streams with (stream_gate.hpp), on a real GPU:
// the held stream runs nothing until the gate opens, however long the host takes, and a
// gate left closed past its bound fails the test instead of hanging it.
#include <gtest/gtest-spi.h>

#include <chrono>
#include <thread>

#include "gpu_fixture.hpp"
#include "stream_gate.hpp"

#ifdef CUDAKIT_HAVE_TEST_KERNELS
#include "test_kernels.hpp"
#endif

namespace cudakit {
namespace {

#ifdef CUDAKIT_HAVE_TEST_KERNELS

using namespace std::chrono_literals;
using testing::StreamGate;

class StreamGateTest : public testing::GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    CUDAKIT_SKIP_UNLESS_GATES_HOLD();
    module_ = Module::load(device(), cudakit_kernels::test_fatbin());
    wait_for_gate_ = module_.kernel<void(int*, long long)>("wait_for_gate");
  }

  // Holds `s` with the embedded image's kernel, for at most about `bound_ms`.
  StreamGate hold(StreamRef s, double bound_ms = StreamGate::default_bound_ms) {
    auto launch_wait = [this](StreamRef on, int* flag, long long max_cycles) {
      launch(on, wait_for_gate_, LaunchConfig{1, 1}, flag, max_cycles);
    };
    return StreamGate(s, device(), launch_wait, bound_ms);
  }

  Module module_;
  Kernel<void(int*, long long)> wait_for_gate_;
};

TEST_F(StreamGateTest, TheHeldStreamRunsNothingUntilTheGateOpens) {
  Stream s(device());
  Event behind(device());
  StreamGate gate = hold(s);
  behind.record(s);
  std::this_thread::sleep_for(200ms);  // a slow host: the gate does not end on its own
  EXPECT_FALSE(s.query()) << "the gate holds the stream";
  EXPECT_FALSE(behind.query()) << "the event queued behind the gate has not run";
  gate.open();
  behind.synchronize();
  s.synchronize();
  EXPECT_TRUE(s.query());
}

TEST_F(StreamGateTest, AGateLeftClosedPastItsBoundFailsTheTestInsteadOfHanging) {
  Stream s(device());
  EXPECT_NONFATAL_FAILURE(
      {
        StreamGate gate = hold(s, 100);  // closed for longer than its 100 ms
        s.synchronize();                 // the mistake: waits on the held stream before opening
      },
      "the held stream timed out: the test waited on it before opening the gate");
  EXPECT_TRUE(s.query()) << "the stream went on after the bound";
}

#endif  // CUDAKIT_HAVE_TEST_KERNELS

}  // namespace
}  // namespace cudakit
