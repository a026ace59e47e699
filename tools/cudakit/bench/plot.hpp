// The picture of a `cudakit bench` run (--plot FILE), a standalone SVG:
// - a bar per result: the cudakit/raw ratio of medians, drawn from parity (1.0), with a
//   whisker over the per-round ratios' p10..p90 and a tick at the result's target;
// - when the run has a size sweep in the group "bandwidth" (results with a size), a
//   line chart of GB/s against size, cudakit solid and raw dashed, one colour a series.
#pragma once

#include <string>
#include <vector>

#include "bench/result.hpp"

namespace cudakit::tool::bench {

/// The SVG document; `heading` goes on top (GPU, driver, date).
std::string plot_svg(const std::vector<Result>& results, const std::string& heading);

/// A "nice" tick step (1, 2 or 5 times a power of ten) giving at most `max_ticks`
/// ticks over `range`.
double nice_tick_step(double range, int max_ticks);

/// "4 KiB", "1 MiB", "512 B".
std::string size_label(double bytes);

}  // namespace cudakit::tool::bench
