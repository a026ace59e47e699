// Tests that compile with the real NVRTC skip, saying why, where the toolkit's NVRTC
// cannot be opened.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "cudakit/program.hpp"

namespace cudakit::testing {

/// Whether NVRTC opens; if not, `why` says what was tried.
inline bool nvrtc_present(std::string* why) {
  try {
    nvrtc_version();
    return true;
  } catch (const CompilerUnavailable& e) {
    *why = e.what();
    return false;
  }
}

}  // namespace cudakit::testing

#define SKIP_WITHOUT_NVRTC()                                                  \
  do {                                                                        \
    std::string why_nvrtc_is_missing;                                         \
    if (!cudakit::testing::nvrtc_present(&why_nvrtc_is_missing))              \
      GTEST_SKIP() << why_nvrtc_is_missing;                                   \
  } while (0)
