// The pool allocation benchmark (tools/cudakit/bench_memory.cpp) runs end to end on the
// fake driver: both sides run, every allocation is freed, and it yields the judged
// result and the reported cuMemAlloc comparison. The numbers mean nothing here.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bench/registry.hpp"
#include "fake_fixture.hpp"

namespace cudakit::tool::bench {
namespace {

class MemoryBenchmarks : public testing::FakeDriverTest {};

TEST_F(MemoryBenchmarks, PoolAllocateFreeRunsOnBothSides) {
  Context quick{Device::get(0), true};
  auto chosen = select(benchmarks(), {"pool allocate+free 1 MiB"}, true);
  ASSERT_EQ(chosen.size(), 1u);
  auto results = run_guarded(chosen[0], quick);
  ASSERT_EQ(results.size(), 2u);
  for (const Result& r : results) {
    EXPECT_EQ(r.error, "") << r.name;
    EXPECT_EQ(r.cudakit.size(), static_cast<std::size_t>(quick.interleave(1).rounds)) << r.name;
    EXPECT_EQ(r.raw.size(), r.cudakit.size()) << r.name;
  }
  EXPECT_DOUBLE_EQ(results[0].target_ratio, 1.1);
  EXPECT_TRUE(judge(results[0]).judged);
  EXPECT_FALSE(judge(results[1]).judged);
}

// The quick run (the doctor's check) measures copy bandwidth at the judged 64 MiB only,
// H2D, D2H and D2D, each beside raw and judged against the 98% floor. On the fake every
// 64 MiB allocation is poisoned and every copy really moves the bytes, so only H2D runs
// here (about 3 s on a loaded 2-core machine); D2H and D2D share its code but for the
// copy call, and run on the GPU (`cudakit doctor`).
TEST_F(MemoryBenchmarks, QuickBandwidthRunsEachDirectionAtTheJudgedSize) {
  Context quick{Device::get(0), true};
  auto chosen = select(benchmarks(), {"bandwidth"}, true);
  std::vector<std::string> names;
  for (const Benchmark& b : chosen) names.push_back(b.name);
  std::sort(names.begin(), names.end());
  ASSERT_EQ(names, (std::vector<std::string>{"D2D bandwidth", "pinned D2H bandwidth", "pinned H2D bandwidth"}));

  auto h2d = select(benchmarks(), {"pinned H2D bandwidth"}, true);
  ASSERT_EQ(h2d.size(), 1u);
  auto results = run_guarded(h2d[0], quick);
  ASSERT_EQ(results.size(), 1u);
  const Result& r = results[0];
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.name, "pinned H2D 64 MiB");
  EXPECT_EQ(r.unit, "GB/s");
  EXPECT_EQ(r.series, "pinned H2D");
  EXPECT_DOUBLE_EQ(r.size_bytes, 64.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(r.target_ratio, 0.98);
  EXPECT_EQ(r.cudakit.size(), static_cast<std::size_t>(quick.interleave(1).rounds));
  EXPECT_EQ(r.raw.size(), r.cudakit.size());
  for (double gbps : r.cudakit) EXPECT_GT(gbps, 0);
  for (double gbps : r.raw) EXPECT_GT(gbps, 0);
  EXPECT_TRUE(judge(r).judged);
  EXPECT_EQ(fake().live("device memory"), 0u);
  EXPECT_EQ(fake().live("pinned host memory"), 0u);
}

}  // namespace
}  // namespace cudakit::tool::bench
