// The capture counts (cudakit/detail/capture_counts.hpp).
#include "cudakit/detail/capture_counts.hpp"

namespace cudakit::detail {

std::atomic<int> active_captures{0};
thread_local constinit std::atomic<int> strict_captures_on_this_thread{0};
std::atomic<int> global_mode_captures{0};

}  // namespace cudakit::detail
