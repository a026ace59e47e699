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
#include <iterator>
#include <string>
#include <vector>

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
}

TEST_F(CommandLineTest, BenchListNeedsNoDeviceAndShowsGroupsAndTheQuickSet) {
  Ran r = run({"bench", "--list", "--filter", "events"});
  EXPECT_EQ(r.code, exit_ok);
  EXPECT_NE(r.out.find("event record"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("quick"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("pinned"), std::string::npos) << "--filter narrows the list:\n" << r.out;
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
