// What a benchmark yields: one Result per measured figure, each holding the samples of
// the cudakit side and of the raw-driver side, taken interleaved in one process.
//
// A Result's figure is the ratio of the two medians, cudakit over raw, held against a
// target: for a cost (µs per operation) lower is better and the target is a ceiling
// (1.05: cudakit may cost at most 5% more); for a throughput (GB/s) higher is better and
// the target is a floor (0.98: cudakit keeps at least 98% of the raw bandwidth).
//
// The verdict comes from the 95% interval of the median per-round ratio (each cudakit
// round over the raw round beside it; statistics.hpp): "missed" only when the whole
// interval is on the wrong side of the target, "within noise" when the target lies
// inside it, "met" otherwise. A run cannot tell a ratio inside its own noise from the
// target, so only a miss fails the run.
//
// A run's rounds share its conditions (clocks, the host's other work, where memory
// landed), which its interval cannot see. So a miss is measured again, by the benchmark
// run once more after all the others (repeat.hpp), and it stands only when the second
// measurement's interval is also wholly past the target; otherwise the two measurements
// disagree, and the figure is within noise.
#pragma once

#include <string>
#include <vector>

#include "bench/statistics.hpp"
#include "bench/timing.hpp"

namespace cudakit::tool::bench {

/// The direction of a figure: costs go down, throughputs go up.
enum class Better { lower, higher };

struct Result {
  std::string name;   // "event record"
  std::string group;  // "events"; the group "bandwidth" with a size sweep also gets a line chart
  std::string unit;   // "us" (per operation), "GB/s"
  Better better = Better::lower;
  double target_ratio = 0;  // cudakit/raw bound; 0: reported, not judged
  // Size sweeps (a line chart of the figure against size): the curve this point
  // belongs to ("pinned H2D") and its size. Empty and 0 for a single figure.
  std::string series;
  double size_bytes = 0;
  // One sample per timed batch, in `unit`; the i-th of each side came from round i.
  std::vector<double> cudakit;
  std::vector<double> raw;
  // Not empty when the benchmark failed; such a result counts as a missed target.
  std::string error;
  // The second measurement of a missed figure, paired by round as above; empty when it
  // was not measured again.
  std::vector<double> repeat_cudakit;
  std::vector<double> repeat_raw;
};

/// What a result's interval says about its target.
enum class Outcome {
  reported,      // no target
  met,           // the whole interval on the right side of the target
  within_noise,  // the target inside the interval: this run cannot tell
  missed,        // the whole interval on the wrong side (or no ratio at all)
  error,         // the benchmark failed
};

/// "reported", "met", "within noise", "missed", "error".
const char* outcome_name(Outcome outcome);

/// A Result's numbers, computed from its samples.
struct Verdict {
  Spread cudakit;
  Spread raw;
  double ratio;        // cudakit median / raw median; NaN when it cannot be formed
  Spread round_ratio;  // per-round cudakit/raw: how steady the ratio was across rounds
  Interval ratio_interval;  // 95% interval of the median per-round ratio
  Outcome outcome;
  bool judged;        // has a target and no error
  bool met;           // outcome met
  bool within_noise;  // outcome within_noise
  bool missed;        // outcome missed or error: exit 1
  // The second measurement's interval and outcome alone (reported when the first missed
  // and it was measured again: `repeated`); the outcome above is both measurements'.
  bool repeated;
  Interval repeat_interval;
  Outcome repeat_outcome;
};

/// The outcome of a ratio interval [low, high] against a target (`better` says on
/// which side of it the figure should be).
Outcome classify(const Interval& interval, double target_ratio, Better better);

/// The verdict on a result: its interval against its target, and a miss against the
/// second measurement where there is one (missed only when both miss).
Verdict judge(const Result& result);

/// The per-round ratios cudakit[i] / raw[i] of the rounds where both are positive and
/// finite.
std::vector<double> round_ratios(const std::vector<double>& cudakit, const std::vector<double>& raw);

/// A ratio against its target in words: "" without a target (`target_ratio` <= 0), "ok"
/// when met, otherwise how far it missed, relative to the target, e.g. "MISS: 0.3% over
/// the target (ratio at most 1.050)" or "MISS: 1.2% under the target (ratio at least
/// 0.980)"; "MISS: no ratio" when `ratio` is not a positive finite number.
std::string target_note(double ratio, double target_ratio, Better better);

/// A cost result in microseconds per operation (lower is better), from seconds per
/// operation as time_host and time_device give them.
Result cost_result(std::string name, std::string group, const PairedSamples& seconds_per_op, double target_ratio);

/// A throughput result in GB/s (10^9 bytes per second, higher is better): each
/// operation moved `bytes_per_op` bytes. `series` and `size_bytes` place it on a curve.
Result bandwidth_result(std::string name, std::string group, const PairedSamples& seconds_per_op, double bytes_per_op,
                        double target_ratio, std::string series = {}, double size_bytes = 0);

/// A result for a benchmark that threw: it carries the message and misses its target.
Result error_result(std::string name, std::string group, std::string message);

}  // namespace cudakit::tool::bench
