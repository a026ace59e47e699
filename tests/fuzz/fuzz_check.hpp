// What every fuzz target checks beyond "no crash": invariants of a parser's result. A
// broken one throws FuzzInvariantBroken, which the fuzz target lets escape (libFuzzer
// reports the uncaught exception as a crash and keeps the input) and the unit test that
// replays the corpus reports as a failure.
#pragma once

#include <stdexcept>
#include <string>

namespace cudakit::fuzz {

struct FuzzInvariantBroken : std::logic_error {
  using std::logic_error::logic_error;
};

inline void fuzz_check(bool holds, const std::string& what) {
  if (!holds) throw FuzzInvariantBroken(what);
}

}  // namespace cudakit::fuzz
