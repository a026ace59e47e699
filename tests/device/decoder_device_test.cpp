// The decoder workload (examples/decoder) on the GPU: its steps through the graph cache
// must equal the same steps launched one by one, bit for bit, and so must its steps in
// one device-side loop.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "decoder.hpp"
#include "generation.hpp"
#include "gpu_fixture.hpp"
#include "under_sanitizer.hpp"

namespace {

using decoder::Session;
using decoder::StepMode;

struct Trace {
  std::vector<std::int32_t> tokens;
  std::vector<std::uint16_t> hidden;
  int position = 0;
};

// The prompt, then `steps` decode steps of `batch` sequences (the inputs' first); the
// tokens and the final hidden states after the prompt and after every step, each point
// [batch] tokens and [batch][d_model] states.
Trace run(const decoder::Model& model, cudakit::StreamRef stream, const decoder::Inputs& inputs, int steps,
          StepMode mode, cudakit::GraphCacheStatistics* statistics = nullptr, int batch = 1) {
  Session session(model, stream, {batch, inputs.prompt_length});
  Trace t;
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(batch));
  auto keep = [&] {
    session.read_tokens(tokens);
    t.tokens.insert(t.tokens.end(), tokens.begin(), tokens.end());
    const std::vector<std::uint16_t> h = session.read_hidden(batch);
    t.hidden.insert(t.hidden.end(), h.begin(), h.end());
  };
  session.prefill(decoder::batch_prompts(inputs, batch, 0), batch, inputs.prompt_length);
  keep();
  for (int s = 0; s < steps; ++s) {
    if (mode == StepMode::cached) session.step_cached(batch);
    else session.step(batch);
    keep();
  }
  t.position = session.read_position();
  if (statistics) *statistics = session.cache_statistics();
  return t;
}

class DecoderTest : public cudakit::testing::GpuTest {
 protected:
  // Eight steps through the graph cache against the same steps launched one by one.
  void expect_graph_cache_steps_equal_eager_steps(const decoder::Config& config) {
    cudakit::Stream stream(device());
    const decoder::Model model(decoder::random_weights(config), stream);
    const decoder::Inputs inputs = decoder::random_inputs(config, 1, 128, 1);
    const int steps = 8;

    const Trace eager = run(model, stream, inputs, steps, StepMode::eager);
    cudakit::GraphCacheStatistics statistics;
    const Trace graph = run(model, stream, inputs, steps, StepMode::cached, &statistics);

    ASSERT_EQ(eager.tokens.size(), static_cast<std::size_t>(steps + 1));
    EXPECT_EQ(graph.tokens, eager.tokens);
    EXPECT_TRUE(graph.hidden == eager.hidden) << "the hidden states differ";
    EXPECT_EQ(eager.position, inputs.prompt_length + steps);
    EXPECT_EQ(graph.position, inputs.prompt_length + steps);
    EXPECT_EQ(statistics.captures, 1u);
    EXPECT_EQ(statistics.hits, static_cast<std::uint64_t>(steps - 1));
    EXPECT_EQ(statistics.updates + statistics.recaptures + statistics.eager_runs, 0u);

    // A real computation: tokens in the vocabulary, hidden states finite and varied.
    for (std::int32_t t : eager.tokens) EXPECT_TRUE(t >= 0 && t < config.vocab) << t;
    std::vector<float> h;
    for (std::uint16_t bits : eager.hidden) h.push_back(decoder::from_bf16(bits));
    EXPECT_TRUE(std::all_of(h.begin(), h.end(), [](float v) { return std::isfinite(v); }));
    const auto [low, high] = std::minmax_element(h.begin(), h.end());
    EXPECT_GT(*high - *low, 1.0f) << "layer-normed hidden states span several units";
    // Each step's hidden state differs from the previous one's (the position moves on).
    const std::size_t d = static_cast<std::size_t>(config.d_model);
    for (int s = 1; s <= steps; ++s)
      EXPECT_FALSE(std::equal(h.begin() + s * d, h.begin() + (s + 1) * d, h.begin() + (s - 1) * d)) << "step " << s;
  }
};

// Steps in one device-side loop (Session::step_loop) give the tokens of the same steps
// through the graph cache one launch each, at batch 1 and 4, twice (a replay of the loop).
TEST_F(DecoderTest, StepsInOneDeviceSideLoopEqualOneStepPerLaunch) {
  if (!cudakit::driver::has(cudakit::driver::EntryId::GraphConditionalHandleCreate))
    GTEST_SKIP() << "driver without conditional nodes";
  cudakit::Stream stream(device());
  const decoder::Config config{.layers = 2, .d_model = 256, .heads = 4, .head_dim = 64, .ffn = 1024, .vocab = 4096,
                               .max_positions = 256};
  const decoder::Model model(decoder::random_weights(config), stream);
  const decoder::Inputs inputs = decoder::random_inputs(config, 4, 32, 1);
  const int steps = 12;
  for (int batch : {1, 4}) {
    const std::vector<std::int32_t> prompts = decoder::batch_prompts(inputs, batch, 0);
    Session per_launch(model, stream, {batch, inputs.prompt_length, steps});
    const decoder::Generation expected =
        decoder::generate(per_launch, prompts, batch, inputs.prompt_length, steps + 1, StepMode::cached);
    Session looped(model, stream, {batch, inputs.prompt_length, steps});
    for (int round = 0; round < 2; ++round) {
      decoder::Generation g;
      g.steps = steps + 1;
      decoder::generate_start(looped, prompts, batch, inputs.prompt_length, StepMode::cached, g);
      cudakit::testing::settle_allocations_before_a_loop_capture(stream);
      EXPECT_EQ(looped.step_loop(batch, steps), round == 0 ? cudakit::GraphCacheOutcome::captured
                                                            : cudakit::GraphCacheOutcome::hit);
      std::vector<std::int32_t> tokens(static_cast<std::size_t>(batch * steps));
      looped.read_loop_tokens(batch, steps, tokens);
      for (int s = 0; s < steps; ++s)
        for (int b = 0; b < batch; ++b)
          EXPECT_EQ(tokens[static_cast<std::size_t>(s * batch + b)],
                    expected.tokens[static_cast<std::size_t>(b) * (steps + 2) + 2 + s])
              << "batch " << batch << ", round " << round << ", step " << s << ", sequence " << b;
      EXPECT_EQ(looped.read_position(), inputs.prompt_length + 1 + steps) << "the loop advanced the position";
    }
  }
}

// Hidden states of two paths within 1e-2 relative L2 at every point of `steps` steps
// whose inputs agree (after a token differs, a near tie broken the other way, the
// sequence parts and its comparison ends there), the prompt's tokens equal; returns the
// points compared.
int expect_paths_agree(const Trace& lt, const Trace& gemv, int batch, int steps, std::size_t d, const std::string& what) {
  EXPECT_EQ(lt.hidden.size(), gemv.hidden.size()) << what;
  EXPECT_EQ(lt.hidden.size(), static_cast<std::size_t>(steps + 1) * batch * d) << what;
  if (lt.hidden.size() != gemv.hidden.size()) return 0;
  int compared = 0;
  for (int b = 0; b < batch; ++b) {
    const auto at = [&](int point) { return static_cast<std::size_t>(point * batch + b); };
    EXPECT_EQ(lt.tokens[at(0)], gemv.tokens[at(0)]) << what << ", sequence " << b
                                                    << ": the prompt runs the same path on both";
    for (int p = 0; p <= steps; ++p) {
      double diff = 0, norm = 0;
      for (std::size_t i = at(p) * d; i < (at(p) + 1) * d; ++i) {
        const double x = decoder::from_bf16(lt.hidden[i]), y = decoder::from_bf16(gemv.hidden[i]);
        diff += (x - y) * (x - y);
        norm += x * x;
      }
      EXPECT_GT(norm, 0.0);
      EXPECT_LE(std::sqrt(diff / norm), 1e-2) << what << ", sequence " << b << ", point " << p;
      ++compared;
      if (lt.tokens[at(p)] != gemv.tokens[at(p)]) break;
    }
  }
  EXPECT_GE(compared, 2 * batch) << what << ": the step after each prompt is compared";
  return compared;
}

// The weight-streaming GEMV path (the default for decode steps of up to
// Kernels::default_gemv_rows sequences, for every row count its kernels hold with
// CUDAKIT_DECODER_GEMV=1; CUDAKIT_DECODER_GEMV=0 turns it off: the GEMMs on the
// tensor cores with the embedding and the layer norms fused in, the LM head with the
// final norm and the greedy choice) computes what the cuBLASLt path computes, up to the
// order of the sums (expect_paths_agree). At 1 sequence (one group of 8 columns a block,
// and again with the attention inside the QKV GEMV, CUDAKIT_DECODER_FUSED_ATTENTION=1),
// at 2 (2 groups), at 5 (rows that fill part of the mma's first 8; 4 groups), at 16 (all
// of its rows; 4 groups) and at 32 (two tiles of rows, 4 groups, and x of the 4096-wide
// down-projection staged in two slices).
TEST_F(DecoderTest, TheSmallBatchGemvPathMatchesTheCublasLtPath) {
  cudakit::Stream stream(device());
  const decoder::Config config{.layers = 2, .d_model = 256, .heads = 4, .head_dim = 64, .ffn = 4096, .vocab = 4096,
                               .max_positions = 256};
  const decoder::HostWeights weights = decoder::random_weights(config);
  const decoder::Inputs inputs = decoder::random_inputs(config, 32, 64, 1);
  const int steps = 8;
  ::setenv("CUDAKIT_DECODER_GEMV", "0", 1);
  const decoder::Model lt_model(weights, stream);
  ::setenv("CUDAKIT_DECODER_GEMV", "1", 1);
  const decoder::Model gemv_model(weights, stream);
  ::setenv("CUDAKIT_DECODER_FUSED_ATTENTION", "1", 1);
  const decoder::Model fused_model(weights, stream);
  ::unsetenv("CUDAKIT_DECODER_FUSED_ATTENTION");
  ::unsetenv("CUDAKIT_DECODER_GEMV");
  ASSERT_TRUE(gemv_model.kernels().small_batch_gemv);
  ASSERT_FALSE(lt_model.kernels().small_batch_gemv);
  ASSERT_FALSE(gemv_model.kernels().takes_fused_attention(1, config.d_model));
  ASSERT_TRUE(fused_model.kernels().takes_fused_attention(1, config.d_model));
  const std::size_t d = static_cast<std::size_t>(config.d_model);
  for (int batch : {1, 2, 5, 16, 32}) {
    ASSERT_TRUE(gemv_model.kernels().takes_gemv(batch, config.d_model, config.ffn)) << batch;
    const Trace lt = run(lt_model, stream, inputs, steps, StepMode::cached, nullptr, batch);
    const Trace gemv = run(gemv_model, stream, inputs, steps, StepMode::cached, nullptr, batch);
    const int compared = expect_paths_agree(lt, gemv, batch, steps, d, "batch " + std::to_string(batch));
    RecordProperty("points_compared_at_batch_" + std::to_string(batch), compared);
    EXPECT_EQ(gemv.position, inputs.prompt_length + steps);
    if (batch == 1) {
      const Trace fused = run(fused_model, stream, inputs, steps, StepMode::cached, nullptr, batch);
      expect_paths_agree(lt, fused, batch, steps, d, "batch 1, the attention inside the QKV GEMV");
      EXPECT_EQ(fused.position, inputs.prompt_length + steps);
    }
  }
}

// At one sequence, with d_model a multiple of 32 words a warp (1024 here, as the example's
// model), each GEMV holds its row of x in registers instead of staging it in shared memory:
// the embedding, the layer norms computed by every warp on its own, the LM head's normed
// hidden state. Both that and the staged row (CUDAKIT_DECODER_STAGED_ROW=1) compute what
// the cuBLASLt path computes.
TEST_F(DecoderTest, AtOneSequenceTheGemvRowInRegistersMatchesTheStagedRowAndCublasLt) {
  cudakit::Stream stream(device());
  const decoder::Config config{.layers = 2, .d_model = 1024, .heads = 16, .head_dim = 64, .ffn = 4096, .vocab = 4096,
                               .max_positions = 128};
  const decoder::HostWeights weights = decoder::random_weights(config);
  const decoder::Inputs inputs = decoder::random_inputs(config, 1, 32, 2);
  const int steps = 8;
  ::setenv("CUDAKIT_DECODER_GEMV", "0", 1);
  const decoder::Model lt_model(weights, stream);
  ::setenv("CUDAKIT_DECODER_GEMV", "1", 1);
  const decoder::Model registers_model(weights, stream);
  ::setenv("CUDAKIT_DECODER_STAGED_ROW", "1", 1);
  const decoder::Model staged_model(weights, stream);
  ::unsetenv("CUDAKIT_DECODER_STAGED_ROW");
  ::unsetenv("CUDAKIT_DECODER_GEMV");
  ASSERT_TRUE(registers_model.kernels().takes_gemv(1, config.d_model, config.ffn));
  const std::size_t d = static_cast<std::size_t>(config.d_model);
  const Trace lt = run(lt_model, stream, inputs, steps, StepMode::cached, nullptr, 1);
  const Trace in_registers = run(registers_model, stream, inputs, steps, StepMode::cached, nullptr, 1);
  const Trace staged = run(staged_model, stream, inputs, steps, StepMode::cached, nullptr, 1);
  expect_paths_agree(lt, in_registers, 1, steps, d, "the row in registers");
  expect_paths_agree(lt, staged, 1, steps, d, "the staged row");
  EXPECT_EQ(in_registers.position, inputs.prompt_length + steps);
  EXPECT_EQ(staged.position, inputs.prompt_length + steps);
}

TEST_F(DecoderTest, EightGraphCacheStepsAtBatchOneEqualTheEagerSteps) {
  expect_graph_cache_steps_equal_eager_steps(decoder::Config{});
}

// The same at a size compute-sanitizer's racecheck and initcheck get through in minutes
// (the suite runs this one under them): every kernel and GEMM path of a step.
TEST_F(DecoderTest, EightGraphCacheStepsOfASmallDecoderEqualTheEagerSteps) {
  expect_graph_cache_steps_equal_eager_steps(
      {.layers = 2, .d_model = 256, .heads = 4, .head_dim = 64, .ffn = 1024, .vocab = 4096, .max_positions = 256});
}

// The kernel-chain floor reads what the streaming floor reads, in a chain of dependent
// kernels: it takes longer, more so with more kernels, and refuses a chain of none. Not a
// timing test: only the order of the two floors, which the chain's kernel boundaries set.
TEST_F(DecoderTest, TheKernelChainFloorLiesAboveTheStreamingFloor) {
  cudakit::Stream stream(device());
  const decoder::Config config{.layers = 2, .d_model = 256, .heads = 4, .head_dim = 64, .ffn = 4096, .vocab = 4096,
                               .max_positions = 256};
  const decoder::Model model(decoder::random_weights(config), stream);
  Session session(model, stream, {1, 16});
  const double streaming = session.measure_streaming_floor_us();
  const double one = session.measure_kernel_chain_floor_us(1), many = session.measure_kernel_chain_floor_us(64);
  EXPECT_GT(streaming, 0.0);
  EXPECT_GT(one, 0.0);
  EXPECT_GT(many, one) << "64 kernel boundaries cost more than none";
  EXPECT_GT(many, streaming);
  EXPECT_THROW(session.measure_kernel_chain_floor_us(0), cudakit::InvalidArgument);
}

}  // namespace
