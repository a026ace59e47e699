// Seeds of the randomized model-based tests. CI runs a fixed set, so a
// failure reproduces; CUDAKIT_MODEL_SEEDS=N adds N more (seeds 1000 to 1000+N-1) for a
// longer sweep, e.g.
//   CUDAKIT_MODEL_SEEDS=2000 build/tests/cudakit_unit_tests --gtest_filter='*ModelTest*'
// A failing seed shows in the test's name (FixedSeeds/...Test.Name/<index>) and in
// GetParam() in its messages.
#pragma once

#include <cstdlib>
#include <vector>

namespace cudakit::testing {

inline std::vector<unsigned> model_seeds() {
  std::vector<unsigned> seeds{1u, 2u, 3u, 42u, 1234u, 99991u};
  if (const char* v = std::getenv("CUDAKIT_MODEL_SEEDS")) {
    long more = std::strtol(v, nullptr, 10);
    for (long i = 0; i < more; ++i) seeds.push_back(1000u + static_cast<unsigned>(i));
  }
  return seeds;
}

}  // namespace cudakit::testing
