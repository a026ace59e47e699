// The cudakit command line, run in-process on the fake driver (two GPUs): each option's
// effect and each error path, with stdout and stderr captured. Errors go to stderr; with
// --json a failure is also a JSON object on stdout carrying the error and the exit code;
// `bench --json -` puts nothing but the JSON on stdout; a failed run leaves no file.
// What needs no driver at all (help, --version, parse errors, no driver) is also run as
// a user runs it, as ctest tests of the built command (tools/CMakeLists.txt).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <cstdio>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/progress.hpp"
#include "bench/registry.hpp"
#include "bench/report.hpp"
#include "cli.hpp"
#include "command.hpp"
#include "cudakit/device_buffer.hpp"
#include "cudakit/memory_pool.hpp"
#include "cudakit/stream.hpp"
#include "cudakit/version.hpp"
#include "fake_fixture.hpp"

namespace cudakit::tool {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct Ran {
  int code;
  std::string out;
  std::string err;
};

Ran run(const std::vector<std::string>& args) {
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  int code = run_command_line(args);
  std::fflush(stdout);
  Ran r{code, ::testing::internal::GetCapturedStdout(), ::testing::internal::GetCapturedStderr()};
  return r;
}

json parsed(const std::string& text) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(doc.is_discarded()) << "not one JSON document:\n" << text;
  return doc;
}

class CommandLineTest : public testing::FakeDriverTest {
 protected:
  void configure(fake::Driver& d) override {
    d.devices.resize(2);
    d.devices[0].name = "First Fake GPU";
    d.devices[1].name = "Second Fake GPU";
    d.devices[1].major = 8;
    d.devices[1].minor = 6;
  }
  void SetUp() override {
    FakeDriverTest::SetUp();
    dir_ = fs::temp_directory_path() / ("cudakit-cli-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    fs::remove_all(dir_);
    FakeDriverTest::TearDown();
  }
  std::vector<std::string> files_in_scratch() {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
    return names;
  }
  fs::path dir_;
};

TEST_F(CommandLineTest, InfoDescribesEveryDevice) {
  Ran r = run({"info"});
  EXPECT_EQ(r.code, exit_ok) << r.err;
  EXPECT_NE(r.out.find("cudakit " CUDAKIT_VERSION_STRING "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[0] First Fake GPU"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[1] Second Fake GPU"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");
}

TEST_F(CommandLineTest, InfoDeviceDescribesOnlyThatDevice) {
  Ran r = run({"info", "--device", "1"});
  EXPECT_EQ(r.code, exit_ok) << r.err;
  EXPECT_NE(r.out.find("[1] Second Fake GPU"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("8.6 (sm_86)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("[0]"), std::string::npos) << r.out;
}

TEST_F(CommandLineTest, InfoJsonIsOneDocumentWithTheVersionAndEveryDevice) {
  Ran r = run({"info", "--json"});
  EXPECT_EQ(r.code, exit_ok) << r.err;
  json doc = parsed(r.out);
  EXPECT_EQ(doc["cudakit_version"], CUDAKIT_VERSION_STRING);
  EXPECT_EQ(doc["device_count"], 2);
  ASSERT_EQ(doc["devices"].size(), 2u);
  EXPECT_EQ(doc["devices"][1]["name"], "Second Fake GPU");
  EXPECT_EQ(doc["devices"][1]["compute_capability"], "8.6");
  EXPECT_EQ(r.err, "");
}

TEST_F(CommandLineTest, InfoShowsTheTopologyAsTextAndJson) {
  Ran r = run({"info"});
  EXPECT_EQ(r.code, exit_ok) << r.err;
  EXPECT_NE(r.out.find("topology (from -> to: peer access, performance rank (0 best), native atomics, link):"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("    0 -> 1  access yes  rank 0  atomics yes  "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("    numa                host node 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nnccl: "), std::string::npos) << r.out;
  json doc = parsed(run({"info", "--json"}).out);
  ASSERT_EQ(doc["topology"]["links"].size(), 2u);
  EXPECT_EQ(doc["topology"]["links"][1]["from"], 1);
  EXPECT_EQ(doc["topology"]["links"][1]["peer_access"], true);
  EXPECT_EQ(doc["devices"][1]["placement"]["pci_bus"], 0x1a);
  EXPECT_TRUE(doc["nccl"].contains("available"));
}

TEST_F(CommandLineTest, InfoMemoryShowsEachDefaultPoolsBytesAndAllocations) {
  Stream s(Device::get(0));
  DeviceBuffer<char> a(s, 3000, uninitialized), b(s, 5000, zeroed);
  { DeviceBuffer<char> gone(s, 700, uninitialized); }
  s.synchronize();
  Ran r = run({"info", "--memory", "--json"});
  EXPECT_EQ(r.code, exit_ok) << r.err;
  json doc = parsed(r.out);
  const json& pool = doc["devices"][0]["memory_pool"];
  EXPECT_EQ(pool["supported"], true);
  EXPECT_EQ(pool["used_bytes"], 8000u);
  EXPECT_EQ(pool["used_high_bytes"], 8700u);
  EXPECT_EQ(pool["reserved_bytes"], 8700u);
  EXPECT_EQ(pool["live_allocations"], 2u);
  EXPECT_EQ(pool["allocations_made"], 3u);
  EXPECT_EQ(pool["release_threshold_bytes"], keep_all_pool_memory);
  EXPECT_EQ(doc["devices"][1]["memory_pool"]["live_allocations"], 0u);
  Ran text = run({"info", "--memory", "--device", "0"});
  EXPECT_EQ(text.code, exit_ok) << text.err;
  EXPECT_NE(text.out.find("    memory pool         release threshold keep all\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("reserved 8700 B (peak 8700 B), in use 8000 B (peak 8700 B)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("allocations by cudakit: 2 live, 3 made in this process"), std::string::npos) << text.out;
}

TEST_F(CommandLineTest, ADeviceThatDoesNotExistExitsThreeNamingTheDevicesThereAre) {
  Ran r = run({"info", "--device", "5"});
  EXPECT_EQ(r.code, exit_usage);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "cudakit info: there is no device 5: the driver reports 2 devices (0 to 1) (see cudakit info --help)\n");
}

TEST_F(CommandLineTest, WithJsonAFailureIsAlsoAJsonObjectOnStdout) {
  Ran r = run({"info", "--json", "--device", "5"});
  EXPECT_EQ(r.code, exit_usage);
  json doc = parsed(r.out);
  EXPECT_EQ(doc["exit_code"], exit_usage);
  EXPECT_EQ(doc["command"], "info");
  EXPECT_NE(doc["error"].get<std::string>().find("there is no device 5"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("there is no device 5"), std::string::npos) << "errors go to stderr as well";
}

TEST_F(CommandLineTest, AParseErrorWithJsonIsAJsonObjectToo) {
  Ran r = run({"bench", "--json", "-", "--rounds", "zero"});
  EXPECT_EQ(r.code, exit_usage);
  EXPECT_EQ(parsed(r.out)["exit_code"], exit_usage);
  EXPECT_NE(r.err.find("cudakit bench: "), std::string::npos) << r.err;
}

TEST_F(CommandLineTest, BenchJsonToStdoutPrintsOnlyTheJsonThereAndTheTableOnStderr) {
  Ran r = run({"bench", "--filter", "event record", "--rounds", "3", "--json", "-"});
  EXPECT_EQ(r.code == exit_ok || r.code == exit_check_failed, true) << r.err;
  json doc = parsed(r.out);
  EXPECT_EQ(doc["schema"], "cudakit-bench/1");
  EXPECT_EQ(doc["cudakit_version"], CUDAKIT_VERSION_STRING);
  EXPECT_EQ(doc["rounds"], 3);
  ASSERT_FALSE(doc["results"].empty());
  for (const json& result : doc["results"]) {
    EXPECT_EQ(result["cudakit"]["samples"].size(), 3u) << "--rounds 3: three timed rounds, " << result["name"];
    EXPECT_EQ(result["raw"]["samples"].size(), 3u) << result["name"];
  }
  EXPECT_NE(r.err.find("ratio"), std::string::npos) << "the table goes to stderr:\n" << r.err;
}

TEST_F(CommandLineTest, BenchDeviceRunsOnThatDevice) {
  Ran r = run({"bench", "--filter", "stream create", "--quick", "--device", "1", "--json", "-"});
  json doc = parsed(r.out);
  EXPECT_EQ(doc["gpu"]["ordinal"], 1);
  EXPECT_EQ(doc["gpu"]["name"], "Second Fake GPU");
  EXPECT_TRUE(doc["quick"].get<bool>());
}

TEST_F(CommandLineTest, BenchWritesItsFilesWhenTheRunFinishesAndLeavesNothingElse) {
  fs::path json_file = dir_ / "run.json", svg = dir_ / "run.svg";
  Ran r = run({"bench", "--filter", "event query", "--quick", "--json", json_file.string(), "--plot", svg.string()});
  EXPECT_EQ(r.code == exit_ok || r.code == exit_check_failed, true) << r.err;
  std::ifstream in(json_file);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(parsed(text)["results"].empty(), false);
  EXPECT_GT(fs::file_size(svg), 0u);
  auto names = files_in_scratch();
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"run.json", "run.svg"})) << "no probe or partial file is left behind";
  EXPECT_NE(r.out.find("ratio"), std::string::npos) << "the table goes to stdout";
}

TEST_F(CommandLineTest, AFailedBenchLeavesNoFileAndKeepsAnOldOne) {
  fs::path json_file = dir_ / "run.json", svg = dir_ / "new.svg";
  { std::ofstream(json_file) << "{\"previous\": true}\n"; }
  Ran r = run({"bench", "--device", "7", "--json", json_file.string(), "--plot", svg.string()});
  EXPECT_EQ(r.code, exit_usage);
  EXPECT_FALSE(fs::exists(svg));
  std::ifstream in(json_file);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "{\"previous\": true}\n") << "a failed run does not touch the last good result";
  EXPECT_EQ(files_in_scratch().size(), 1u);
}

TEST_F(CommandLineTest, BenchIntoAFolderThatDoesNotExistExitsThreeBeforeRunning) {
  fs::path missing = dir_ / "no-such-folder" / "run.json";
  Ran r = run({"bench", "--filter", "event record", "--json", missing.string()});
  EXPECT_EQ(r.code, exit_usage);
  EXPECT_NE(r.err.find("cannot write " + missing.string()), std::string::npos) << r.err;
  EXPECT_EQ(parsed(r.out)["exit_code"], exit_usage);
  EXPECT_EQ(r.err.find("ratio"), std::string::npos) << "nothing ran";
}

TEST_F(CommandLineTest, BenchRoundsMustBePositive) {
  EXPECT_EQ(run({"bench", "--rounds", "0"}).code, exit_usage);
  EXPECT_EQ(run({"bench", "--rounds", "-3"}).code, exit_usage);
  Ran zero = run({"bench", "--rounds", "0"});
  EXPECT_NE(zero.err.find("--rounds: must be at least 1, not 0"), std::string::npos) << zero.err;
}

TEST_F(CommandLineTest, AnIntegerOptionGivenTextSaysItMustBeAnInteger) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"bench", "--rounds", "abc"},
                                               {"bench", "--device", "x"}, {"info", "--device", "1.5"},
                                               {"doctor", "--device", "two"}}) {
    Ran r = run(args);
    EXPECT_EQ(r.code, exit_usage) << args[1];
    EXPECT_NE(r.err.find(args[1] + ": must be an integer, not '" + args[2] + "'"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("not in range"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

std::size_t occurrences(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST_F(CommandLineTest, AFilterMatchingNothingGivesOneHint) {
  Ran r = run({"bench", "--filter", "nosuch"});
  EXPECT_EQ(r.code, exit_usage);
  EXPECT_EQ(r.err, "cudakit bench: no benchmark matches (see cudakit bench --list)\n");
  EXPECT_EQ(occurrences(r.err, "see "), 1u);
}

// A benchmark that yields fixed results, in the registry while it lives.
class ScopedBenchmark {
 public:
  ScopedBenchmark(std::string name, std::vector<bench::Result> results) {
    bench::benchmarks().push_back({std::move(name), "verdict-test", bench::QuickRun::skip,
                                   [results](const bench::Context&) { return results; }});
  }
  ~ScopedBenchmark() { bench::benchmarks().pop_back(); }
  ScopedBenchmark(const ScopedBenchmark&) = delete;
  ScopedBenchmark& operator=(const ScopedBenchmark&) = delete;
};

// 41 rounds whose per-round ratios are `centre` ± `half_width`, evenly spread (in a
// shuffled order), against one raw time drawn fresh: the ratio of medians is `centre`.
bench::Result cost_with_ratios(const std::string& name, double centre, double half_width) {
  std::mt19937 random(std::random_device{}());
  const double raw_time = std::uniform_real_distribution<double>(1e-6, 3e-6)(random);
  std::vector<int> order(41);
  for (int i = 0; i < 41; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), random);
  bench::PairedSamples seconds;
  for (int i : order) {
    seconds.raw.push_back(raw_time);
    seconds.cudakit.push_back(raw_time * (centre - half_width + 2 * half_width * i / 40.0));
  }
  return bench::cost_result(name, "verdict-test", seconds, 1.05);
}

TEST_F(CommandLineTest, BenchExitsZeroWhenTargetsAreMetOrWithinNoise) {
  ScopedBenchmark b("verdict-test ok", {cost_with_ratios("met", 1.00, 0.02), cost_with_ratios("noisy", 1.06, 0.10)});
  Ran r = run({"bench", "--filter", "verdict-test", "--json", "-"});
  EXPECT_EQ(r.code, exit_ok) << r.err;
  json doc = parsed(r.out);
  ASSERT_EQ(doc["results"].size(), 2u);
  EXPECT_EQ(doc["results"][0]["verdict"], "met");
  EXPECT_EQ(doc["results"][1]["verdict"], "within noise");
  EXPECT_LT(doc["results"][1]["ratio_interval"]["low"].get<double>(), 1.05);
  EXPECT_GT(doc["results"][1]["ratio_interval"]["high"].get<double>(), 1.05);
  EXPECT_TRUE(doc["passed"].get<bool>());
  EXPECT_NE(r.err.find("within noise"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("2 targets: 1 met, 1 within noise, 0 missed"), std::string::npos) << r.err;
}

TEST_F(CommandLineTest, BenchExitsOneWhenATargetIsMissedOrABenchmarkFails) {
  {
    ScopedBenchmark b("verdict-test miss", {cost_with_ratios("met", 1.00, 0.02), cost_with_ratios("slow", 1.20, 0.05)});
    Ran r = run({"bench", "--filter", "verdict-test"});
    EXPECT_EQ(r.code, exit_check_failed) << r.err;
    EXPECT_NE(r.out.find("MISSED"), std::string::npos) << r.out;
  }
  {
    ScopedBenchmark b("verdict-test error", {bench::error_result("broken", "verdict-test", "boom")});
    EXPECT_EQ(run({"bench", "--filter", "verdict-test"}).code, exit_check_failed);
  }
}

TEST_F(CommandLineTest, BenchShowsNoProgressWhenStderrIsNoTerminal) {
  ScopedBenchmark b("verdict-test progress", {cost_with_ratios("met", 1.00, 0.02)});
  Ran r = run({"bench", "--filter", "verdict-test"});
  EXPECT_EQ(r.err.find("[1/1]"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("\033"), std::string::npos) << "no escape codes into a file";
  EXPECT_EQ(r.out.find("\033"), std::string::npos);
}

std::string file_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

TEST(BenchProgress, OnATerminalItShowsEachBenchmarkAndErasesItsLine) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  bench::Progress progress(out, true);
  progress.running(1, 5, "graph replay");
  progress.clear();
  progress.clear();  // a second clear writes nothing more
  std::rewind(out);
  char buffer[128] = {};
  std::size_t n = std::fread(buffer, 1, sizeof buffer - 1, out);
  std::fclose(out);
  EXPECT_EQ(std::string(buffer, n), "\r\033[K[2/5] graph replay ...\r\033[K");
}

TEST(BenchProgress, OffATerminalItWritesNothing) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  bench::Progress progress(out, false);
  progress.running(0, 1, "event record");
  progress.clear();
  EXPECT_EQ(std::ftell(out), 0L);
  std::fclose(out);
}

// Two runs of fixed figures written as report files, for --compare.
void write_run(const fs::path& path, const std::vector<bench::Result>& results) {
  std::ofstream(path) << bench::report_json(bench::RunInfo{}, results);
}

TEST_F(CommandLineTest, BenchCompareShowsEachChangeAndExitsOneOnlyWhenAFigureGotWorse) {
  fs::path base = dir_ / "base.json", same = dir_ / "same.json", worse = dir_ / "worse.json";
  write_run(base, {cost_with_ratios("event record", 1.00, 0.02), cost_with_ratios("launch", 1.00, 0.02)});
  write_run(same, {cost_with_ratios("event record", 1.00, 0.02), cost_with_ratios("launch", 0.90, 0.02)});
  write_run(worse, {cost_with_ratios("event record", 1.20, 0.02), cost_with_ratios("launch", 1.00, 0.02)});

  Ran better = run({"bench", "--compare", base.string(), same.string()});
  EXPECT_EQ(better.code, exit_ok) << better.err;
  EXPECT_NE(better.out.find("launch"), std::string::npos) << better.out;
  EXPECT_NE(better.out.find("better"), std::string::npos) << better.out;
  EXPECT_NE(better.out.find("-10.0%"), std::string::npos) << better.out;

  Ran regressed = run({"bench", "--compare", base.string(), worse.string()});
  EXPECT_EQ(regressed.code, exit_check_failed) << regressed.err;
  EXPECT_NE(regressed.out.find("+20.0%"), std::string::npos) << regressed.out;
  EXPECT_NE(regressed.out.find("worse"), std::string::npos) << regressed.out;
  EXPECT_EQ(regressed.err, "");
}

TEST_F(CommandLineTest, BenchCompareWithAnOldFileWithoutSamplesSaysSo) {
  fs::path old_file = dir_ / "old.json", fresh = dir_ / "new.json";
  write_run(fresh, {cost_with_ratios("event record", 1.00, 0.02)});
  json stripped = json::parse(file_text(fresh));
  stripped["results"][0]["cudakit"].erase("samples");
  stripped["results"][0]["raw"].erase("samples");
  std::ofstream(old_file) << stripped.dump();
  Ran r = run({"bench", "--compare", old_file.string(), fresh.string()});
  EXPECT_EQ(r.code, exit_ok) << r.err;
  EXPECT_NE(r.out.find("note: " + old_file.string() + " has no per-round samples"), std::string::npos) << r.out;
}

TEST_F(CommandLineTest, BenchCompareOfAMissingOrForeignFileExitsThree) {
  fs::path good = dir_ / "good.json", foreign = dir_ / "foreign.json";
  write_run(good, {});
  std::ofstream(foreign) << "{\"schema\": \"cudakit-peers/1\"}";
  Ran missing = run({"bench", "--compare", (dir_ / "nope.json").string(), good.string()});
  EXPECT_EQ(missing.code, exit_usage);
  EXPECT_NE(missing.err.find("cannot read " + (dir_ / "nope.json").string()), std::string::npos) << missing.err;
  Ran wrong = run({"bench", "--compare", good.string(), foreign.string()});
  EXPECT_EQ(wrong.code, exit_usage);
  EXPECT_NE(wrong.err.find("is not a cudakit bench run"), std::string::npos) << wrong.err;
  EXPECT_EQ(run({"bench", "--compare", good.string()}).code, exit_usage) << "two files";
  Ran with_list = run({"bench", "--compare", good.string(), good.string(), "--list"});
  EXPECT_EQ(with_list.code, exit_usage);
  EXPECT_NE(with_list.err.find("--compare takes no --list, --json or --plot"), std::string::npos) << with_list.err;
}

TEST_F(CommandLineTest, BenchListNeedsNoDeviceAndShowsGroupsAndTheQuickSet) {
  Ran r = run({"bench", "--list", "--filter", "events"});
  EXPECT_EQ(r.code, exit_ok);
  EXPECT_NE(r.out.find("event record"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("quick"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("pinned"), std::string::npos) << "--filter narrows the list:\n" << r.out;
}

TEST_F(CommandLineTest, BenchListIsAlignedColumnsUnderAHeader) {
  Ran r = run({"bench", "--list"});
  ASSERT_EQ(r.code, exit_ok);
  json list = parsed(run({"bench", "--list", "--json", "-"}).out);
  std::istringstream lines(r.out);
  std::string header;
  std::getline(lines, header);
  ASSERT_EQ(header.rfind("name ", 0), 0u) << header;
  const std::size_t group_column = header.find("group"), quick_column = header.find("quick run");
  ASSERT_NE(group_column, std::string::npos);
  ASSERT_NE(quick_column, std::string::npos);
  std::size_t rows = 0;
  for (std::string line; std::getline(lines, line); ++rows) {
    ASSERT_LT(rows, list.size()) << line;
    const json& b = list[rows];
    const std::string name = b["name"], group = b["group"];
    EXPECT_EQ(line.substr(0, name.size()), name);
    EXPECT_EQ(line.substr(group_column, group.size()), group) << "every group starts in one column:\n" << r.out;
    EXPECT_EQ(line[group_column - 1], ' ') << "two spaces at least between the columns: " << line;
    EXPECT_EQ(line[group_column - 2], ' ') << line;
    if (b["quick"].get<bool>()) EXPECT_EQ(line.substr(quick_column), "yes") << line;
    else EXPECT_EQ(line.size(), group_column + group.size()) << "no trailing blanks: '" << line << "'";
  }
  EXPECT_EQ(rows, list.size());
}

TEST_F(CommandLineTest, BenchListAsJsonIsAnArrayOfNameGroupAndQuick) {
  Ran r = run({"bench", "--list", "--json", "-", "--filter", "events"});
  EXPECT_EQ(r.code, exit_ok) << r.err;
  json list = parsed(r.out);
  ASSERT_TRUE(list.is_array());
  ASSERT_FALSE(list.empty());
  bool found = false;
  for (const json& b : list) {
    EXPECT_EQ(b["group"], "events");
    EXPECT_TRUE(b["quick"].is_boolean());
    found = found || (b["name"] == "event record" && b["quick"].get<bool>());
  }
  EXPECT_TRUE(found) << r.out;
  fs::path file = dir_ / "list.json";
  EXPECT_EQ(run({"bench", "--list", "--json", file.string()}).code, exit_ok);
  EXPECT_TRUE(parsed(file_text(file)).is_array()) << "--json FILE writes the list there";
}

TEST_F(CommandLineTest, BenchGroupNamesHaveNoSpacesAndTheOldSpellingStillFilters) {
  json list = parsed(run({"bench", "--list", "--json", "-"}).out);
  for (const json& b : list) EXPECT_EQ(b["group"].get<std::string>().find(' '), std::string::npos) << b;
  json declared = parsed(run({"bench", "--list", "--json", "-", "--filter", "declared work"}).out);
  bool group_found = false;
  for (const json& b : declared) group_found = group_found || b["group"] == "declared-work";
  EXPECT_TRUE(group_found) << declared;
  json phases = parsed(run({"bench", "--list", "--json", "-", "--filter", "idiom phases"}).out);
  EXPECT_FALSE(phases.empty());
  for (const json& b : phases) EXPECT_EQ(b["group"], "idiom-phases");
}

TEST_F(CommandLineTest, DoctorDeviceThatDoesNotExistExitsThree) {
  Ran r = run({"doctor", "--no-perf", "--device", "4"});
  EXPECT_EQ(r.code, exit_usage);
  EXPECT_NE(r.err.find("there is no device 4"), std::string::npos) << r.err;
}

TEST_F(CommandLineTest, VersionAndHelpExitZeroOnStdout) {
  Ran version = run({"--version"});
  EXPECT_EQ(version.code, exit_ok);
  EXPECT_EQ(version.out, "cudakit " CUDAKIT_VERSION_STRING "\n");
  for (const char* command : {"info", "doctor", "bench"}) {
    Ran help = run({command, "--help"});
    EXPECT_EQ(help.code, exit_ok) << command;
    EXPECT_NE(help.out.find("--device"), std::string::npos) << command << ":\n" << help.out;
    EXPECT_EQ(help.err, "") << command;
  }
}

std::string after(const std::string& text, const std::string& marker) {
  std::size_t at = text.find(marker);
  return at == std::string::npos ? "" : text.substr(at);
}

TEST_F(CommandLineTest, EveryCommandsHelpListsItsExitCodesAndEnvironment) {
  Ran bench = run({"bench", "--help"});
  std::string codes = after(bench.out, "exit codes:");
  for (const char* line : {"  0  no target missed", "  1  a target missed", "  2  no usable CUDA driver",
                           "  3  bad command line", "  4  unexpected internal error"})
    EXPECT_NE(codes.find(line), std::string::npos) << line << " in:\n" << bench.out;
  std::string environment = after(bench.out, "environment:");
  for (const char* variable :
       {"CUDAKIT_LIBCUDA", "CUDAKIT_LIBCUBLAS", "CUDAKIT_LIBNCCL", "CUDA_FORCE_PTX_JIT", "NO_COLOR", "CUDAKIT_NVTX"})
    EXPECT_NE(environment.find(variable), std::string::npos) << variable << " in:\n" << bench.out;

  Ran info = run({"info", "--help"});
  std::string info_codes = after(info.out, "exit codes:");
  EXPECT_NE(info_codes.find("  2  "), std::string::npos) << info.out;
  EXPECT_NE(info_codes.find("  4  "), std::string::npos) << info.out;
  EXPECT_EQ(info_codes.find("  1  "), std::string::npos) << "info has no check to fail:\n" << info.out;
  EXPECT_EQ(info.out.find("benchmark"), std::string::npos) << info.out;
  EXPECT_NE(after(info.out, "environment:").find("CUDAKIT_LIBCUDA"), std::string::npos) << info.out;

  Ran doctor = run({"doctor", "--help"});
  EXPECT_NE(after(doctor.out, "exit codes:").find("  1  a check failed"), std::string::npos) << doctor.out;
  EXPECT_NE(after(doctor.out, "environment:").find("CUDAKIT_LIBNVRTC"), std::string::npos) << doctor.out;
}

TEST_F(CommandLineTest, HelpCommandPrintsTheSameHelpAsTheOption) {
  Ran top = run({"help"});
  EXPECT_EQ(top.code, exit_ok);
  EXPECT_EQ(top.out, run({"--help"}).out);
  EXPECT_NE(top.out.find("help"), std::string::npos) << "help lists itself";
  for (const char* command : {"info", "doctor", "bench"}) {
    Ran via_help = run({"help", command});
    EXPECT_EQ(via_help.code, exit_ok) << command;
    EXPECT_EQ(via_help.out, run({command, "--help"}).out) << command;
    EXPECT_EQ(via_help.err, "");
  }
  Ran itself = run({"help", "help"});
  EXPECT_EQ(itself.code, exit_ok);
  EXPECT_NE(itself.out.find("COMMAND"), std::string::npos) << itself.out;
}

TEST_F(CommandLineTest, HelpForAnUnknownCommandExitsThreeWithOneHint) {
  Ran r = run({"help", "frobnicate"});
  EXPECT_EQ(r.code, exit_usage);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "cudakit help: unknown command 'frobnicate' (see cudakit --help)\n");
}

TEST_F(CommandLineTest, UnknownCommandsAndOptionsExitThreeOnStderr) {
  Ran command = run({"frobnicate"});
  EXPECT_EQ(command.code, exit_usage);
  EXPECT_EQ(command.out, "");
  EXPECT_EQ(command.err, "cudakit: unknown command 'frobnicate' (see cudakit --help)\n");
  Ran option = run({"doctor", "--frobnicate"});
  EXPECT_EQ(option.code, exit_usage);
  EXPECT_NE(option.err.find("cudakit doctor: "), std::string::npos) << option.err;
  EXPECT_NE(option.err.find("--frobnicate"), std::string::npos) << option.err;
}

TEST(ColorChoice, OnlyOnATerminalAndNeverWithNoColorSet) {
  EXPECT_TRUE(color_wanted(true, nullptr));
  EXPECT_TRUE(color_wanted(true, "")) << "NO_COLOR set but empty does not count";
  EXPECT_FALSE(color_wanted(true, "1"));
  EXPECT_FALSE(color_wanted(true, "0")) << "any non-empty value turns colour off";
  EXPECT_FALSE(color_wanted(false, nullptr));
}

}  // namespace
}  // namespace cudakit::tool
