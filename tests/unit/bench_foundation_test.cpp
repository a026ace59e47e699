// The foundation's benchmarks (tools/cudakit/bench_foundation.cpp) run end to end on the
// fake driver: every side runs, every object is destroyed (the fixture's ledger), and
// each yields a judged cost result with one sample per round. The numbers themselves
// mean nothing here; the GPU machine measures them.
#include <gtest/gtest.h>

#include <string>

#include "bench/registry.hpp"
#include "fake_fixture.hpp"

namespace cudakit::tool::bench {
namespace {

class FoundationBenchmarks : public testing::FakeDriverTest {};

TEST_F(FoundationBenchmarks, EachRunsOnBothSidesAndCleansUp) {
  Context quick{Device::get(0), true};
  auto foundation = select(benchmarks(), {"streams", "events"}, true);
  ASSERT_GE(foundation.size(), 4u);
  for (const Benchmark& b : foundation) {
    auto results = run_guarded(b, quick);
    ASSERT_EQ(results.size(), 1u) << b.name;
    const Result& r = results[0];
    EXPECT_EQ(r.error, "") << b.name;
    EXPECT_EQ(r.name, b.name);
    EXPECT_EQ(r.unit, "us");
    EXPECT_DOUBLE_EQ(r.target_ratio, 1.05);
    EXPECT_EQ(r.cudakit.size(), static_cast<std::size_t>(quick.interleave(1).rounds)) << b.name;
    EXPECT_EQ(r.raw.size(), r.cudakit.size()) << b.name;
    EXPECT_TRUE(judge(r).judged) << b.name;
  }
  EXPECT_EQ(fake().live("stream"), 0u);
  EXPECT_LE(fake().live("event"), 1u);  // the pooled event of b.wait(a) stays in the library's pool
}

TEST_F(FoundationBenchmarks, ADriverFailureIsReportedNotFatal) {
  fake().fail(driver::EntryId::EventRecord, 0, CUDA_ERROR_INVALID_VALUE);
  auto chosen = select(benchmarks(), {"event record"}, false);
  ASSERT_FALSE(chosen.empty());
  auto results = run_guarded(chosen[0], Context{Device::get(0), true});
  ASSERT_FALSE(results.empty());
  EXPECT_NE(results[0].error.find("CUDA_ERROR_INVALID_VALUE"), std::string::npos) << results[0].error;
  EXPECT_EQ(fake().live("stream"), 0u);  // the failure unwound through every destructor
}

}  // namespace
}  // namespace cudakit::tool::bench
