#include "bench/report.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <ctime>

namespace cudakit::tool::bench {

namespace {

using json = nlohmann::ordered_json;

// JSON has no spelling for NaN and infinities: a figure that could not be formed is null.
json number(double v) { return std::isfinite(v) ? json(v) : json(); }

json spread_json(const Spread& s) {
  return {{"median", number(s.median)}, {"p10", number(s.p10)}, {"p90", number(s.p90)}, {"min", number(s.min)},
          {"max", number(s.max)}};
}

json side_json(const std::vector<double>& samples, const Spread& spread) {
  json side = spread_json(spread);
  side["samples"] = json::array();
  for (double s : samples) side["samples"].push_back(number(s));
  return side;
}

json interval_json(const Interval& i) {
  return {{"low", number(i.low)}, {"high", number(i.high)}, {"confidence", number(i.confidence)}};
}

json result_json(const Result& r) {
  Verdict v = judge(r);
  json out = {{"name", r.name}, {"group", r.group}, {"unit", r.unit}, {"higher_is_better", r.better == Better::higher}};
  if (!r.series.empty() || r.size_bytes > 0) {
    out["series"] = r.series;
    out["size_bytes"] = r.size_bytes;
  }
  out["cudakit"] = side_json(r.cudakit, v.cudakit);
  out["raw"] = side_json(r.raw, v.raw);
  out["ratio"] = number(v.ratio);
  out["round_ratio"] = spread_json(v.round_ratio);
  out["ratio_interval"] = interval_json(v.ratio_interval);
  out["target_ratio"] = r.target_ratio > 0 ? json(r.target_ratio) : json();
  out["verdict"] = outcome_name(v.outcome);
  // Within noise passes: only a miss fails the run.
  out["passed"] = v.judged ? json(!v.missed) : !r.error.empty() ? json(false) : json();
  if (!r.error.empty()) out["error"] = r.error;
  // A missed figure's second measurement (result.hpp): the verdict above is both's.
  if (v.repeated) {
    json repeat = {{"cudakit", side_json(r.repeat_cudakit, summarize(r.repeat_cudakit))},
                   {"raw", side_json(r.repeat_raw, summarize(r.repeat_raw))}};
    repeat["ratio_interval"] = interval_json(v.repeat_interval);
    repeat["verdict"] = outcome_name(v.repeat_outcome);
    out["repeat"] = repeat;
  }
  return out;
}

}  // namespace

std::string report_json(const RunInfo& info, const std::vector<Result>& results) {
  int met = 0, within_noise = 0, missed = 0;
  for (const Result& r : results) {
    Verdict v = judge(r);
    met += v.met ? 1 : 0;
    within_noise += v.within_noise ? 1 : 0;
    missed += v.missed ? 1 : 0;
  }
  json doc = {{"schema", report_schema},
              {"date", info.date_utc},
              {"cudakit_version", info.cudakit_version},
              {"driver_version", info.driver_version}};
  doc["gpu"] = {{"ordinal", info.device_ordinal},
                {"name", info.gpu_name},
                {"compute_capability", info.compute_capability},
                {"multiprocessors", info.multiprocessors},
                {"sm_clock_mhz", info.sm_clock_mhz},
                {"memory_clock_mhz", info.memory_clock_mhz},
                {"memory_bus_width_bits", info.memory_bus_width_bits},
                {"clocks_source", "device attributes (rated clocks, not the clocks during the run)"}};
  doc["quick"] = info.quick;
  doc["rounds"] = info.rounds;
  doc["filters"] = info.filters;
  doc["ratio_interval_method"] = ratio_interval_method;
  doc["results"] = json::array();
  for (const Result& r : results) doc["results"].push_back(result_json(r));
  doc["targets_met"] = met;
  doc["targets_within_noise"] = within_noise;
  doc["targets_missed"] = missed;
  doc["passed"] = missed == 0;
  return doc.dump(2) + "\n";
}

std::string utc_now_iso8601() {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

}  // namespace cudakit::tool::bench
