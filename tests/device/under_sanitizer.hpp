// Whether this process runs under compute-sanitizer (the device suite's sanitize stage
// sets CUDAKIT_TEST_UNDER_SANITIZER=1), and what the tests do differently there.
#pragma once

#include <cstdlib>
#include <string_view>

#include "cudakit/stream.hpp"

namespace cudakit::testing {

inline bool under_sanitizer() {
  const char* v = std::getenv("CUDAKIT_TEST_UNDER_SANITIZER");
  return v != nullptr && std::string_view(v) == "1";
}

/// memcheck misreads memory that a stream-ordered allocation made shortly before a capture
/// whose graph has a conditional node: the body's kernels are reported out of bounds at
/// the base of the live allocation, and the tool then faults the context. On the H200
/// (compute-sanitizer 2025.3) the same test without the tool, and with the allocations
/// settled by a synchronize, reports nothing. So under the tool, a test settles its
/// allocations before such a capture; without it, it does not (the path users take).
inline void settle_allocations_before_a_loop_capture(StreamRef stream) {
  if (under_sanitizer()) stream.synchronize();
}

}  // namespace cudakit::testing
