// Greedy generation, timed (generation.hpp).
#include "generation.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace decoder {

namespace {

using Clock = std::chrono::steady_clock;

double elapsed_us(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::micro>(to - from).count();
}

// Stores the step's tokens as column `index` of the [batch][steps + 1] table.
void record(Generation& g, std::span<const std::int32_t> step_tokens, int index) {
  for (int b = 0; b < g.batch; ++b) g.tokens[static_cast<std::size_t>(b) * (g.steps + 1) + index] = step_tokens[b];
}

void run_step(Session& session, StepMode mode, int batch) {
  if (mode == StepMode::cached) session.step_cached(batch);
  else session.step(batch);
}

}  // namespace

void generate_start(Session& session, std::span<const std::int32_t> prompts, int batch, int prompt_length,
                    StepMode mode, Generation& g) {
  if (g.steps < 1) throw std::invalid_argument("a generation has at least one decode step");
  g.batch = batch;
  g.tokens.assign(static_cast<std::size_t>(batch) * (g.steps + 1), -1);
  g.step_us.clear();
  std::int32_t step_tokens[1024];
  if (batch > 1024) throw std::invalid_argument("a generation of more than 1024 sequences");
  const auto start = Clock::now();
  session.prefill(prompts, batch, prompt_length);
  session.read_tokens({step_tokens, static_cast<std::size_t>(batch)});
  record(g, {step_tokens, static_cast<std::size_t>(batch)}, 0);
  run_step(session, mode, batch);
  session.read_tokens({step_tokens, static_cast<std::size_t>(batch)});
  g.first_step_ms = elapsed_us(start, Clock::now()) / 1000.0;
  record(g, {step_tokens, static_cast<std::size_t>(batch)}, 1);
}

void generate_rest(Session& session, StepMode mode, Generation& g, HeapCounter heap) {
  std::int32_t step_tokens[1024];
  const std::span<std::int32_t> tokens(step_tokens, static_cast<std::size_t>(g.batch));
  g.step_us.reserve(static_cast<std::size_t>(g.steps));
  const long heap_before = heap ? heap() : 0;
  for (int s = 2; s <= g.steps; ++s) {
    const auto begin = Clock::now();
    run_step(session, mode, g.batch);
    session.read_tokens(tokens);
    g.step_us.push_back(elapsed_us(begin, Clock::now()));  // reserved: no allocation
    record(g, tokens, s);
  }
  g.heap_allocations = heap ? heap() - heap_before : 0;
}

Generation generate(Session& session, std::span<const std::int32_t> prompts, int batch, int prompt_length, int steps,
                    StepMode mode, HeapCounter heap) {
  Generation g;
  g.steps = steps;
  generate_start(session, prompts, batch, prompt_length, mode, g);
  generate_rest(session, mode, g, heap);
  return g;
}

std::vector<std::int32_t> batch_prompts(const Inputs& inputs, int batch, int first) {
  std::vector<std::int32_t> prompts;
  prompts.reserve(static_cast<std::size_t>(batch) * inputs.prompt_length);
  for (int b = 0; b < batch; ++b) {
    const int sequence = (first + b) % inputs.sequences;
    auto begin = inputs.prompts.begin() + static_cast<std::ptrdiff_t>(sequence) * inputs.prompt_length;
    prompts.insert(prompts.end(), begin, begin + inputs.prompt_length);
  }
  return prompts;
}

double tokens_per_second(const Generation& g) {
  const double total_us = std::accumulate(g.step_us.begin(), g.step_us.end(), 0.0);
  return total_us > 0 ? g.batch * static_cast<double>(g.step_us.size()) / (total_us * 1e-6) : 0.0;
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = p / 100.0 * static_cast<double>(values.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(rank));
  const std::size_t above = std::min(below + 1, values.size() - 1);
  return values[below] + (values[above] - values[below]) * (rank - static_cast<double>(below));
}

}  // namespace decoder
