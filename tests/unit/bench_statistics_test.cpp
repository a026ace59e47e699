// The benchmark framework's arithmetic (tools/cudakit/bench): medians, spreads, ratios,
// the median's 95% interval, the Mann-Whitney test and verdicts, on known data. No
// driver needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>
#include <utility>
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

// 1..n in a shuffled order, so that nothing relies on sorted input.
std::vector<double> shuffled_ranks(int n) {
  std::vector<double> v;
  for (int i = 1; i <= n; ++i) v.push_back(i);
  std::shuffle(v.begin(), v.end(), std::mt19937(std::random_device{}()));
  return v;
}

TEST(BenchMedianInterval, FortyOneRoundsGiveTheFourteenthAndTwentyEighthSample) {
  Interval i = median_interval_95(shuffled_ranks(41));
  EXPECT_DOUBLE_EQ(i.low, 14);
  EXPECT_DOUBLE_EQ(i.high, 28);
  EXPECT_NEAR(i.confidence, 0.97247, 1e-5);  // 1 - 2 P(Binomial(41, 1/2) <= 13)
}

TEST(BenchMedianInterval, TheRanksFollowTheBinomialForOtherCounts) {
  struct Case {
    int n, low, high;
    double confidence;
  };
  for (Case c : {Case{10, 2, 9, 0.978516}, Case{101, 41, 61, 0.953956}, Case{201, 87, 115, 0.951999}}) {
    Interval i = median_interval_95(shuffled_ranks(c.n));
    EXPECT_DOUBLE_EQ(i.low, c.low) << c.n;
    EXPECT_DOUBLE_EQ(i.high, c.high) << c.n;
    EXPECT_NEAR(i.confidence, c.confidence, 1e-6) << c.n;
    EXPECT_GE(i.confidence, 0.95) << c.n;
  }
}

TEST(BenchMedianInterval, FewSamplesGiveTheirWholeRangeAndSaySoInTheConfidence) {
  Interval five = median_interval_95({3, 1, 5, 2, 4});
  EXPECT_DOUBLE_EQ(five.low, 1);
  EXPECT_DOUBLE_EQ(five.high, 5);
  EXPECT_DOUBLE_EQ(five.confidence, 0.9375);  // below 95%: five samples cannot do better
  Interval one = median_interval_95({7});
  EXPECT_DOUBLE_EQ(one.low, 7);
  EXPECT_DOUBLE_EQ(one.high, 7);
  Interval none = median_interval_95({});
  EXPECT_TRUE(std::isnan(none.low));
  EXPECT_TRUE(std::isnan(none.high));
}

TEST(BenchMedianInterval, AFewWildRoundsDoNotWidenIt) {
  std::vector<double> rounds(41, 1.0);
  rounds[3] = 50;
  rounds[17] = 0.01;
  Interval i = median_interval_95(rounds);
  EXPECT_DOUBLE_EQ(i.low, 1);
  EXPECT_DOUBLE_EQ(i.high, 1);
}

TEST(BenchMannWhitney, SeparatedSetsMatchTheNormalApproximation) {
  // U = 0; z = (12.5 - 0.5) / sqrt(25 * 11 / 12): the value R's wilcox.test(exact = FALSE) gives.
  EXPECT_NEAR(mann_whitney_p({5, 3, 1, 4, 2}, {6, 7, 8, 9, 10}), 0.0121858, 1e-6);
  EXPECT_NEAR(mann_whitney_p({6, 7, 8, 9, 10}, {1, 2, 3, 4, 5}), 0.0121858, 1e-6) << "two-sided";
}

TEST(BenchMannWhitney, TiesShareTheirRanks) {
  EXPECT_NEAR(mann_whitney_p({1, 2, 2, 3}, {2, 3, 3, 4}), 0.172034, 1e-6);
}

TEST(BenchMannWhitney, EqualOrEmptySetsShowNoDifference) {
  EXPECT_DOUBLE_EQ(mann_whitney_p({1, 1, 1}, {1, 1}), 1);
  EXPECT_DOUBLE_EQ(mann_whitney_p({}, {1, 2}), 1);
  auto same = shuffled_ranks(41);
  EXPECT_GT(mann_whitney_p(same, shuffled_ranks(41)), 0.9);
}

TEST(BenchMannWhitney, AShiftOfManyRoundsIsSignificant) {
  std::vector<double> base = shuffled_ranks(41), moved;
  for (double v : base) moved.push_back(v + 30);
  EXPECT_LT(mann_whitney_p(base, moved), 1e-6);
}

TEST(BenchClassify, ACeilingIsMetWithinNoiseOrMissedByTheWholeInterval) {
  EXPECT_EQ(classify({1.01, 1.04, 0.95}, 1.05, Better::lower), Outcome::met);
  EXPECT_EQ(classify({1.01, 1.05, 0.95}, 1.05, Better::lower), Outcome::met) << "the boundary meets";
  EXPECT_EQ(classify({1.03, 1.07, 0.95}, 1.05, Better::lower), Outcome::within_noise);
  EXPECT_EQ(classify({1.06, 1.09, 0.95}, 1.05, Better::lower), Outcome::missed);
}

TEST(BenchClassify, AFloorIsTheMirrorImage) {
  EXPECT_EQ(classify({0.99, 1.01, 0.95}, 0.98, Better::higher), Outcome::met);
  EXPECT_EQ(classify({0.97, 0.99, 0.95}, 0.98, Better::higher), Outcome::within_noise);
  EXPECT_EQ(classify({0.90, 0.97, 0.95}, 0.98, Better::higher), Outcome::missed);
}

TEST(BenchClassify, NoTargetIsReportedAndNoIntervalIsAMiss) {
  EXPECT_EQ(classify({5, 6, 0.95}, 0, Better::lower), Outcome::reported);
  EXPECT_EQ(classify({std::nan(""), std::nan(""), std::nan("")}, 1.05, Better::lower), Outcome::missed);
  EXPECT_EQ(classify({0, 1, 0.95}, 1.05, Better::lower), Outcome::missed) << "a ratio of 0 is no ratio";
}

TEST(BenchClassify, OutcomesHaveTheirJsonNames) {
  EXPECT_STREQ(outcome_name(Outcome::met), "met");
  EXPECT_STREQ(outcome_name(Outcome::within_noise), "within noise");
  EXPECT_STREQ(outcome_name(Outcome::missed), "missed");
  EXPECT_STREQ(outcome_name(Outcome::error), "error");
  EXPECT_STREQ(outcome_name(Outcome::reported), "reported");
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

// 41 rounds of a noisy comparison whose ratio of medians is over the target but whose
// per-round ratios straddle it (as a small GEMM's 1.042x ±19% against 1.03 did).
TEST(BenchVerdict, ARatioPastTheTargetButInsideItsNoiseIsWithinNoiseAndNotMissed) {
  // Per-round ratios 0.89 to 1.19 in steps of 0.0075 (centre 1.04), on random raw times.
  std::mt19937 random(std::random_device{}());
  std::uniform_real_distribution<double> raw_time(5, 15);
  std::vector<double> cudakit, raw;
  for (double rank : shuffled_ranks(41)) {
    raw.push_back(raw_time(random));
    cudakit.push_back(raw.back() * (0.89 + 0.0075 * (rank - 1)));
  }
  Verdict v = judge(cost(cudakit, raw, 1.03));
  EXPECT_NEAR(v.ratio_interval.low, 0.89 + 0.0075 * 13, 1e-9);
  EXPECT_NEAR(v.ratio_interval.high, 0.89 + 0.0075 * 27, 1e-9);
  EXPECT_EQ(v.outcome, Outcome::within_noise);
  EXPECT_TRUE(v.within_noise);
  EXPECT_FALSE(v.met);
  EXPECT_FALSE(v.missed);
}

TEST(BenchVerdict, ASteadyRatioPastTheTargetIsMissed) {
  std::vector<double> cudakit, raw;
  for (double r : shuffled_ranks(41)) {
    raw.push_back(r);
    cudakit.push_back(r * (1.10 + r / 1000));  // every round 1.101x to 1.141x
  }
  Verdict v = judge(cost(cudakit, raw, 1.05));
  EXPECT_EQ(v.outcome, Outcome::missed);
  EXPECT_GT(v.ratio_interval.low, 1.05);
}

TEST(BenchVerdict, TheIntervalComesFromThePairedRounds) {
  // Raw rounds swing by 10x, yet each cudakit round is 1.02x its raw round: the paired
  // interval is tight even though both sides' spreads are wide.
  std::vector<double> cudakit, raw;
  for (double r : shuffled_ranks(41)) {
    raw.push_back(r);
    cudakit.push_back(r * 1.02);
  }
  Verdict v = judge(cost(cudakit, raw, 1.05));
  EXPECT_NEAR(v.ratio_interval.low, 1.02, 1e-12);
  EXPECT_NEAR(v.ratio_interval.high, 1.02, 1e-12);
  EXPECT_EQ(v.outcome, Outcome::met);
}

// 41 rounds whose paired ratios are `centre` ± 0.5%, on random raw times.
std::pair<std::vector<double>, std::vector<double>> steady_rounds(double centre) {
  std::mt19937 random(std::random_device{}());
  std::uniform_real_distribution<double> raw_time(5, 15);
  std::vector<double> cudakit, raw;
  for (double rank : shuffled_ranks(41)) {
    raw.push_back(raw_time(random));
    cudakit.push_back(raw.back() * (centre - 0.005 + 0.00025 * (rank - 1)));
  }
  return {cudakit, raw};
}

// A miss stands only when its second measurement misses too (result.hpp).
TEST(BenchVerdict, AMissWhoseSecondMeasurementMissesTooStaysMissed) {
  auto [cudakit, raw] = steady_rounds(1.10);
  Result r = cost(cudakit, raw, 1.05);
  std::tie(r.repeat_cudakit, r.repeat_raw) = steady_rounds(1.08);
  Verdict v = judge(r);
  EXPECT_EQ(v.outcome, Outcome::missed);
  EXPECT_TRUE(v.missed);
  EXPECT_TRUE(v.repeated);
  EXPECT_EQ(v.repeat_outcome, Outcome::missed);
  EXPECT_NEAR(v.repeat_interval.low, 1.08 - 0.005 + 0.00025 * 13, 1e-9);
  EXPECT_GT(v.ratio_interval.low, 1.09);  // the first measurement's interval, as it was
}

TEST(BenchVerdict, AMissThatDoesNotRepeatIsWithinNoise) {
  auto [cudakit, raw] = steady_rounds(1.10);
  for (double second : {1.05, 1.02}) {  // within noise, then met, in the second measurement
    Result r = cost(cudakit, raw, 1.05);
    std::tie(r.repeat_cudakit, r.repeat_raw) = steady_rounds(second);
    Verdict v = judge(r);
    EXPECT_EQ(v.outcome, Outcome::within_noise) << second;
    EXPECT_FALSE(v.missed) << second;
    EXPECT_TRUE(v.repeated) << second;
    EXPECT_EQ(v.repeat_outcome, second == 1.05 ? Outcome::within_noise : Outcome::met);
  }
}

TEST(BenchVerdict, OnlyAMissIsJudgedAgainstASecondMeasurement) {
  auto [cudakit, raw] = steady_rounds(1.02);
  Result met = cost(cudakit, raw, 1.05);
  std::tie(met.repeat_cudakit, met.repeat_raw) = steady_rounds(1.20);
  EXPECT_EQ(judge(met).outcome, Outcome::met);
  EXPECT_FALSE(judge(met).repeated);
  Result failed = error_result("broken", "events", "boom");
  failed.repeat_cudakit = cudakit;
  failed.repeat_raw = raw;
  EXPECT_EQ(judge(failed).outcome, Outcome::error);
}

TEST(BenchVerdict, AnErrorIsAnErrorOutcomeAndAMiss) {
  Verdict v = judge(error_result("broken", "events", "boom"));
  EXPECT_EQ(v.outcome, Outcome::error);
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
