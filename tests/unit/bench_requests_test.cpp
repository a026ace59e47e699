// The request benchmarks (tools/cudakit/bench_concurrency.cpp, bench_idiom_phases.cpp)
// run end to end on the fake driver, with host-run kernels of the same names: every arm
// serves requests, every output matches the host reference, every judged figure has its
// target, and nothing leaks or hangs. The numbers mean nothing here.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bench/registry.hpp"
#include "fake_fixture.hpp"
#include "fake_modules.hpp"
#include "request_scenario.hpp"

#ifdef CUDAKIT_HAVE_TEST_KERNELS

namespace cudakit::tool::bench {
namespace {

// out[i] = a[i] + b[i], and out[i] = in[i] * scale + offset, as the test kernels do.
fake::FakeImage request_kernels() {
  fake::FakeImage image;
  image.kernels.push_back({"add_arrays", fake::params<const float*, const float*, float*, int>(),
                           [](const fake::FakeLaunch& l) {
                             auto* a = l.param<const float*>(0);
                             auto* b = l.param<const float*>(1);
                             auto* out = l.param<float*>(2);
                             auto n = l.param<int>(3);
                             l.read(a, n * sizeof(float));
                             l.read(b, n * sizeof(float));
                             l.write(out, n * sizeof(float));
                             for (int i = 0; i < n; ++i) out[i] = a[i] + b[i];
                           }});
  image.kernels.push_back({"scale_offset", fake::params<const float*, float*, float, float, int>(),
                           [](const fake::FakeLaunch& l) {
                             auto* in = l.param<const float*>(0);
                             auto* out = l.param<float*>(1);
                             auto scale = l.param<float>(2);
                             auto offset = l.param<float>(3);
                             auto n = l.param<int>(4);
                             l.read(in, n * sizeof(float));
                             l.write(out, n * sizeof(float));
                             for (int i = 0; i < n; ++i) out[i] = in[i] * scale + offset;
                           }});
  return image;
}

class RequestBenchmarks : public testing::FakeDriverTest {
 protected:
  void SetUp() override {
    FakeDriverTest::SetUp();
    requests::set_kernel_image_for_testing(fake::fatbin_image(fake::add_image(request_kernels()), {90}, {}));
  }
  void TearDown() override {
    requests::set_kernel_image_for_testing({});
    FakeDriverTest::TearDown();
  }

  static Context smoke() { return Context{.device = Device::get(0), .quick = true, .smoke = true}; }

  std::vector<Result> run(const std::string& name) {
    auto chosen = select(benchmarks(), {name}, false);
    EXPECT_EQ(chosen.size(), 1u) << name;
    if (chosen.size() != 1) return {};
    return run_guarded(chosen[0], smoke());
  }
};

bool has(const std::vector<Result>& results, const std::string& part) {
  return std::any_of(results.begin(), results.end(),
                     [&](const Result& r) { return r.name.find(part) != std::string::npos; });
}

int smoke_rounds() { return Context{.device = Device::get(0), .quick = true, .smoke = true}.interleave(1).rounds; }

// The quick run of a scenario: the cold first requests (reported), then for shared and
// per-thread weights the four judged pairs and the four reported ones; every output right.
void expect_quick_scenario(const std::vector<Result>& results, const std::string& threads) {
  ASSERT_EQ(results.size(), 18u);
  const std::size_t rounds = static_cast<std::size_t>(smoke_rounds());
  for (std::size_t i = 0; i < 2; ++i) {
    const Result& r = results[i];
    EXPECT_EQ(r.error, "") << r.name;
    EXPECT_NE(r.name.find(threads + ": first request on a fresh thread, staging released"), std::string::npos) << r.name;
    EXPECT_EQ(r.unit, "us");
    EXPECT_EQ(r.target_ratio, 0.0);
  }
  const char* variants[] = {", shared weights: ", ", weights per thread: "};
  for (std::size_t v = 0; v < 2; ++v) {
    const Result* judged = &results[2 + 8 * v];
    const char* pairs[] = {"README idiom vs raw pageable",
                           "README idiom vs raw staged",
                           "README idiom vs raw pinned",
                           "raw staged vs raw pinned",
                           "cudakit pinned vs raw pinned",
                           "README idiom, every output kept vs raw staged, every output kept",
                           "README idiom, every output kept vs raw pinned",
                           "raw pageable, every output kept vs raw pinned"};
    const double targets[] = {1.0, 0.95, 0.0, 0.0, 0.98, 0.95, 0.0, 0.0};
    for (int p = 0; p < 8; ++p) {
      const Result& r = judged[p];
      EXPECT_EQ(r.error, "") << r.name;
      EXPECT_EQ(r.name.rfind(threads + variants[v] + pairs[p], 0), 0u) << r.name;
      EXPECT_NE(r.name.find(", 0 of "), std::string::npos) << "every output was right: " << r.name;
      EXPECT_DOUBLE_EQ(r.target_ratio, targets[p]) << r.name;
      EXPECT_EQ(r.unit, "requests/s");
      EXPECT_EQ(r.cudakit.size(), rounds) << r.name;
      EXPECT_EQ(r.raw.size(), rounds) << r.name;
    }
  }
}

TEST_F(RequestBenchmarks, TheOneThreadScenarioJudgesTheIdiomBesideEveryRawArm) {
  expect_quick_scenario(run("concurrent requests, 1 thread"), "1 thread");
}

TEST_F(RequestBenchmarks, TheFourThreadScenarioServesRequestsOnLongLivedThreads) {
  expect_quick_scenario(run("concurrent requests, 4 threads"), "4 threads");
}

TEST_F(RequestBenchmarks, TheWarmPhasesPairEveryPhaseOfTheIdiomWithTheRawArms) {
  auto results = run("idiom phases, warm");
  ASSERT_EQ(results.size(), 14u);
  for (const Result& r : results) {
    EXPECT_EQ(r.error, "") << r.name;
    EXPECT_EQ(r.unit, "us") << r.name;
    EXPECT_EQ(r.target_ratio, 0.0) << "reported, not judged: " << r.name;
    EXPECT_FALSE(r.cudakit.empty()) << r.name;
  }
  for (const char* name : {"allocate 3 buffers: README idiom vs raw pageable", "upload 256 KiB: README idiom vs raw pageable",
                           "48 launches: README idiom vs raw pageable", "download 256 KiB: README idiom vs raw pageable",
                           "free 3 buffers: README idiom vs raw pageable", "request: README idiom vs raw pinned",
                           "request: cudakit pinned vs raw pinned"})
    EXPECT_TRUE(has(results, name)) << name;
  for (const Result& r : results) {
    if (r.name.rfind("request:", 0) != 0) continue;
    for (double s : r.cudakit) EXPECT_GT(s, 0) << r.name;
  }
}

TEST_F(RequestBenchmarks, TheHeapTrimmedAndColdPhasesRun) {
  auto trimmed = run("idiom phases, heap trimmed between requests");
  ASSERT_EQ(trimmed.size(), 4u);
  for (const Result& r : trimmed) EXPECT_EQ(r.error, "") << r.name;
  EXPECT_TRUE(has(trimmed, "host: new 256 KiB vector"));
  auto cold = run("idiom phases, cold");
  ASSERT_EQ(cold.size(), 9u);
  for (const Result& r : cold) EXPECT_EQ(r.error, "") << r.name;
  EXPECT_TRUE(has(cold, "request: cold, first on a new thread and stream"));
  EXPECT_TRUE(has(cold, "request: cold, first after staging released and pool trimmed"));
  EXPECT_TRUE(has(cold, "page-lock one staging buffer (1 MiB)"));
}

}  // namespace
}  // namespace cudakit::tool::bench

#endif  // CUDAKIT_HAVE_TEST_KERNELS
