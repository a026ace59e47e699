// The pool allocation benchmark (tools/cudakit/bench_memory.cpp) runs end to end on the
// fake driver: both sides run, every allocation is freed, and it yields the judged
// result and the reported cuMemAlloc comparison. The numbers mean nothing here.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace cudakit::tool::bench
