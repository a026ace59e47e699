// A missed figure measured again (result.hpp says why): after every chosen benchmark ran,
// each benchmark with a missed figure runs once more, and each of its missed figures takes
// the second run's samples of the same name as its repeat. judge() then lets the miss
// stand only when the repeat misses too.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "bench/result.hpp"

namespace cudakit::tool::bench {

/// What one benchmark produced: its index among the chosen ones, and its results.
struct Measured {
  std::size_t benchmark = 0;
  std::vector<Result> results;
};

/// Runs again (through `run`, given a benchmark's index) each benchmark whose results have
/// a missed figure (not an error: a failure is not noise), once, in order, and gives each
/// missed figure the second run's samples of the same name and unit. A figure the second
/// run does not produce, or produces as an error, keeps no repeat and stays missed. Returns
/// what each second run produced, for the table.
std::vector<Measured> repeat_missed(std::vector<Measured>& measured,
                                    const std::function<std::vector<Result>(std::size_t)>& run);

}  // namespace cudakit::tool::bench
