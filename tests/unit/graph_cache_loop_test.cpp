// The graph cache's device-side loops against the fake driver (graph_cache.hpp,
// run_loop): the step runs until its own kernel clears the loop's condition, the tokens
// equal those of one step per launch, the condition starts again at every launch, and the
// refusals (a step that cannot be captured, a key of the other kind, an old driver).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cudakit/graph_cache.hpp"
#include "cudakit/launch.hpp"
#include "cudakit/module.hpp"
#include "fake_kernels.hpp"
#include "graph_fixture.hpp"

namespace cudakit {
namespace {

using driver::EntryId;

constexpr int slots = 16;
using TokenSig = void(int*, float*, float);
using StopSig = void(std::uint64_t, const int*, int);

// history[*done] = salt + 3 * *done; ++*done: one "token" per step, at the step's position.
fake::FakeKernel token_kernel() {
  return {"token", fake::params<int*, float*, float>(), [](const fake::FakeLaunch& l) {
            auto* done = l.param<int*>(0);
            auto* history = l.param<float*>(1);
            auto salt = l.param<float>(2);
            l.read(done, sizeof(int));
            l.write(done, sizeof(int));
            l.write(history, slots * sizeof(float));
            if (*done >= 0 && *done < slots) history[*done] = salt + 3.0f * static_cast<float>(*done);
            ++*done;
          }};
}

// Clears the loop's condition once *done reaches `steps`: what the step's last kernel does.
fake::FakeKernel stop_kernel() {
  return {"stop_after", fake::params<std::uint64_t, const int*, int>(), [](const fake::FakeLaunch& l) {
            auto loop = l.param<std::uint64_t>(0);
            auto* done = l.param<const int*>(1);
            auto steps = l.param<int>(2);
            l.read(done, sizeof(int));
            if (*done >= steps) fake::set_conditional(loop, 0);
          }};
}

class GraphCacheLoopTest : public testing::GraphTestBase {
 protected:
  void SetUp() override {
    GraphTestBase::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    module_ = Module::load(dev(), fake::fatbin_image(testing::standard_image({token_kernel(), stop_kernel()}), {90}, {}));
    token_ = module_.kernel<TokenSig>("token");
    stop_ = module_.kernel<StopSig>("stop_after");
    std::random_device seed;
    salt_ = static_cast<float>(seed() % 1000) + 0.5f;
  }
  void TearDown() override {
    token_ = {};
    stop_ = {};
    module_ = {};
    GraphTestBase::TearDown();
  }
  static int& counter(DeviceBuffer<int>& b) { return *reinterpret_cast<int*>(b.device_pointer()); }
  static std::vector<float> values(const DeviceBuffer<float>& b) {
    const float* p = reinterpret_cast<const float*>(b.device_pointer());
    return std::vector<float>(p, p + slots);
  }
  static void poison(DeviceBuffer<float>& b) {
    float* p = reinterpret_cast<float*>(b.device_pointer());
    for (int i = 0; i < slots; ++i) p[i] = -7.0f;
  }

  Module module_;
  Kernel<TokenSig> token_;
  Kernel<StopSig> stop_;
  float salt_ = 0;
};

TEST_F(GraphCacheLoopTest, TheStepRunsUntilItsKernelClearsTheConditionAndMatchesOneStepPerLaunch) {
  Stream s(dev());
  DeviceBuffer<int> done(s, 1, zeroed), done_single(s, 1, zeroed);
  DeviceBuffer<float> history(s, slots, zeroed), single(s, slots, zeroed);
  s.synchronize();
  poison(history);
  poison(single);
  const int steps = 5;
  GraphCache<int> cache;
  int captures = 0;
  auto step = [&](StreamRef on, ConditionalHandle loop) {
    ++captures;
    launch(on, token_, LaunchConfig{1, 1}, done, history, salt_);
    launch(on, stop_, LaunchConfig{1, 1}, loop.value, std::as_const(done), steps);
  };
  EXPECT_EQ(cache.run_loop(s, 1, step), GraphCacheOutcome::captured);
  s.synchronize();
  EXPECT_EQ(captures, 1);
  EXPECT_EQ(counter(done), steps) << "one launch ran the step " << steps << " times";

  // The same step, one launch per step.
  GraphCache<int> plain;
  for (int i = 0; i < steps; ++i)
    plain.run(s, 1, [&](StreamRef on) { launch(on, token_, LaunchConfig{1, 1}, done_single, single, salt_); });
  s.synchronize();
  EXPECT_EQ(values(history), values(single)) << "the loop's tokens equal those of one step per launch";
  EXPECT_EQ(values(history)[steps], -7.0f) << "no step past the last";
  EXPECT_EQ(values(history)[steps - 1], salt_ + 3.0f * (steps - 1));
}

TEST_F(GraphCacheLoopTest, AReplayStartsTheConditionAgainAndRunsWithoutCapturing) {
  Stream s(dev());
  DeviceBuffer<int> done(s, 1, zeroed);
  DeviceBuffer<float> history(s, slots, zeroed);
  GraphCache<int> cache;
  int captures = 0;
  auto step = [&](StreamRef on, ConditionalHandle loop) {
    ++captures;
    launch(on, token_, LaunchConfig{1, 1}, done, history, salt_);
    launch(on, stop_, LaunchConfig{1, 1}, loop.value, std::as_const(done), 3);
  };
  cache.run_loop(s, 7, step);
  s.synchronize();
  ASSERT_EQ(counter(done), 3);
  poison(history);
  // The condition starts at 1 again: the body runs once more (done is past the stop).
  EXPECT_EQ(cache.run_loop(s, 7, step), GraphCacheOutcome::hit);
  s.synchronize();
  EXPECT_EQ(counter(done), 4) << "a condition left at 0 by the last launch would have run nothing";
  EXPECT_EQ(cache.run(s, 7, [](StreamRef) {}), GraphCacheOutcome::hit) << "run replays a loop key too";
  s.synchronize();
  EXPECT_EQ(captures, 1);
  EXPECT_EQ(counter(done), 5);
  EXPECT_EQ(values(history)[2], -7.0f);
  EXPECT_EQ(values(history)[3], salt_ + 9.0f);
  EXPECT_EQ(values(history)[4], salt_ + 12.0f);
  EXPECT_EQ(cache.statistics().captures, 1u);
  EXPECT_EQ(cache.statistics().hits, 2u);
}

TEST_F(GraphCacheLoopTest, AKeyIsEitherALoopOrPlainWork) {
  Stream s(dev());
  DeviceBuffer<int> done(s, 1, zeroed);
  DeviceBuffer<float> history(s, slots, zeroed);
  GraphCache<int> cache;
  auto plain = [&](StreamRef on) { launch(on, token_, LaunchConfig{1, 1}, done, history, salt_); };
  auto step = [&](StreamRef on, ConditionalHandle loop) {
    plain(on);
    launch(on, stop_, LaunchConfig{1, 1}, loop.value, std::as_const(done), 1);
  };
  cache.run(s, 1, plain);
  try {
    cache.run_loop(s, 1, step);
    FAIL() << "run_loop on a plain key";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("either a loop or plain work"), std::string::npos) << e.what();
  }
  cache.run_loop(s, 2, step);
  try {
    cache.update_and_run(s, 2, plain);
    FAIL() << "update_and_run on a loop key";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("device-side loop"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(cache.erase(2));
  EXPECT_EQ(cache.run(s, 2, plain), GraphCacheOutcome::captured) << "an erased key may become plain work";
}

TEST_F(GraphCacheLoopTest, AStepThatCannotBeCapturedIsAnErrorAndLeavesNoKey) {
  Stream s(dev());
  GraphCache<int> cache;
  try {
    cache.run_loop(s, 1, [](StreamRef on, ConditionalHandle) { on.synchronize(); });
    FAIL() << "an uncapturable step was accepted";
  } catch (const CaptureError& e) {
    EXPECT_NE(std::string(e.what()).find("no eager"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cache.run_loop(s, 2, [](StreamRef, ConditionalHandle) {}), CaptureError) << "a step that submits nothing";
  EXPECT_FALSE(cache.contains(1));
  EXPECT_FALSE(cache.contains(2));
  EXPECT_EQ(cache.size(), 0u);
  s.synchronize();  // the stream works after the refused captures
}

class OldDriverGraphCacheLoopTest : public GraphCacheLoopTest {
  void configure(fake::Driver& d) override {
    d.driver_version = 12020;
    d.missing.insert(EntryId::GraphConditionalHandleCreate);
  }
};

TEST_F(OldDriverGraphCacheLoopTest, LoopsAreRefusedClearlyOnDriversWithoutConditionalNodes) {
  Stream s(dev());
  GraphCache<int> cache;
  bool called = false;
  EXPECT_THROW(cache.run_loop(s, 1, [&](StreamRef, ConditionalHandle) { called = true; }), FeatureUnavailable);
  EXPECT_FALSE(called);
  EXPECT_FALSE(cache.contains(1));
}

}  // namespace
}  // namespace cudakit
