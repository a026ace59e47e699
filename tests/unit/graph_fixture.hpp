// Shared helpers of the capture and graph unit tests (fake driver).
#pragma once

#include <cstring>

#include "cudakit/capture.hpp"
#include "cudakit/detail/capture_counts.hpp"
#include "cudakit/device_buffer.hpp"
#include "cudakit/graph.hpp"
#include "cudakit/graph_exec.hpp"
#include "cudakit/kernel_args.hpp"
#include "fake_fixture.hpp"

namespace cudakit::testing {

class GraphTestBase : public FakeDriverTest {
 protected:
  Device dev() { return Device::get(0); }

  // Work that writes `value` into every element of `b` on `s`, the way a fill or a kernel
  // with a float* parameter does: declare the use, then submit.
  static void fill(DeviceSpan<float> b, StreamRef s, float value) {
    b.use(s, Access::write);
    unsigned bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    ASSERT_EQ(driver::cu.MemsetD32Async(b.device_pointer(), bits, b.size(), s.handle()), CUDA_SUCCESS);
  }
  // Work that copies `from` into `to` on `s`.
  static void copy(DeviceSpan<float> to, DeviceSpan<const float> from, StreamRef s) {
    from.use(s, Access::read);
    to.use(s, Access::write);
    ASSERT_EQ(driver::cu.MemcpyDtoDAsync(to.device_pointer(), from.device_pointer(), from.size_bytes(), s.handle()),
              CUDA_SUCCESS);
  }
  // The fake's device memory is host memory: read it directly (after the work ran).
  static float at(const DeviceBuffer<float>& b, std::size_t i) { return reinterpret_cast<const float*>(b.device_pointer())[i]; }

  int waits() { return fake().calls(driver::EntryId::StreamWaitEvent); }
  int records() { return fake().calls(driver::EntryId::EventRecord); }

  // No capture state is left anywhere: the count, this thread's mode counters, the
  // stream's state, and the driver's view of the stream.
  static void expect_no_capture_left(StreamRef s) {
    EXPECT_EQ(detail::active_captures.load(), 0);
    EXPECT_EQ(detail::strict_captures_on_this_thread.load(), 0);
    EXPECT_EQ(detail::global_mode_captures.load(), 0);
    ASSERT_NE(s.state(), nullptr);
    EXPECT_EQ(s.state()->marks.capture(), nullptr);
    EXPECT_FALSE(is_capturing(s));
  }
};

}  // namespace cudakit::testing
