// The benchmark registry's selection and guarded runs, and the interleaved timing:
// the order of the sides, warm-up, samples per operation, and event timing on the fake
// driver.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "bench/harness.hpp"
#include "bench/registry.hpp"
#include "bench/timing.hpp"
#include "cudakit/event.hpp"
#include "cudakit/stream.hpp"
#include "fake_fixture.hpp"

namespace cudakit::tool::bench {
namespace {

Benchmark named(std::string name, std::string group, QuickRun quick = QuickRun::include) {
  return {std::move(name), std::move(group), quick, [](const Context&) { return std::vector<Result>{}; }};
}

std::vector<std::string> names(const std::vector<Benchmark>& benchmarks) {
  std::vector<std::string> out;
  for (const auto& b : benchmarks) out.push_back(b.name);
  return out;
}

const std::vector<Benchmark> catalogue = {
    named("stream create+destroy", "streams"), named("event record", "events"),
    named("graph replay 100 nodes", "graphs", QuickRun::skip), named("pinned H2D 1 MiB", "bandwidth", QuickRun::skip),
    named("event query (completed)", "events")};

TEST(BenchSelection, NoFilterSelectsEverythingSortedByGroup) {
  EXPECT_EQ(names(select(catalogue, {}, false)),
            (std::vector<std::string>{"pinned H2D 1 MiB", "event record", "event query (completed)",
                                      "graph replay 100 nodes", "stream create+destroy"}));
}

TEST(BenchSelection, FilterMatchesNameOrGroupIgnoringCase) {
  EXPECT_EQ(names(select(catalogue, {"RECORD"}, false)), (std::vector<std::string>{"event record"}));
  EXPECT_EQ(names(select(catalogue, {"graphs"}, false)), (std::vector<std::string>{"graph replay 100 nodes"}));
}

TEST(BenchSelection, SeveralFiltersSelectTheUnion) {
  EXPECT_EQ(names(select(catalogue, {"stream", "bandwidth"}, false)),
            (std::vector<std::string>{"pinned H2D 1 MiB", "stream create+destroy"}));
}

TEST(BenchSelection, QuickOnlyKeepsTheQuickRun) {
  EXPECT_EQ(names(select(catalogue, {}, true)),
            (std::vector<std::string>{"event record", "event query (completed)", "stream create+destroy"}));
}

TEST(BenchSelection, ASpaceInAFilterMatchesTheDashOfAGroupName) {
  const std::vector<Benchmark> phases = {named("warm", "idiom-phases"), named("cold start", "streams")};
  EXPECT_EQ(names(select(phases, {"idiom phases"}, false)), (std::vector<std::string>{"warm"}));
  EXPECT_EQ(names(select(phases, {"cold start"}, false)), (std::vector<std::string>{"cold start"}))
      << "names keep their spaces";
}

TEST(BenchSelection, NoRegisteredGroupNameHasASpace) {
  ASSERT_FALSE(benchmarks().empty());
  for (const Benchmark& b : benchmarks()) {
    EXPECT_EQ(b.group.find(' '), std::string::npos) << b.name << ": group '" << b.group << "'";
    EXPECT_FALSE(b.group.empty()) << b.name;
  }
}

TEST(BenchSelection, AFilterMatchingNothingSelectsNothing) { EXPECT_TRUE(select(catalogue, {"tensor"}, false).empty()); }

TEST(BenchSelection, SubstringTestIgnoresAsciiCase) {
  EXPECT_TRUE(contains_ignoring_case("Event Record", "t rec"));
  EXPECT_TRUE(contains_ignoring_case("anything", ""));
  EXPECT_FALSE(contains_ignoring_case("event", "events"));
}

class BenchRunTest : public testing::FakeDriverTest {
 protected:
  Context context(bool quick = true) { return Context{Device::get(0), quick}; }
};

TEST_F(BenchRunTest, QuickPlansAreShorter) {
  Interleave full = context(false).interleave(1000);
  Interleave quick = context(true).interleave(1000);
  EXPECT_EQ(full.ops_per_batch, 1000);
  EXPECT_GE(full.rounds, 15);
  EXPECT_LT(quick.rounds, full.rounds);
  EXPECT_LT(quick.ops_per_batch, full.ops_per_batch);
  EXPECT_EQ(context(true).interleave(2).ops_per_batch, 1);
}

TEST_F(BenchRunTest, AThrowingBenchmarkBecomesAnErrorResult) {
  Benchmark b = named("broken", "events");
  b.run = [](const Context&) -> std::vector<Result> { throw std::runtime_error("cuEventRecord: boom"); };
  auto results = run_guarded(b, context());
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].name, "broken");
  EXPECT_EQ(results[0].error, "cuEventRecord: boom");
  EXPECT_TRUE(judge(results[0]).missed);
}

TEST_F(BenchRunTest, NoDriverPropagatesSoTheCommandExitsTwo) {
  Benchmark b = named("needs a driver", "events");
  b.run = [](const Context&) -> std::vector<Result> {
    throw DriverUnavailable(DriverUnavailable::Reason::not_installed, "no driver");
  };
  EXPECT_THROW(run_guarded(b, context()), DriverUnavailable);
}

TEST_F(BenchRunTest, ErrorsParkedDuringARunAreItsFailure) {
  Benchmark b = named("leaky", "events");
  b.run = [](const Context&) {
    park_error({CUDA_SUCCESS, "~Stream", "cuStreamDestroy failed"});
    return std::vector<Result>{cost_result("leaky", "events", {{1e-6}, {1e-6}}, 1.05)};
  };
  auto results = run_guarded(b, context());
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[0].error.empty());
  EXPECT_NE(results[1].error.find("cuStreamDestroy failed"), std::string::npos);
  EXPECT_EQ(parked_error_count(), 0u);
}

TEST(BenchTiming, SidesAlternateWhichGoesFirstAndWarmUpIsDiscarded) {
  std::string order;
  int drained = 0;
  Interleave plan;
  plan.rounds = 4;
  plan.warmup_rounds = 1;
  plan.ops_per_batch = 3;
  plan.between_batches = [&] { ++drained; };
  auto samples = time_host(
      plan, [&](int ops) { order += ops == 3 ? "c" : "?"; }, [&](int ops) { order += ops == 3 ? "r" : "?"; });
  // Warm-up round -1 runs raw first; round 0 cudakit first; then alternating.
  EXPECT_EQ(order, "rc" "cr" "rc" "cr" "rc");
  EXPECT_EQ(drained, 10);
  EXPECT_EQ(samples.cudakit.size(), 4u);
  EXPECT_EQ(samples.raw.size(), 4u);
}

TEST(BenchTiming, HostSamplesAreSecondsPerOperation) {
  Interleave plan;
  plan.rounds = 3;
  plan.warmup_rounds = 0;
  plan.ops_per_batch = 2;
  auto sleep_ms = [](int ms) {
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < until) {
    }
  };
  // Per operation, not per batch: a raw batch of 2 operations busy-waits 2 x 40 ms, so a
  // per-batch sample would be at least 80 ms. The 40 ms margin absorbs the preemptions of
  // a loaded machine.
  auto samples = time_host(
      plan, [&](int ops) { sleep_ms(80 * ops); }, [&](int ops) { sleep_ms(40 * ops); });
  for (double s : samples.cudakit) EXPECT_GE(s, 0.080);
  for (double s : samples.raw) {
    EXPECT_GE(s, 0.040);
    EXPECT_LT(s, 0.080);
  }
}

TEST_F(BenchRunTest, DeviceTimingReadsTheEventsAroundEachBatch) {
  Stream stream(Device::get(0));
  Event marker(Device::get(0));
  int cudakit_batches = 0, raw_batches = 0;
  Interleave plan;
  plan.rounds = 3;
  plan.warmup_rounds = 1;
  plan.ops_per_batch = 5;
  auto samples = time_device(
      plan, stream,
      [&](int) {
        ++cudakit_batches;
        marker.record(stream);
      },
      [&](int) {
        ++raw_batches;
        marker.record(stream);
      });
  EXPECT_EQ(cudakit_batches, 4);
  EXPECT_EQ(raw_batches, 4);
  ASSERT_EQ(samples.cudakit.size(), 3u);
  // The fake driver reports 0.5 ms between any two timing events: per op, 0.1 ms.
  EXPECT_DOUBLE_EQ(samples.cudakit[0], 0.5e-3 / 5);
  EXPECT_DOUBLE_EQ(samples.raw[2], 0.5e-3 / 5);
}

TEST_F(BenchRunTest, RawHelpersCreateAndDestroyWhatTheyOwn) {
  {
    RawPrimaryContext context(Device::get(0));
    RawStream stream;
    RawEvent event;
    EXPECT_EQ(fake().live("stream"), 1u);
    EXPECT_EQ(fake().live("event"), 1u);
    check_raw(raw_entry<driver::EntryId::EventRecord>()(event.handle(), stream.handle()), "cuEventRecord");
  }
  EXPECT_EQ(fake().live("stream"), 0u);
  EXPECT_EQ(fake().live("event"), 0u);
  EXPECT_THROW(check_raw(CUDA_ERROR_INVALID_VALUE, "cuEventRecord"), DriverError);
}

}  // namespace
}  // namespace cudakit::tool::bench
