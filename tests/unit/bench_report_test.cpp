// `cudakit bench --json`: the shape of the report, read back with nlohmann/json (any
// document that does not parse fails the test): the run's header, each result's samples,
// spreads, ratio, target and verdict, and null where a figure could not be formed.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "bench/report.hpp"

namespace cudakit::tool::bench {
namespace {

using nlohmann::json;

json parsed(const std::string& text) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(doc.is_discarded()) << text;
  return doc;
}

RunInfo sample_info() {
  RunInfo info;
  info.date_utc = "2026-12-02T10:11:12Z";
  info.cudakit_version = "0.1.0";
  info.driver_version = "13.0";
  info.gpu_name = "NVIDIA \"H200\" \\ µs\n";
  info.compute_capability = "9.0";
  info.multiprocessors = 132;
  info.sm_clock_mhz = 1980;
  info.memory_clock_mhz = 3201;
  info.memory_bus_width_bits = 6144;
  info.rounds = 9;
  info.filters = {"event"};
  return info;
}

std::vector<Result> sample_results() {
  Result met = cost_result("event record", "events", {{1.0e-7, 1.1e-7, 1.2e-7}, {1.0e-7, 1.1e-7, 1.2e-7}}, 1.05);
  Result missed = cost_result("record + wait", "events", {{6e-7, 6e-7}, {5e-7, 5e-7}}, 1.05);
  Result sweep = bandwidth_result("pinned H2D 1 MiB", "bandwidth", {{2e-5}, {2e-5}}, 1 << 20, 0.98, "pinned H2D", 1 << 20);
  return {met, missed, sweep, error_result("graph replay", "graphs", "cuGraphLaunch: \"boom\"")};
}

TEST(BenchReport, HasTheRunHeader) {
  json doc = parsed(report_json(sample_info(), sample_results()));
  EXPECT_EQ(doc["schema"], report_schema);
  EXPECT_EQ(doc["date"], "2026-12-02T10:11:12Z");
  EXPECT_EQ(doc["driver_version"], "13.0");
  EXPECT_EQ(doc["gpu"]["name"], "NVIDIA \"H200\" \\ µs\n") << "quotes, backslashes, UTF-8 and newlines read back";
  EXPECT_EQ(doc["gpu"]["sm_clock_mhz"], 1980);
  EXPECT_EQ(doc["gpu"]["memory_clock_mhz"], 3201);
  EXPECT_EQ(doc["filters"].at(0), "event");
  EXPECT_EQ(doc["rounds"], 9);
  EXPECT_TRUE(doc["quick"].is_boolean());
}

TEST(BenchReport, EveryResultCarriesSamplesSpreadsRatioTargetAndVerdict) {
  json doc = parsed(report_json(sample_info(), sample_results()));
  const json& results = doc["results"];
  ASSERT_EQ(results.size(), 4u);
  const json& met = results[0];
  EXPECT_EQ(met["name"], "event record");
  EXPECT_EQ(met["unit"], "us");
  EXPECT_FALSE(met["higher_is_better"].get<bool>());
  EXPECT_EQ(met["cudakit"]["samples"].size(), 3u);
  EXPECT_NEAR(met["cudakit"]["median"].get<double>(), 0.11, 1e-9);
  for (const char* field : {"p10", "p90", "min", "max"}) EXPECT_TRUE(met["raw"][field].is_number()) << field;
  EXPECT_NEAR(met["ratio"].get<double>(), 1.0, 1e-9);
  EXPECT_TRUE(met["round_ratio"]["median"].is_number());
  EXPECT_DOUBLE_EQ(met["target_ratio"].get<double>(), 1.05);
  EXPECT_TRUE(met["passed"].get<bool>());
  EXPECT_FALSE(met.contains("series")) << "only size sweeps have a series";

  EXPECT_TRUE(results[1]["passed"].is_boolean());
  EXPECT_FALSE(results[1]["passed"].get<bool>());

  EXPECT_TRUE(results[2]["higher_is_better"].get<bool>());
  EXPECT_EQ(results[2]["series"], "pinned H2D");
  EXPECT_EQ(results[2]["size_bytes"], 1 << 20);

  EXPECT_EQ(results[3]["error"], "cuGraphLaunch: \"boom\"");
  EXPECT_FALSE(results[3]["passed"].get<bool>());
  EXPECT_TRUE(results[3]["ratio"].is_null()) << "no ratio without samples: null, not NaN";
}

TEST(BenchReport, EveryResultCarriesItsIntervalAndVerdict) {
  json doc = parsed(report_json(sample_info(), sample_results()));
  const json& results = doc["results"];
  EXPECT_EQ(results[0]["verdict"], "met");
  EXPECT_NEAR(results[0]["ratio_interval"]["low"].get<double>(), 1.0, 1e-9);
  EXPECT_NEAR(results[0]["ratio_interval"]["high"].get<double>(), 1.0, 1e-9);
  EXPECT_NEAR(results[0]["ratio_interval"]["confidence"].get<double>(), 0.75, 1e-9) << "three rounds: [min, max]";
  EXPECT_EQ(results[1]["verdict"], "missed");
  EXPECT_NEAR(results[1]["ratio_interval"]["low"].get<double>(), 1.2, 1e-9);
  EXPECT_EQ(results[3]["verdict"], "error");
  EXPECT_TRUE(results[3]["ratio_interval"]["low"].is_null()) << "no interval without samples: null";
  EXPECT_NE(doc["ratio_interval_method"].get<std::string>().find("median per-round"), std::string::npos);
}

TEST(BenchReport, WithinNoisePassesAndIsCountedApart) {
  // Per-round ratios 0.95, 1.00, 1.10, 1.20, 0.90: the interval [0.90, 1.20] holds 1.05.
  Result noisy = cost_result("noisy", "events", {{0.95e-6, 1.0e-6, 1.1e-6, 1.2e-6, 0.9e-6}, {1e-6, 1e-6, 1e-6, 1e-6, 1e-6}},
                             1.05);
  json doc = parsed(report_json(sample_info(), {noisy}));
  EXPECT_EQ(doc["results"][0]["verdict"], "within noise");
  EXPECT_TRUE(doc["results"][0]["passed"].get<bool>()) << "only a miss fails";
  EXPECT_EQ(doc["targets_within_noise"], 1);
  EXPECT_EQ(doc["targets_met"], 0);
  EXPECT_EQ(doc["targets_missed"], 0);
  EXPECT_TRUE(doc["passed"].get<bool>());
}

TEST(BenchReport, NonFiniteSamplesBecomeNull) {
  Result r = cost_result("odd", "events", {{1e-7, std::nan("")}, {1e-7, INFINITY}}, 1.05);
  json doc = parsed(report_json(sample_info(), {r}));
  EXPECT_TRUE(doc["results"][0]["cudakit"]["samples"][1].is_null());
  EXPECT_TRUE(doc["results"][0]["raw"]["samples"][1].is_null());
}

TEST(BenchReport, CountsMetAndMissedTargets) {
  json doc = parsed(report_json(sample_info(), sample_results()));
  EXPECT_EQ(doc["targets_met"], 2);
  EXPECT_EQ(doc["targets_within_noise"], 0);
  EXPECT_EQ(doc["targets_missed"], 2);  // the slow one and the error
  EXPECT_FALSE(doc["passed"].get<bool>());
}

TEST(BenchReport, AnEmptyRunIsValidAndPasses) {
  json doc = parsed(report_json(RunInfo{}, {}));
  EXPECT_TRUE(doc["results"].empty());
  EXPECT_TRUE(doc["passed"].get<bool>());
}

TEST(BenchReport, DateIsUtcIso8601) {
  std::string date = utc_now_iso8601();
  ASSERT_EQ(date.size(), 20u) << date;
  EXPECT_EQ(date[4], '-');
  EXPECT_EQ(date[10], 'T');
  EXPECT_EQ(date.back(), 'Z');
}

}  // namespace
}  // namespace cudakit::tool::bench
