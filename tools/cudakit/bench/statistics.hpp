// The statistics of a benchmark's samples: the median and the spread around it.
//
// Medians, not means: a timing sample is the true cost plus noise that only ever adds
// (a preemption, a cache miss, a page fault), so one bad batch drags a mean but not a
// median. The spread is reported as p10..p90 beside min and max, so a reader can tell a
// steady measurement from a lucky one.
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

}  // namespace cudakit::tool::bench
