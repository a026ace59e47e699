// cudakit's names in the profiler, as a tool sees them: this program runs with NVTX's
// injection variable naming the recorder tool (nvtx_recorder.cpp), on the fake driver,
// and reads back what the tool was given. Run a second time with CUDAKIT_NVTX=0, it
// checks that cudakit then gives the tool nothing.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "cudakit/declared_work.hpp"
#include "cudakit/graph_cache.hpp"
#include "graph_fixture.hpp"

namespace cudakit {
namespace {

// Everything the recorder saw so far: nothing while NVTX has not loaded it (NVTX loads
// its tool at the first NVTX call of the process, and with CUDAKIT_NVTX=0 cudakit makes
// none).
std::string recorded() {
  const char* path = std::getenv("NVTX_INJECTION64_PATH");
  if (path == nullptr) {
    ADD_FAILURE() << "NVTX_INJECTION64_PATH is not set: run this program as ctest does";
    return "";
  }
  void* tool = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (tool == nullptr) return "";
  auto lines = reinterpret_cast<const char* (*)()>(dlsym(tool, "nvtx_recorder_lines"));
  EXPECT_NE(lines, nullptr) << "the tool has no nvtx_recorder_lines";
  std::string text = lines ? lines() : "";
  dlclose(tool);
  return text;
}

bool names_expected() {
  const char* value = std::getenv("CUDAKIT_NVTX");
  return value == nullptr || std::strcmp(value, "0") != 0;
}

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class ProfilerNames : public testing::GraphTestBase {
 protected:
  // The lines added to the recorder by `work`.
  template <class F>
  std::string recorded_during(F&& work) {
    std::size_t before = recorded().size();
    work();
    return recorded().substr(before);
  }
  // Checks that `line` arrived when names are on, and that nothing of cudakit's did when off.
  void expect_line(const std::string& lines, const std::string& line, std::size_t times = 1) {
    if (names_expected()) {
      EXPECT_EQ(occurrences(lines, line + "\n"), times) << "recorded:\n" << lines;
    } else {
      EXPECT_EQ(occurrences(lines, "cudakit"), 0u) << "CUDAKIT_NVTX=0, yet the tool was given:\n" << lines;
    }
  }
};

TEST_F(ProfilerNames, AStreamIsNamedWhenCreated) {
  std::string lines = recorded_during([&] { Stream s(dev()); });
  if (names_expected()) {
    EXPECT_NE(lines.find("stream cudakit stream "), std::string::npos) << lines;
    EXPECT_NE(lines.find(" (device 0)\n"), std::string::npos) << lines;
  } else {
    EXPECT_EQ(lines, "");
  }
}

TEST_F(ProfilerNames, ACaptureIsOneRangeFromBeginToEnd) {
  Stream s(dev());
  DeviceBuffer<float> b(s, 16, zeroed);
  std::string lines = recorded_during([&] {
    Capture capture(s);
    fill(b, s, 1.0f);
    auto graph = capture.end();
  });
  expect_line(lines, "push cudakit: capture");
  if (names_expected()) EXPECT_EQ(occurrences(lines, "pop cudakit\n"), occurrences(lines, "push cudakit"));
}

TEST_F(ProfilerNames, TheGraphCacheMarksCapturesHitsAndUpdates) {
  Stream s(dev());
  DeviceBuffer<float> b(s, 16, zeroed);
  GraphCache<int> cache;
  auto work = [&](StreamRef stream) { fill(b, stream, 2.0f); };
  std::string first = recorded_during([&] { cache.run(s, 7, work); });
  expect_line(first, "push cudakit: graph cache: capture");
  std::string hits = recorded_during([&] {
    cache.run(s, 7, work);
    cache.run(s, 7, work);
  });
  expect_line(hits, "push cudakit: graph cache: hit", 2);
  std::string update = recorded_during([&] { cache.update_and_run(s, 7, work); });
  expect_line(update, "push cudakit: graph cache: update");
  s.synchronize();
}

TEST_F(ProfilerNames, DeclaredWorkIsARange) {
  Stream s(dev());
  DeviceBuffer<float> a(s, 16, zeroed), b(s, 16, uninitialized);
  std::string lines = recorded_during([&] {
    enqueue(s, reads(a), writes(b), [&](CUstream h) {
      ASSERT_EQ(driver::cu.MemcpyDtoDAsync(b.device_pointer(), a.device_pointer(), a.size_bytes(), h), CUDA_SUCCESS);
    });
  });
  expect_line(lines, "push cudakit: declared work");
  s.synchronize();
}

}  // namespace
}  // namespace cudakit
