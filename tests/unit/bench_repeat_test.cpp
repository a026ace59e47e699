// A missed figure measured again (bench/repeat.hpp): which benchmarks run a second time,
// which figures take the second run's samples, and how the report shows both.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "bench/repeat.hpp"
#include "bench/report.hpp"

namespace cudakit::tool::bench {
namespace {

// Every round of cudakit `ratio` times raw's (1 µs), over 9 rounds: met, within noise or
// missed by the whole interval.
Result cost_at(const std::string& name, double ratio, double target = 1.05) {
  PairedSamples s;
  for (int i = 0; i < 9; ++i) {
    s.raw.push_back(1e-6 * (1 + i * 0.01));
    s.cudakit.push_back(s.raw.back() * ratio);
  }
  return cost_result(name, "events", s, target);
}

TEST(BenchRepeat, OnlyABenchmarkWithAMissRunsAgainAndOnlyItsMissesTakeTheRepeat) {
  std::vector<Measured> measured{{0, {cost_at("a met", 1.0), cost_at("a missed", 1.2)}},
                                 {1, {cost_at("all met", 1.0)}},
                                 {2, {cost_at("b missed", 1.3), cost_at("b reported", 2.0, 0)}}};
  std::vector<std::size_t> ran;
  auto again = repeat_missed(measured, [&](std::size_t i) {
    ran.push_back(i);
    // The second run: benchmark 0's miss does not repeat, benchmark 2's does; every
    // figure comes out different from the first run, so a copied sample shows.
    if (i == 0) return std::vector<Result>{cost_at("a met", 1.5), cost_at("a missed", 1.01)};
    return std::vector<Result>{cost_at("b missed", 1.25), cost_at("b reported", 3.0, 0)};
  });
  EXPECT_EQ(ran, (std::vector<std::size_t>{0, 2}));
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[1].benchmark, 2u);

  EXPECT_TRUE(measured[0].results[0].repeat_cudakit.empty()) << "a met figure keeps its one measurement";
  EXPECT_EQ(judge(measured[0].results[0]).outcome, Outcome::met);
  EXPECT_EQ(measured[0].results[1].repeat_cudakit, cost_at("a missed", 1.01).cudakit);
  EXPECT_EQ(judge(measured[0].results[1]).outcome, Outcome::within_noise) << "the miss did not repeat";
  EXPECT_EQ(judge(measured[2].results[0]).outcome, Outcome::missed) << "the miss repeated";
  EXPECT_TRUE(measured[2].results[1].repeat_cudakit.empty());
}

TEST(BenchRepeat, AMissTheSecondRunDoesNotProduceOrFailsStaysMissed) {
  std::vector<Measured> measured{{0, {cost_at("x", 1.2), cost_at("y", 1.2)}}};
  repeat_missed(measured, [](std::size_t) {
    return std::vector<Result>{error_result("x", "events", "cuEventRecord failed")};  // and no "y"
  });
  for (const Result& r : measured[0].results) {
    EXPECT_TRUE(r.repeat_cudakit.empty()) << r.name;
    EXPECT_EQ(judge(r).outcome, Outcome::missed) << r.name;
  }
}

TEST(BenchRepeat, AFailedBenchmarkIsNotRunAgain) {
  std::vector<Measured> measured{{0, {error_result("broken", "events", "boom")}}};
  int runs = 0;
  repeat_missed(measured, [&](std::size_t) {
    ++runs;
    return std::vector<Result>{};
  });
  EXPECT_EQ(runs, 0);
  EXPECT_EQ(judge(measured[0].results[0]).outcome, Outcome::error);
}

TEST(BenchRepeat, TheReportShowsTheSecondMeasurementAndTheVerdictOfBoth) {
  Result r = cost_at("record + wait", 1.2);
  const Result second = cost_at("record + wait", 1.01);
  r.repeat_cudakit = second.cudakit;
  r.repeat_raw = second.raw;
  RunInfo info;
  const auto doc = nlohmann::json::parse(report_json(info, {r, cost_at("plain", 1.0)}));
  const auto& result = doc["results"][0];
  EXPECT_EQ(result["verdict"], "within noise");
  EXPECT_EQ(result["passed"], true);
  EXPECT_GT(result["ratio_interval"]["low"].get<double>(), 1.19) << "the first measurement's interval, as it was";
  ASSERT_TRUE(result.contains("repeat"));
  EXPECT_EQ(result["repeat"]["verdict"], "met");
  EXPECT_NEAR(result["repeat"]["ratio_interval"]["high"].get<double>(), 1.01, 1e-9);
  EXPECT_EQ(result["repeat"]["cudakit"]["samples"].size(), 9u);
  EXPECT_FALSE(doc["results"][1].contains("repeat")) << "a figure measured once has none";
  EXPECT_EQ(doc["targets_missed"], 0);
  EXPECT_EQ(doc["targets_within_noise"], 1);
}

}  // namespace
}  // namespace cudakit::tool::bench
