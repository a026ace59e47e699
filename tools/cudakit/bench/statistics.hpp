// The statistics of a benchmark's samples: the median and the spread around it.
//
// Medians, not means: a timing sample is the true cost plus noise that only ever adds
// (a preemption, a cache miss, a page fault), so one bad batch drags a mean but not a
// median. The spread is reported as p10..p90 beside min and max, so a reader can tell a
// steady measurement from a lucky one.
//
// A verdict rests on an interval, not on one number: the 95% interval of the median of
// the per-round ratios is distribution-free (the order statistics whose ranks a binomial
// distribution gives, as in a sign test), so it needs no assumption about the noise's
// shape and, like the median, ignores a few wild rounds. Two runs are told apart with
// the Mann-Whitney U test on their per-round ratios, for the same reasons.
#pragma once

#include <span>
#include <vector>

namespace cudakit::tool::bench {

/// The centre and spread of a set of samples. All NaN when there are none.
struct Spread {
  double median;
  double p10;
  double p90;
  double min;
  double max;
  /// Half the p10..p90 range relative to the median: 0.02 means "about ±2%".
  double relative_half_width() const;
};

/// The q-quantile (0 <= q <= 1) of sorted samples, interpolating linearly between the
/// two nearest ranks (so the median of an even count is the mean of the middle two).
double quantile_of_sorted(std::span<const double> sorted, double q);

/// Median, p10, p90, min and max of `samples` (any order).
Spread summarize(std::vector<double> samples);

/// An interval that holds the true median with probability `confidence` or more.
struct Interval {
  double low;
  double high;
  /// The interval's actual coverage (order statistics give steps, not exactly 0.95);
  /// below 0.95 when there are fewer than 6 samples, where even [min, max] covers less.
  double confidence;
};

/// The distribution-free 95% interval for the median of `samples` (any order): the
/// k-th smallest and k-th largest sample, with k the largest rank for which a
/// Binomial(n, 1/2) falls below k with probability at most 2.5%. [min, max] when n < 6;
/// all NaN without samples.
Interval median_interval_95(std::vector<double> samples);

/// The Mann-Whitney U test of two independent sets of samples (any order): the
/// two-sided p-value that they come from one distribution, from the normal
/// approximation with the correction for ties. 1 when either set is empty or every
/// sample is equal.
double mann_whitney_p(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace cudakit::tool::bench
