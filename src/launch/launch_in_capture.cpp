// A kernel launch while captures are in progress (cudakit/detail/launch_in_capture.hpp).
#include "cudakit/detail/launch_in_capture.hpp"

#include <string>
#include <thread>

#include "cudakit/detail/capture_guard.hpp"
#include "cudakit/kernel.hpp"
#include "launch/launch_in_capture.hpp"
#include "stream/stream_state_of.hpp"

namespace cudakit::detail {

CapturedKernelHook keep_kernel_for_capture = nullptr;

void note_launch_in_capture(StreamRef stream, const Function& function) {
  StreamState* s = stream_state_of(stream);
  CaptureState* c = s->marks.capture();
  if (c == nullptr) return;
  if (s->marks.capture_owner() != std::this_thread::get_id())
    refuse_submission_from_other_thread(s, ("a launch of kernel '" + function.name() + "'").c_str());
  keep_kernel_for_capture(c, function);
}

}  // namespace cudakit::detail
