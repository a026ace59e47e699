// `cudakit bench --compare`: two reports (written by report_json from known samples)
// side by side: each figure's change, its significance, figures in one run only, and
// files without per-round samples or that are no bench run. No driver needed.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/compare.hpp"
#include "bench/report.hpp"

namespace cudakit::tool::bench {
namespace {

// 41 rounds: raw times drawn fresh, each cudakit round `ratio` times its raw round
// with a ±2% wobble that differs per round. The raw times vary by 1% only: a figure's
// ratio is a ratio of medians, which a wider spread of raw times would move by several
// percent from one draw to the next.
Result cost_at(const std::string& name, double ratio, std::mt19937& random) {
  std::uniform_real_distribution<double> raw_time(1.00e-6, 1.01e-6), wobble(-0.02, 0.02);
  PairedSamples seconds;
  for (int i = 0; i < 41; ++i) {
    seconds.raw.push_back(raw_time(random));
    seconds.cudakit.push_back(seconds.raw.back() * ratio * (1 + wobble(random)));
  }
  return cost_result(name, "events", seconds, 1.05);
}

std::string run_of(const std::vector<Result>& results) { return report_json(RunInfo{}, results); }

const FigureChange& figure(const Comparison& c, const std::string& name) {
  auto hit = std::find_if(c.figures.begin(), c.figures.end(), [&](const FigureChange& f) { return f.name == name; });
  if (hit == c.figures.end()) throw std::runtime_error("no figure " + name);
  return *hit;
}

class BenchCompare : public ::testing::Test {
 protected:
  std::mt19937 random{std::random_device{}()};
};

TEST_F(BenchCompare, AClearShiftIsBetterOrWorseAndNoiseIsNoChange) {
  std::string base = run_of({cost_at("steady", 1.00, random), cost_at("slower", 1.00, random),
                             cost_at("faster", 1.10, random)});
  std::string fresh = run_of({cost_at("steady", 1.00, random), cost_at("slower", 1.10, random),
                              cost_at("faster", 1.00, random)});
  Comparison c = compare_runs(base, fresh, "base.json", "new.json");
  ASSERT_EQ(c.figures.size(), 3u);
  EXPECT_EQ(figure(c, "slower").significance, Significance::worse);
  EXPECT_NEAR(figure(c, "slower").change, 0.10, 0.02);
  EXPECT_LT(figure(c, "slower").p_value, 1e-6);
  EXPECT_EQ(figure(c, "faster").significance, Significance::better);
  EXPECT_NEAR(figure(c, "faster").change, -0.09, 0.02);
  // Two draws of one distribution differ by chance only (p < 0.05 one time in 20), so
  // only its size is pinned here.
  EXPECT_NEAR(figure(c, "steady").change, 0, 0.02);
  EXPECT_TRUE(c.only_in_base.empty());
  EXPECT_TRUE(c.notes.empty());
}

TEST_F(BenchCompare, ForAThroughputHigherIsBetter) {
  auto copy_at = [&](double seconds) {
    PairedSamples s;
    std::uniform_real_distribution<double> wobble(-0.01, 0.01);
    for (int i = 0; i < 41; ++i) {
      s.raw.push_back(1e-3 * (1 + wobble(random)));
      s.cudakit.push_back(seconds * (1 + wobble(random)));
    }
    return bandwidth_result("copy", "bandwidth", s, 1e9, 0.98);
  };
  Comparison c = compare_runs(run_of({copy_at(1.2e-3)}), run_of({copy_at(1.0e-3)}), "a", "b");
  EXPECT_GT(figure(c, "copy").change, 0.1) << "the ratio of throughputs went up";
  EXPECT_EQ(figure(c, "copy").significance, Significance::better);
  EXPECT_TRUE(figure(c, "copy").higher_is_better);
}

TEST_F(BenchCompare, FiguresInOneRunOnlyAreListedApart) {
  Comparison c = compare_runs(run_of({cost_at("old", 1, random), cost_at("both", 1, random)}),
                              run_of({cost_at("both", 1, random), cost_at("new", 1, random)}), "a", "b");
  ASSERT_EQ(c.figures.size(), 1u);
  EXPECT_EQ(c.figures[0].name, "both");
  EXPECT_EQ(c.only_in_base, std::vector<std::string>{"old"});
  EXPECT_EQ(c.only_in_new, std::vector<std::string>{"new"});
}

TEST_F(BenchCompare, AFileWithoutPerRoundSamplesComparesWithoutSignificanceAndSaysSo) {
  nlohmann::json stripped = nlohmann::json::parse(run_of({cost_at("figure", 1.0, random)}));
  for (auto& r : stripped["results"]) {
    r["cudakit"].erase("samples");
    r["raw"].erase("samples");
  }
  Comparison c = compare_runs(stripped.dump(), run_of({cost_at("figure", 1.2, random)}), "old.json", "new.json");
  ASSERT_EQ(c.figures.size(), 1u);
  EXPECT_EQ(c.figures[0].significance, Significance::unknown);
  EXPECT_TRUE(std::isnan(c.figures[0].p_value));
  EXPECT_NEAR(c.figures[0].change, 0.2, 0.03) << "the change is still shown";
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_NE(c.notes[0].find("old.json has no per-round samples"), std::string::npos) << c.notes[0];
  std::string text = comparison_text(c, "old.json", "new.json");
  EXPECT_NE(text.find("significance unknown"), std::string::npos) << text;
  EXPECT_NE(text.find("note: old.json has no per-round samples"), std::string::npos) << text;
}

TEST_F(BenchCompare, AFailedFigureIsAnErrorNotAChange) {
  Comparison c = compare_runs(run_of({cost_at("graph replay", 1, random)}),
                              run_of({error_result("graph replay", "graphs", "cuGraphLaunch failed")}), "a", "b");
  ASSERT_EQ(c.figures.size(), 1u);
  EXPECT_NE(c.figures[0].error.find("cuGraphLaunch failed"), std::string::npos);
  EXPECT_EQ(c.count(Significance::worse), 0);
}

TEST_F(BenchCompare, TheTextIsAnAlignedTableWithASummary) {
  // The unchanged figure is the same samples in both runs: two fresh draws would differ
  // significantly by chance one time in 20.
  const Result unchanged = cost_at("a much longer figure name", 1.0, random);
  Comparison c = compare_runs(run_of({cost_at("event record", 1.0, random), unchanged}),
                              run_of({cost_at("event record", 1.3, random), unchanged}), "base.json", "new.json");
  std::string text = comparison_text(c, "base.json", "new.json");
  EXPECT_NE(text.find("base.json (base) against new.json (new)"), std::string::npos) << text;
  // The ratio columns start at one place on every row.
  auto column_of = [&](const std::string& row_start) {
    std::size_t row = text.find("\n  " + row_start);
    EXPECT_NE(row, std::string::npos) << row_start << "\n" << text;
    return text.find("x ", row + 3) - row;
  };
  EXPECT_EQ(column_of("event record"), column_of("a much longer figure name")) << text;
  EXPECT_NE(text.find("worse"), std::string::npos) << text;
  EXPECT_NE(text.find("compare: 2 figures, 0 better, 1 worse"), std::string::npos) << text;
}

TEST(BenchCompareInput, AFileThatIsNoBenchRunIsRefusedNamingIt) {
  const std::string good = report_json(RunInfo{}, {});
  try {
    compare_runs("{not json", good, "broken.json", "good.json");
    FAIL() << "no error";
  } catch (const CompareInputError& e) {
    EXPECT_EQ(std::string(e.what()), "broken.json is not JSON");
  }
  try {
    compare_runs(good, R"({"schema": "cudakit-peers/1"})", "good.json", "peers.json");
    FAIL() << "no error";
  } catch (const CompareInputError& e) {
    EXPECT_NE(std::string(e.what()).find("peers.json is not a cudakit bench run"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cudakit::tool::bench
