#include "bench/repeat.hpp"

#include <algorithm>

namespace cudakit::tool::bench {

namespace {

bool missed(const Result& r) { return r.error.empty() && judge(r).outcome == Outcome::missed; }

const Result* same_figure(const std::vector<Result>& results, const Result& wanted) {
  auto found = std::find_if(results.begin(), results.end(), [&](const Result& r) {
    return r.name == wanted.name && r.unit == wanted.unit && r.error.empty();
  });
  return found != results.end() ? &*found : nullptr;
}

}  // namespace

std::vector<Measured> repeat_missed(std::vector<Measured>& measured,
                                    const std::function<std::vector<Result>(std::size_t)>& run) {
  std::vector<Measured> again;
  for (Measured& first : measured) {
    if (std::none_of(first.results.begin(), first.results.end(), missed)) continue;
    Measured second{first.benchmark, run(first.benchmark)};
    for (Result& r : first.results) {
      if (!missed(r)) continue;
      if (const Result* repeat = same_figure(second.results, r)) {
        r.repeat_cudakit = repeat->cudakit;
        r.repeat_raw = repeat->raw;
      }
    }
    again.push_back(std::move(second));
  }
  return again;
}

}  // namespace cudakit::tool::bench
