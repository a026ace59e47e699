// Whether this process runs under compute-sanitizer (the device suite's sanitize stage
// sets CUDAKIT_TEST_UNDER_SANITIZER=1), and what the tests do differently there.
#pragma once

#include <cstdlib>
#include <string_view>

#include "cudakit/context.hpp"
#include "cudakit/stream.hpp"

namespace cudakit::testing {

inline bool under_sanitizer() {
  const char* v = std::getenv("CUDAKIT_TEST_UNDER_SANITIZER");
  return v != nullptr && std::string_view(v) == "1";
}

/// memcheck can misread memory that a stream-ordered allocation made shortly before a
/// capture whose graph has a conditional node: in a whole-suite run on the H200 it reported
/// the loop body's kernels out of bounds at the base of a live allocation, and then the
/// context faulted (a known limitation of the tool with conditional graphs; a synchronize
/// between the allocation and the capture avoids it). The same tests under memcheck in a
/// run of their own suites reported nothing, with and without the synchronize. So under the
/// tool a test settles its allocations before such a capture, the whole context (every
/// stream's allocations and frees, not only the capturing stream's); without it, it does
/// not (the path users take).
inline void settle_allocations_before_a_loop_capture(StreamRef stream) {
  if (!under_sanitizer()) return;
  stream.synchronize();
  Context::primary(stream.device_ordinal()).synchronize();
}

}  // namespace cudakit::testing
