// Greedy generation with a decoder Session, timed step by step: the loop a server runs.
// Each step ends with the batch's next tokens on the host (a pinned copy and a wait), as
// a server needs them to stream them out and to stop at an end token.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "decoder.hpp"

namespace decoder {

/// How a step is submitted: launch by launch, or through the session's graph cache.
enum class StepMode { eager, cached };

/// One generation: its tokens and timings.
struct Generation {
  int batch = 0;
  int steps = 0;  // decode steps after the prompt
  /// [batch][steps + 1]: the prompt's greedy token, then one per step.
  std::vector<std::int32_t> tokens;
  /// From the start (before the prompt is uploaded) to the first step's tokens on the
  /// host: the prompt, and the first step with its capture when there is one.
  double first_step_ms = 0;
  /// Each later step, prompt excluded: submit, wait, tokens on the host.
  std::vector<double> step_us;
  /// Heap allocations (operator new) on this thread during the later steps.
  long heap_allocations = 0;
};

/// Counts heap allocations on the calling thread (null: not counted).
using HeapCounter = long (*)();

/// The first part of a generation: the prompts, then the first step.
void generate_start(Session& session, std::span<const std::int32_t> prompts, int batch, int prompt_length,
                    StepMode mode, Generation& out);
/// The rest: `steps` - 1 more steps, each timed.
void generate_rest(Session& session, StepMode mode, Generation& out, HeapCounter heap = nullptr);
/// Both parts.
Generation generate(Session& session, std::span<const std::int32_t> prompts, int batch, int prompt_length, int steps,
                    StepMode mode, HeapCounter heap = nullptr);

/// The prompts of `batch` sequences starting at `first` (wrapping around the inputs'
/// sequences): [batch][prompt_length].
std::vector<std::int32_t> batch_prompts(const Inputs& inputs, int batch, int first);

/// Decode tokens per second of a generation's later steps: batch · count / their time.
double tokens_per_second(const Generation& g);

/// The p-th percentile (0..100) of `values`, linearly interpolated between the order
/// statistics (numpy's default); 0 for none.
double percentile(std::vector<double> values, double p);

}  // namespace decoder
