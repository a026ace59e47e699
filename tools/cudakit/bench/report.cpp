#include "bench/report.hpp"

#include <ctime>

#include "bench/json_writer.hpp"

namespace cudakit::tool::bench {

namespace {

void write_spread(JsonWriter& json, const Spread& s) {
  json.key("median");
  json.value(s.median);
  json.key("p10");
  json.value(s.p10);
  json.key("p90");
  json.value(s.p90);
  json.key("min");
  json.value(s.min);
  json.key("max");
  json.value(s.max);
}

void write_side(JsonWriter& json, const char* name, const std::vector<double>& samples, const Spread& spread) {
  json.key(name);
  json.begin_object();
  write_spread(json, spread);
  json.key("samples");
  json.begin_array(JsonWriter::Layout::one_line);
  for (double s : samples) json.value(s);
  json.end_array();
  json.end_object();
}

void write_result(JsonWriter& json, const Result& r) {
  Verdict v = judge(r);
  json.begin_object();
  json.key("name");
  json.value(r.name);
  json.key("group");
  json.value(r.group);
  json.key("unit");
  json.value(r.unit);
  json.key("higher_is_better");
  json.value(r.better == Better::higher);
  if (!r.series.empty() || r.size_bytes > 0) {
    json.key("series");
    json.value(r.series);
    json.key("size_bytes");
    json.value(r.size_bytes);
  }
  write_side(json, "cudakit", r.cudakit, v.cudakit);
  write_side(json, "raw", r.raw, v.raw);
  json.key("ratio");
  json.value(v.ratio);
  json.key("round_ratio");
  json.begin_object(JsonWriter::Layout::one_line);
  write_spread(json, v.round_ratio);
  json.end_object();
  json.key("target_ratio");
  if (r.target_ratio > 0) json.value(r.target_ratio);
  else json.null();
  json.key("passed");
  if (v.judged) json.value(v.met);
  else if (!r.error.empty()) json.value(false);
  else json.null();
  if (!r.error.empty()) {
    json.key("error");
    json.value(r.error);
  }
  json.end_object();
}

}  // namespace

std::string report_json(const RunInfo& info, const std::vector<Result>& results) {
  int met = 0, missed = 0;
  for (const Result& r : results) {
    Verdict v = judge(r);
    met += v.met ? 1 : 0;
    missed += v.missed ? 1 : 0;
  }

  JsonWriter json;
  json.begin_object();
  json.key("schema");
  json.value(report_schema);
  json.key("date");
  json.value(info.date_utc);
  json.key("cudakit_version");
  json.value(info.cudakit_version);
  json.key("driver_version");
  json.value(info.driver_version);

  json.key("gpu");
  json.begin_object();
  json.key("ordinal");
  json.value(info.device_ordinal);
  json.key("name");
  json.value(info.gpu_name);
  json.key("compute_capability");
  json.value(info.compute_capability);
  json.key("multiprocessors");
  json.value(info.multiprocessors);
  json.key("sm_clock_mhz");
  json.value(info.sm_clock_mhz);
  json.key("memory_clock_mhz");
  json.value(info.memory_clock_mhz);
  json.key("memory_bus_width_bits");
  json.value(info.memory_bus_width_bits);
  json.key("clocks_source");
  json.value("device attributes (rated clocks, not the clocks during the run)");
  json.end_object();

  json.key("quick");
  json.value(info.quick);
  json.key("filters");
  json.begin_array(JsonWriter::Layout::one_line);
  for (const auto& f : info.filters) json.value(f);
  json.end_array();

  json.key("results");
  json.begin_array();
  for (const Result& r : results) write_result(json, r);
  json.end_array();

  json.key("targets_met");
  json.value(met);
  json.key("targets_missed");
  json.value(missed);
  json.key("passed");
  json.value(missed == 0);
  json.end_object();
  return json.text();
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
