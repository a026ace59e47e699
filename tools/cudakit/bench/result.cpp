#include "bench/result.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

namespace cudakit::tool::bench {

const char* outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::reported: return "reported";
    case Outcome::met: return "met";
    case Outcome::within_noise: return "within noise";
    case Outcome::missed: return "missed";
    case Outcome::error: return "error";
  }
  return "?";
}

Outcome classify(const Interval& interval, double target_ratio, Better better) {
  if (!(target_ratio > 0)) return Outcome::reported;
  if (!std::isfinite(interval.low) || !std::isfinite(interval.high) || !(interval.low > 0)) return Outcome::missed;
  // A ceiling is met when even the interval's top is under it, missed when even its
  // bottom is over it; a floor the other way round.
  if (better == Better::lower)
    return interval.high <= target_ratio ? Outcome::met : interval.low > target_ratio ? Outcome::missed : Outcome::within_noise;
  return interval.low >= target_ratio ? Outcome::met : interval.high < target_ratio ? Outcome::missed : Outcome::within_noise;
}

std::vector<double> round_ratios(const std::vector<double>& cudakit, const std::vector<double>& raw) {
  std::vector<double> ratios;
  std::size_t rounds = std::min(cudakit.size(), raw.size());
  for (std::size_t i = 0; i < rounds; ++i)
    if (raw[i] > 0 && cudakit[i] > 0 && std::isfinite(raw[i]) && std::isfinite(cudakit[i]))
      ratios.push_back(cudakit[i] / raw[i]);
  return ratios;
}

namespace {

// The 95% interval of the median of `per_round` (the per-round ratios); without paired
// rounds the ratio of the medians is all there is, an interval of one point.
Interval ratio_interval_of(std::vector<double> per_round, double ratio) {
  Interval i = median_interval_95(std::move(per_round));
  if (!std::isfinite(i.low) && std::isfinite(ratio) && ratio > 0) i = {ratio, ratio, std::numeric_limits<double>::quiet_NaN()};
  return i;
}

double ratio_of_medians(const Spread& cudakit, const Spread& raw) {
  return raw.median > 0 && std::isfinite(cudakit.median) ? cudakit.median / raw.median
                                                          : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

Verdict judge(const Result& result) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Verdict v{summarize(result.cudakit),
            summarize(result.raw),
            nan,
            {nan, nan, nan, nan, nan},
            {nan, nan, nan},
            Outcome::reported,
            false,
            false,
            false,
            false,
            false,
            {nan, nan, nan},
            Outcome::reported};
  v.ratio = ratio_of_medians(v.cudakit, v.raw);
  std::vector<double> per_round = round_ratios(result.cudakit, result.raw);
  v.round_ratio = summarize(per_round);
  v.ratio_interval = ratio_interval_of(std::move(per_round), v.ratio);

  v.judged = result.target_ratio > 0 && result.error.empty();
  v.outcome = !result.error.empty() ? Outcome::error : classify(v.ratio_interval, result.target_ratio, result.better);
  if (v.outcome == Outcome::missed && !result.repeat_cudakit.empty()) {
    v.repeated = true;
    const double again = ratio_of_medians(summarize(result.repeat_cudakit), summarize(result.repeat_raw));
    v.repeat_interval = ratio_interval_of(round_ratios(result.repeat_cudakit, result.repeat_raw), again);
    v.repeat_outcome = classify(v.repeat_interval, result.target_ratio, result.better);
    if (v.repeat_outcome != Outcome::missed) v.outcome = Outcome::within_noise;  // the miss did not repeat
  }
  v.met = v.outcome == Outcome::met;
  v.within_noise = v.outcome == Outcome::within_noise;
  v.missed = v.outcome == Outcome::missed || v.outcome == Outcome::error;
  return v;
}

std::string target_note(double ratio, double target_ratio, Better better) {
  if (!(target_ratio > 0)) return "";
  if (!(ratio > 0) || !std::isfinite(ratio)) return "MISS: no ratio";
  const bool lower = better == Better::lower;
  if (lower ? ratio <= target_ratio : ratio >= target_ratio) return "ok";
  // Relative to the target, so that 1.053 against 1.05 reads as the 0.3% it is.
  const double percent = std::abs(ratio / target_ratio - 1) * 100;
  char amount[32];
  if (percent < 0.05) std::snprintf(amount, sizeof amount, "less than 0.1%%");
  else std::snprintf(amount, sizeof amount, "%.1f%%", percent);
  char text[96];
  std::snprintf(text, sizeof text, "MISS: %s %s the target (ratio at %s %.3f)", amount, lower ? "over" : "under",
                lower ? "most" : "least", target_ratio);
  return text;
}

namespace {
std::vector<double> scaled(const std::vector<double>& seconds, double factor) {
  std::vector<double> out;
  out.reserve(seconds.size());
  for (double s : seconds) out.push_back(s * factor);
  return out;
}

std::vector<double> throughput(const std::vector<double>& seconds, double bytes_per_op) {
  std::vector<double> out;
  out.reserve(seconds.size());
  for (double s : seconds) out.push_back(s > 0 ? bytes_per_op / s / 1e9 : 0.0);
  return out;
}
}  // namespace

Result cost_result(std::string name, std::string group, const PairedSamples& seconds_per_op, double target_ratio) {
  Result r;
  r.name = std::move(name);
  r.group = std::move(group);
  r.unit = "us";
  r.better = Better::lower;
  r.target_ratio = target_ratio;
  r.cudakit = scaled(seconds_per_op.cudakit, 1e6);
  r.raw = scaled(seconds_per_op.raw, 1e6);
  return r;
}

Result bandwidth_result(std::string name, std::string group, const PairedSamples& seconds_per_op, double bytes_per_op,
                        double target_ratio, std::string series, double size_bytes) {
  Result r;
  r.name = std::move(name);
  r.group = std::move(group);
  r.unit = "GB/s";
  r.better = Better::higher;
  r.target_ratio = target_ratio;
  r.series = std::move(series);
  r.size_bytes = size_bytes;
  r.cudakit = throughput(seconds_per_op.cudakit, bytes_per_op);
  r.raw = throughput(seconds_per_op.raw, bytes_per_op);
  return r;
}

Result error_result(std::string name, std::string group, std::string message) {
  Result r;
  r.name = std::move(name);
  r.group = std::move(group);
  r.error = std::move(message);
  return r;
}

}  // namespace cudakit::tool::bench
