#include "bench/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace cudakit::tool::bench {

double Spread::relative_half_width() const {
  if (!(median > 0)) return std::numeric_limits<double>::quiet_NaN();
  return (p90 - p10) / 2 / median;
}

double quantile_of_sorted(std::span<const double> sorted, double q) {
  if (sorted.empty()) return std::numeric_limits<double>::quiet_NaN();
  q = std::clamp(q, 0.0, 1.0);
  double rank = q * static_cast<double>(sorted.size() - 1);
  auto below = static_cast<std::size_t>(std::floor(rank));
  std::size_t above = std::min(below + 1, sorted.size() - 1);
  double fraction = rank - static_cast<double>(below);
  return sorted[below] + (sorted[above] - sorted[below]) * fraction;
}

Spread summarize(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (samples.empty()) return {nan, nan, nan, nan, nan};
  return {quantile_of_sorted(samples, 0.5), quantile_of_sorted(samples, 0.1), quantile_of_sorted(samples, 0.9),
          samples.front(), samples.back()};
}

}  // namespace cudakit::tool::bench
