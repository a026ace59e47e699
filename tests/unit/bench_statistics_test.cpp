// The benchmark framework's arithmetic (tools/cudakit/bench): medians, spreads, ratios
// and verdicts. No driver needed.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "bench/result.hpp"
#include "bench/statistics.hpp"

namespace cudakit::tool::bench {
namespace {

TEST(BenchStatistics, MedianOfAnOddCountIsTheMiddleSample) {
  Spread s = summarize({5, 1, 3});
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
}

TEST(BenchStatistics, MedianOfAnEvenCountIsTheMeanOfTheMiddleTwo) {
  EXPECT_DOUBLE_EQ(summarize({4, 1, 3, 2}).median, 2.5);
}

TEST(BenchStatistics, PercentilesInterpolateBetweenRanks) {
  std::vector<double> samples;
  for (int i = 0; i <= 10; ++i) samples.push_back(10 - i);  // 10..0, unsorted on purpose
  Spread s = summarize(samples);
  EXPECT_DOUBLE_EQ(s.p10, 1);
  EXPECT_DOUBLE_EQ(s.p90, 9);
  EXPECT_DOUBLE_EQ(quantile_of_sorted(std::vector<double>{0, 10}, 0.25), 2.5);
}

TEST(BenchStatistics, OneSampleIsItsOwnSpread) {
  Spread s = summarize({7});
  EXPECT_DOUBLE_EQ(s.median, 7);
  EXPECT_DOUBLE_EQ(s.p10, 7);
  EXPECT_DOUBLE_EQ(s.p90, 7);
  EXPECT_DOUBLE_EQ(s.relative_half_width(), 0);
}

TEST(BenchStatistics, NoSamplesGiveNaNNotACrash) {
  Spread s = summarize({});
  EXPECT_TRUE(std::isnan(s.median));
  EXPECT_TRUE(std::isnan(s.relative_half_width()));
}

TEST(BenchStatistics, OneOutlierDoesNotMoveTheMedian) {
  EXPECT_DOUBLE_EQ(summarize({1, 1, 1, 1, 1000}).median, 1);
}

TEST(BenchStatistics, RelativeHalfWidthIsHalfTheP10P90RangeOverTheMedian) {
  Spread s{100, 96, 104, 90, 110};
  EXPECT_DOUBLE_EQ(s.relative_half_width(), 0.04);
}

Result cost(std::vector<double> cudakit, std::vector<double> raw, double target = 1.05) {
  Result r;
  r.name = "cost";
  r.unit = "us";
  r.target_ratio = target;
  r.cudakit = std::move(cudakit);
  r.raw = std::move(raw);
  return r;
}

TEST(BenchVerdict, RatioIsCudakitMedianOverRawMedian) {
  Verdict v = judge(cost({2, 2.2, 2.1}, {2, 2, 1}));
  EXPECT_DOUBLE_EQ(v.ratio, 2.1 / 2.0);
}

TEST(BenchVerdict, CostWithinTheCeilingIsMet) {
  Verdict v = judge(cost({1.04, 1.04, 1.04}, {1, 1, 1}));
  EXPECT_TRUE(v.judged);
  EXPECT_TRUE(v.met);
  EXPECT_FALSE(v.missed);
}

TEST(BenchVerdict, CostOverTheCeilingIsMissed) {
  Verdict v = judge(cost({1.2, 1.2, 1.2}, {1, 1, 1}));
  EXPECT_FALSE(v.met);
  EXPECT_TRUE(v.missed);
}

TEST(BenchVerdict, ThroughputTargetIsAFloor) {
  auto copy_taking = [](double cudakit_seconds) {
    return bandwidth_result("copy", "bandwidth", {{cudakit_seconds, cudakit_seconds}, {1.0, 1.0}}, 1e9, 0.98);
  };
  EXPECT_TRUE(judge(copy_taking(1.0)).met);
  EXPECT_TRUE(judge(copy_taking(1.01)).met);  // 0.990x raw: above the 0.98 floor
  Verdict slow = judge(copy_taking(1.05));    // 0.952x raw: below it
  EXPECT_FALSE(slow.met);
  EXPECT_TRUE(slow.missed);
}

TEST(BenchVerdict, WithoutTargetTheResultIsReportedNotJudged) {
  Verdict v = judge(cost({5, 5}, {1, 1}, 0));
  EXPECT_FALSE(v.judged);
  EXPECT_FALSE(v.met);
  EXPECT_FALSE(v.missed);
}

TEST(BenchVerdict, AnErrorIsAMiss) {
  Verdict v = judge(error_result("broken", "events", "cuEventRecord failed"));
  EXPECT_FALSE(v.judged);
  EXPECT_TRUE(v.missed);
  EXPECT_TRUE(std::isnan(v.ratio));
}

TEST(BenchVerdict, ZeroRawMedianGivesNoRatioAndNoPass) {
  Verdict v = judge(cost({1, 1}, {0, 0}));
  EXPECT_TRUE(std::isnan(v.ratio));
  EXPECT_TRUE(v.missed);
}

TEST(BenchVerdict, RoundRatiosPairSamplesOfTheSameRound) {
  Verdict v = judge(cost({2, 4, 6}, {1, 2, 3}));
  EXPECT_DOUBLE_EQ(v.round_ratio.min, 2);
  EXPECT_DOUBLE_EQ(v.round_ratio.max, 2);
}

// The doctor's words for a ratio against its target (target_note): how far it missed,
// relative to the target, in the right direction.
TEST(BenchTargetNote, ACostOverItsCeilingSaysByHowMuch) {
  EXPECT_EQ(target_note(1.05 * 1.003, 1.05, Better::lower), "MISS: 0.3% over the target (ratio at most 1.050)");
  EXPECT_EQ(target_note(1.136, 1.1, Better::lower), "MISS: 3.3% over the target (ratio at most 1.100)");
}

TEST(BenchTargetNote, AThroughputUnderItsFloorSaysByHowMuch) {
  EXPECT_EQ(target_note(0.98 * 0.95, 0.98, Better::higher), "MISS: 5.0% under the target (ratio at least 0.980)");
}

TEST(BenchTargetNote, AMissTooSmallToRoundIsStillAMiss) {
  EXPECT_EQ(target_note(1.0501, 1.05, Better::lower), "MISS: less than 0.1% over the target (ratio at most 1.050)");
}

TEST(BenchTargetNote, MetTargetsAndTheBoundaryAreOk) {
  EXPECT_EQ(target_note(1.05, 1.05, Better::lower), "ok");
  EXPECT_EQ(target_note(0.7, 1.05, Better::lower), "ok");
  EXPECT_EQ(target_note(0.98, 0.98, Better::higher), "ok");
  EXPECT_EQ(target_note(1.5, 0.98, Better::higher), "ok");
}

TEST(BenchTargetNote, NoTargetNoNoteAndNoRatioIsAMiss) {
  EXPECT_EQ(target_note(3.0, 0, Better::lower), "");
  EXPECT_EQ(target_note(0, 1.05, Better::lower), "MISS: no ratio");
  EXPECT_EQ(target_note(std::nan(""), 0.98, Better::higher), "MISS: no ratio");
  EXPECT_EQ(target_note(INFINITY, 1.05, Better::lower), "MISS: no ratio");
}

TEST(BenchResults, CostResultIsInMicrosecondsPerOperation) {
  Result r = cost_result("event record", "events", {{1e-7, 2e-7}, {1e-7, 1e-7}}, 1.05);
  EXPECT_EQ(r.unit, "us");
  EXPECT_EQ(r.better, Better::lower);
  ASSERT_EQ(r.cudakit.size(), 2u);
  EXPECT_DOUBLE_EQ(r.cudakit[0], 0.1);
  EXPECT_DOUBLE_EQ(r.cudakit[1], 0.2);
}

TEST(BenchResults, BandwidthResultIsInGigabytesPerSecond) {
  Result r = bandwidth_result("pinned H2D 1 MiB", "bandwidth", {{1e-3}, {2e-3}}, 50e6, 0.98, "pinned H2D", 1 << 20);
  EXPECT_EQ(r.unit, "GB/s");
  EXPECT_EQ(r.better, Better::higher);
  EXPECT_DOUBLE_EQ(r.cudakit[0], 50);
  EXPECT_DOUBLE_EQ(r.raw[0], 25);
  EXPECT_EQ(r.series, "pinned H2D");
  EXPECT_DOUBLE_EQ(r.size_bytes, 1 << 20);
}

}  // namespace
}  // namespace cudakit::tool::bench
