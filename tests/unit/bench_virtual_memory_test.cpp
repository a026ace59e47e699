// The growth benchmark on the fake driver: each arm's 1 GiB (here, the smoke run's few
// small steps) is given back between batches, the give-back is reported apart, and
// nothing is left behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bench/registry.hpp"
#include "fake_fixture.hpp"

namespace cudakit::tool::bench {
namespace {

class GrowthBenchmark : public testing::FakeDriverTest {};

bool has(const std::vector<Result>& results, const std::string& part) {
  return std::any_of(results.begin(), results.end(),
                     [&](const Result& r) { return r.name.find(part) != std::string::npos; });
}

TEST_F(GrowthBenchmark, EveryArmGivesItsGrownBufferBackAndTheGiveBackIsReportedApart) {
  auto chosen = select(benchmarks(), {"grow to 1 GiB in 64 MiB steps"}, false);
  ASSERT_EQ(chosen.size(), 1u);
  const std::vector<Result> results =
      run_guarded(chosen[0], Context{.device = Device::get(0), .quick = true, .smoke = true});
  ASSERT_EQ(results.size(), 5u);
  for (const Result& r : results) EXPECT_TRUE(r.error.empty()) << r.name << ": " << r.error;
  EXPECT_TRUE(has(results, "GrowableBuffer vs raw cuMemAlloc+copy+cuMemFree"));
  EXPECT_TRUE(has(results, "GrowableBuffer vs raw cuMemCreate+cuMemMap"));
  EXPECT_TRUE(has(results, "give back 1 GiB: a grown GrowableBuffer vs raw cuMemFree"));
  // Every arm's last buffer went back: no allocation, physical chunk or reservation lives.
  EXPECT_TRUE(fake().allocations.empty()) << fake().allocations.size() << " allocations";
  EXPECT_TRUE(fake().physical.empty()) << fake().physical.size() << " physical chunks";
  EXPECT_TRUE(fake().reservations.empty()) << fake().reservations.size() << " reservations";
}

}  // namespace
}  // namespace cudakit::tool::bench
