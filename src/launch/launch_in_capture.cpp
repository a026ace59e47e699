// A kernel launch while captures are in progress (cudakit/detail/launch_in_capture.hpp).
#include "cudakit/detail/launch_in_capture.hpp"

#include <string>
#include <thread>

#include "cudakit/detail/capture_guard.hpp"
#include "cudakit/kernel.hpp"
#include "launch/launch_in_capture.hpp"
#include "stream/capture_state.hpp"
#include "stream/stream_state_of.hpp"

namespace cudakit::detail {

CapturedKernelHook keep_kernel_for_capture = nullptr;

void note_launch_in_capture(StreamRef stream, const Function& function) {
  StreamState* s = stream_state_of(stream);
  CaptureState* c = capture_owned_here(s, [&] { return "a launch of kernel '" + function.name() + "'"; });
  if (c != nullptr) keep_kernel_for_capture(c, function);
}

}  // namespace cudakit::detail
