#include "bench/result.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

namespace cudakit::tool::bench {

Verdict judge(const Result& result) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Verdict v{summarize(result.cudakit), summarize(result.raw), nan, {nan, nan, nan, nan, nan}, false, false, false};
  if (v.raw.median > 0 && std::isfinite(v.cudakit.median)) v.ratio = v.cudakit.median / v.raw.median;

  std::vector<double> per_round;
  std::size_t rounds = std::min(result.cudakit.size(), result.raw.size());
  for (std::size_t i = 0; i < rounds; ++i)
    if (result.raw[i] > 0) per_round.push_back(result.cudakit[i] / result.raw[i]);
  v.round_ratio = summarize(std::move(per_round));

  v.judged = result.target_ratio > 0 && result.error.empty();
  if (v.judged && std::isfinite(v.ratio))
    v.met = result.better == Better::lower ? v.ratio <= result.target_ratio : v.ratio >= result.target_ratio;
  v.missed = !result.error.empty() || (v.judged && !v.met);
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
