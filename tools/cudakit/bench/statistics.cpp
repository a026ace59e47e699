#include "bench/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

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

namespace {
// P(X = i) for X ~ Binomial(n, 1/2), in log space so that large n do not underflow.
double binomial_half_pmf(std::size_t n, std::size_t i) {
  const double nd = static_cast<double>(n), id = static_cast<double>(i);
  return std::exp(std::lgamma(nd + 1) - std::lgamma(id + 1) - std::lgamma(nd - id + 1) + nd * std::log(0.5));
}
}  // namespace

Interval median_interval_95(std::vector<double> samples) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (samples.empty()) return {nan, nan, nan};
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  // The 1-based rank k of the lower end: the largest k with P(X <= k - 1) <= 0.025.
  std::size_t k = 1;
  double below_k = binomial_half_pmf(n, 0);  // P(X <= k - 1)
  while (k < n / 2 && below_k + binomial_half_pmf(n, k) <= 0.025) below_k += binomial_half_pmf(n, k++);
  return {samples[k - 1], samples[n - k], 1 - 2 * below_k};
}

double mann_whitney_p(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.empty() || b.empty()) return 1;
  // Rank the pooled samples, ties sharing the mean of their ranks.
  std::vector<std::pair<double, bool>> pooled;  // value, from `a`
  for (double v : a) pooled.push_back({v, true});
  for (double v : b) pooled.push_back({v, false});
  std::sort(pooled.begin(), pooled.end(), [](auto& x, auto& y) { return x.first < y.first; });
  const double n1 = static_cast<double>(a.size()), n2 = static_cast<double>(b.size()), n = n1 + n2;
  double rank_sum_a = 0, tie_term = 0;
  for (std::size_t i = 0; i < pooled.size();) {
    std::size_t j = i;
    while (j < pooled.size() && pooled[j].first == pooled[i].first) ++j;
    const double tied = static_cast<double>(j - i), mean_rank = (static_cast<double>(i + j) + 1) / 2;
    for (std::size_t m = i; m < j; ++m)
      if (pooled[m].second) rank_sum_a += mean_rank;
    tie_term += tied * tied * tied - tied;
    i = j;
  }
  const double u = rank_sum_a - n1 * (n1 + 1) / 2;
  const double variance = n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1)));
  if (!(variance > 0)) return 1;
  // Continuity correction: U moves in steps of one half at most.
  const double z = std::max(0.0, std::abs(u - n1 * n2 / 2) - 0.5) / std::sqrt(variance);
  return std::erfc(z / std::sqrt(2.0));
}

}  // namespace cudakit::tool::bench
