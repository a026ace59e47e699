// The performance figures that README.md and bench/results/README.md quote are the
// committed baseline's (bench/results/<version>/: bench.json, peers.json, baseline.json,
// and decoder.json where the decoder workload was run). The results stay curated: one
// baseline per release and nothing else, an index of about 150 lines at most, under 1 MB
// in all.
//
// Every figure with a unit of speed or cost ("1.131x", "0.656 µs", "55.45 GB/s",
// "16017 requests/s", "48211 tokens/s", "76 ns", and each member of
// "0.956 / 0.994 / 0.999x") must equal, at the precision it is printed with, a number in
// the baseline's files: a median, a ratio or its inverse, a difference of the two
// medians, or any number of peers.json, baseline.json and decoder.json. A figure from
// anywhere else (a short doctor run, an older run, a typo) fails, naming the file, the
// line and the figure.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path source_dir = CUDAKIT_SOURCE_DIR;

std::string read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The newest baseline: the folder under bench/results/ with the highest version.
fs::path newest_baseline() {
  fs::path best;
  std::vector<int> best_version;
  for (const auto& entry : fs::directory_iterator(source_dir / "bench/results")) {
    if (!entry.is_directory()) continue;
    std::vector<int> version;
    std::stringstream parts(entry.path().filename().string());
    std::string part;
    bool numeric = true;
    while (std::getline(parts, part, '.')) {
      numeric = numeric && !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
      if (numeric) version.push_back(std::stoi(part));
    }
    if (numeric && version > best_version) best_version = version, best = entry.path();
  }
  return best;
}

void every_number(const json& value, std::vector<double>& out) {
  if (value.is_number()) out.push_back(value.get<double>());
  else if (value.is_structured())
    for (const auto& item : value) every_number(item, out);
}

// The figures of one `cudakit bench` run: each side's median, their differences, the
// ratio and its inverse, and the per-round ratios' median and 10th and 90th percentiles.
void bench_run_numbers(const json& bench, std::vector<double>& numbers) {
  for (const json& r : bench["results"]) {
    if (!r["cudakit"]["median"].is_number() || !r["raw"]["median"].is_number()) continue;
    double c = r["cudakit"]["median"], raw = r["raw"]["median"];
    numbers.insert(numbers.end(), {c, raw, c - raw, raw - c, (c - raw) * 1000, (raw - c) * 1000});
    if (r["ratio"].is_number() && r["ratio"].get<double>() > 0) {
      numbers.push_back(r["ratio"]);
      numbers.push_back(1 / r["ratio"].get<double>());
    }
    if (r.contains("round_ratio") && r["round_ratio"].is_object())
      for (const char* key : {"median", "p10", "p90"})
        if (r["round_ratio"][key].is_number()) numbers.push_back(r["round_ratio"][key]);
  }
}

std::vector<double> baseline_numbers(const fs::path& folder) {
  std::vector<double> numbers;
  bench_run_numbers(json::parse(read(folder / "bench.json")), numbers);
  every_number(json::parse(read(folder / "peers.json")), numbers);
  // Also the figures, intervals and verdicts of the later runs, whose files are not kept.
  every_number(json::parse(read(folder / "baseline.json")), numbers);
  // The decoder workload beside PyTorch (bench/decoder_compare.py), once it has been run.
  if (fs::exists(folder / "decoder.json")) every_number(json::parse(read(folder / "decoder.json")), numbers);
  return numbers;
}

struct Quoted {
  int line;
  std::string text;   // the number as printed
  std::string group;  // the figure it is part of
};

// "1.009 / 1.020 / 1.002x", "0.656 µs", "4152 GB/s", "16017 requests/s": each number of
// the group. Ratios ("x") count only with decimals, so "22 of 24" and "2x" prose stay out.
std::vector<Quoted> quoted_figures(const std::string& text) {
  static const std::regex figure(
      R"(((?:\d+(?:\.\d+)?\s*/\s*)*\d+(?:\.\d+)?)\s*(x|µs|us|ns|GB/s|requests/s|req/s|tokens/s)(?![A-Za-z0-9]))");
  static const std::regex number(R"(\d+(?:\.\d+)?)");
  std::vector<Quoted> found;
  std::stringstream lines(text);
  std::string line;
  for (int n = 1; std::getline(lines, line); ++n) {
    for (auto it = std::sregex_iterator(line.begin(), line.end(), figure); it != std::sregex_iterator(); ++it) {
      std::string group = (*it)[1], unit = (*it)[2];
      // A ratio like "1.5x" in prose is a figure; a dimension like "1024x768" is not one.
      std::size_t after = static_cast<std::size_t>(it->position(0) + it->length(0));
      if (unit == "x" && after < line.size() && std::isdigit(static_cast<unsigned char>(line[after]))) continue;
      for (auto m = std::sregex_iterator(group.begin(), group.end(), number); m != std::sregex_iterator(); ++m) {
        std::string value = m->str();
        if (unit == "x" && value.find('.') == std::string::npos) continue;
        found.push_back({n, value, it->str()});
      }
    }
  }
  return found;
}

bool matches_at_printed_precision(const std::string& printed, const std::vector<double>& numbers) {
  std::size_t dot = printed.find('.');
  int decimals = dot == std::string::npos ? 0 : static_cast<int>(printed.size() - dot - 1);
  double value = std::stod(printed), half_unit = 0.5 * std::pow(10.0, -decimals);
  return std::any_of(numbers.begin(), numbers.end(),
                     [&](double n) { return std::fabs(n - value) <= half_unit + 1e-9 * std::max(1.0, std::fabs(n)); });
}

std::vector<std::string> figures_not_in_the_baseline(const fs::path& document) {
  std::vector<double> numbers = baseline_numbers(newest_baseline());
  std::vector<std::string> wrong;
  for (const Quoted& q : quoted_figures(read(document)))
    if (!matches_at_printed_precision(q.text, numbers))
      wrong.push_back(document.filename().string() + ":" + std::to_string(q.line) + ": " + q.text + " in '" + q.group + "'");
  return wrong;
}

std::string lines_of(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& l : v) s += "  " + l + "\n";
  return s;
}

TEST(BenchResultsFigures, TheBaselineFolderHoldsASchemaVersionedRun) {
  fs::path folder = newest_baseline();
  ASSERT_FALSE(folder.empty()) << "no bench/results/<version>/ folder";
  json bench = json::parse(read(folder / "bench.json"));
  EXPECT_EQ(bench["schema"], "cudakit-bench/1");
  EXPECT_EQ(bench["cudakit_version"], folder.filename().string());
  EXPECT_FALSE(bench["results"].empty());
  EXPECT_EQ(json::parse(read(folder / "baseline.json"))["schema"], "cudakit-baseline/1");
  EXPECT_EQ(json::parse(read(folder / "peers.json"))["schema"], "cudakit-peers/1");
  EXPECT_TRUE(fs::exists(folder / "bench.svg"));
  for (const json& r : bench["results"])
    EXPECT_TRUE(r["cudakit"]["samples"].is_array()) << r["name"] << ": `cudakit bench --compare` needs the samples";
}

TEST(BenchResultsFigures, AReleaseFolderHoldsItsBaselineAndNothingElse) {
  const std::vector<std::string> kept = {"bench.json",  "bench.svg",    "bench-requests.svg", "peers.json",
                                         "baseline.json", "decoder.json", "decoder.svg"};
  for (const auto& entry : fs::directory_iterator(newest_baseline())) {
    const std::string name = entry.path().filename().string();
    EXPECT_NE(std::find(kept.begin(), kept.end(), name), kept.end())
        << name << ": a run beside the baseline goes into the index's table (and baseline.json), not into a file";
  }
}

TEST(BenchResultsFigures, TheFolderStaysUnderOneMegabyte) {
  std::uintmax_t bytes = 0;
  for (const auto& entry : fs::recursive_directory_iterator(source_dir / "bench/results"))
    if (entry.is_regular_file()) bytes += entry.file_size();
  EXPECT_LT(bytes, 1000u * 1000u) << "bench/results holds " << bytes << " bytes";
}

TEST(BenchResultsFigures, TheIndexIsShortAndLeadsWithTheNewestRelease) {
  const std::string index = read(source_dir / "bench/results/README.md");
  EXPECT_LE(std::count(index.begin(), index.end(), '\n'), 150) << "bench/results/README.md is an index";
  const std::size_t first_section = index.find("\n## ");
  ASSERT_NE(first_section, std::string::npos);
  const std::string version = newest_baseline().filename().string();
  EXPECT_EQ(index.compare(first_section + 4, version.size(), version), 0)
      << "the first section is the newest release's figures: " << index.substr(first_section, 80);
}

TEST(BenchResultsFigures, ResultFoldersAreNamedByVersionOnly) {
  for (const auto& entry : fs::directory_iterator(source_dir / "bench/results"))
    if (entry.is_directory())
      EXPECT_TRUE(std::regex_match(entry.path().filename().string(), std::regex(R"(\d+\.\d+\.\d+)")))
          << entry.path() << ": one folder per release, named by its version";
}

TEST(BenchResultsFigures, FindsTheFiguresOfAQuotedLine) {
  auto q = quoted_figures(
      "| graph replay | 0.781 / 0.687 µs | 1.131x | 22 of 24 | 4152 GB/s | 1024x768 | 2x faster | 48211 tokens/s |");
  std::vector<std::string> texts;
  for (const auto& f : q) texts.push_back(f.text);
  EXPECT_EQ(texts, (std::vector<std::string>{"0.781", "0.687", "1.131", "4152", "48211"}));
}

TEST(BenchResultsFigures, AFigureMatchesOnlyAtItsPrintedPrecision) {
  EXPECT_TRUE(matches_at_printed_precision("1.131", {1.13109392}));
  EXPECT_TRUE(matches_at_printed_precision("1.13", {1.13109392}));
  EXPECT_FALSE(matches_at_printed_precision("1.130", {1.13109392}));
  EXPECT_FALSE(matches_at_printed_precision("1.068", {1.13109392}));
  EXPECT_TRUE(matches_at_printed_precision("4152", {4151.74878}));
}

TEST(BenchResultsFigures, EveryFigureTheReadmeQuotesIsTheBaselines) {
  auto wrong = figures_not_in_the_baseline(source_dir / "README.md");
  EXPECT_TRUE(wrong.empty()) << "figures in README.md that the baseline (" << newest_baseline()
                             << ") does not have:\n" << lines_of(wrong);
}

TEST(BenchResultsFigures, EveryFigureTheResultsIndexQuotesIsTheBaselines) {
  auto wrong = figures_not_in_the_baseline(source_dir / "bench/results/README.md");
  EXPECT_TRUE(wrong.empty()) << "figures in bench/results/README.md that the baseline does not have:\n"
                             << lines_of(wrong);
}

}  // namespace
