// The decoder on cudakit: a Model (weights in one device buffer and the compiled
// kernels, shared read-only by every session on the device) and Sessions (one stream,
// one KV cache, one set of activations, one cuBLASLt handle and one graph cache each).
//
//   decoder::Model model(decoder::random_weights(config), stream);
//   decoder::Session session(model, stream, {.max_batch = 8, .max_prompt = 128});
//   session.prefill(prompts, 8, 128);          // every prompt at once, causal attention
//   for (int i = 0; i < 255; ++i) {
//     session.step_cached(8);                  // captured once per batch size, then replayed
//     session.read_tokens(next);               // the greedy tokens of this step
//   }
//
// One decode step, for every sequence of the batch (model.hpp has the function):
//   embed_layer_norm                       x = embeddings, h = ln1(x)         (layer 0)
//   per layer: layer_norm (layers 1-7)     h = ln1(x)
//              Lt matmul, bias epilogue    qkv = h·Wqkvᵀ + b
//              decode_attention            K, V appended at the position; a = attention
//              Lt matmul, bias, beta = 1   x = x + a·Woᵀ + b                  (residual fused)
//              layer_norm                  h = ln2(x)
//              Lt matmul, GELU+bias        f = gelu(h·W1ᵀ + b1)
//              Lt matmul, bias, beta = 1   x = x + f·W2ᵀ + b2                 (residual fused)
//   layer_norm, gemm (fp32 out)            logits = lnf(x)·Wlmᵀ
//   argmax_tokens                          tokens = argmax(logits); position += 1
// The decoder's own kernels are programmatic dependents of the kernel before them on
// compute capability 9.0+ (Kernels::programmatic; CUDAKIT_DECODER_PDL=0 turns it off).
// Unless CUDAKIT_DECODER_GEMV=0, a decode step of up to 8 sequences runs its GEMMs
// through the weight-streaming GEMV kernels (tensor cores) with ln1 and ln2 fused in
// (4 GEMVs and the attention a layer instead of 7 kernels or more; Kernels::default_gemv_rows): gemv_embed takes the
// embedding as well (no embed_layer_norm), and gemv_logits the final norm, the LM head
// and the greedy choice (no argmax_tokens), so every kernel of the step is the decoder's
// own and a programmatic dependent (Kernels::small_batch_gemv; CUDAKIT_DECODER_GEMV=1
// takes it up to 32 sequences). With CUDAKIT_DECODER_FUSED_ATTENTION=1 the QKV GEMV of a
// one-sequence step also runs the layer's attention in the last of each head's blocks
// (gemv_qkv_attend, gemv_embed_attend), slower on the H200 than decode_attention
// (Kernels::fused_attention_threads). 59 kernels a step on the cuBLASLt path, 41 on the
// GEMV path, 33 with the attention fused; none takes a
// per-step value as an argument: the tokens and the
// position live in device memory (the position a DeviceValue the step advances itself),
// so the graph of a batch size is captured once and replayed as it is at every step.
//
// Thread safety: a Model is shared freely once built; a Session is used by one thread.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "cudakit/blas.hpp"
#include "cudakit/blas_lt.hpp"
#include "cudakit/cudakit.hpp"
#include "cudakit/device_value.hpp"
#include "cudakit/graph_cache.hpp"
#include "kernels.hpp"
#include "model.hpp"

namespace decoder {

/// The weights of one layer, as views of the model's buffer.
struct LayerWeights {
  cudakit::DeviceSpan<const bf16> ln1_weight, ln1_bias, qkv_weight, qkv_bias, out_weight, out_bias;
  cudakit::DeviceSpan<const bf16> ln2_weight, ln2_bias, up_weight, up_bias, down_weight, down_bias;
};

/// The model on one device (see above). Move-only.
class Model {
 public:
  /// Uploads the weights (one buffer) on `stream` and compiles the kernels for its device.
  Model(const HostWeights& weights, cudakit::StreamRef stream);

  const Config& config() const noexcept { return config_; }
  const Kernels& kernels() const noexcept { return kernels_; }
  const LayerWeights& layer(int index) const { return layers_.at(static_cast<std::size_t>(index)); }
  cudakit::DeviceSpan<const bf16> embed() const noexcept { return embed_; }
  cudakit::DeviceSpan<const bf16> position() const noexcept { return position_; }
  cudakit::DeviceSpan<const bf16> final_norm_weight() const noexcept { return final_norm_weight_; }
  cudakit::DeviceSpan<const bf16> final_norm_bias() const noexcept { return final_norm_bias_; }
  cudakit::DeviceSpan<const bf16> lm_head() const noexcept { return lm_head_; }
  /// The bytes of weights one decode step reads (every matrix and vector but the two
  /// embedding tables, of which it reads one row per sequence).
  std::size_t step_weight_bytes() const noexcept { return step_weight_bytes_; }
  /// The weights' buffer, for a streaming read of as many bytes as a step reads.
  cudakit::DeviceSpan<const bf16> weights() const noexcept { return step_weights_; }

 private:
  cudakit::DeviceSpan<const bf16> view(const HostWeights& weights, const std::string& name);

  Config config_;
  cudakit::DeviceBuffer<bf16> weights_;
  Kernels kernels_;
  std::vector<LayerWeights> layers_;
  cudakit::DeviceSpan<const bf16> embed_, position_, final_norm_weight_, final_norm_bias_, lm_head_;
  cudakit::DeviceSpan<const bf16> step_weights_;
  std::size_t step_weight_bytes_ = 0;
};

/// The largest batch and prompt a Session is made for.
struct SessionLimits {
  int max_batch = 32;
  int max_prompt = 128;
  /// The most steps one step_loop runs (the tokens it records on the device).
  int max_loop_steps = 256;
};

/// One generation context on one stream (see above). Not movable (the graph cache's
/// graphs name its buffers); used by one thread at a time.
class Session {
 public:
  /// Allocates the KV cache (max_positions per sequence), the activations and the tokens
  /// on `stream`, and takes a cuBLASLt handle for it. `model` must outlive the session.
  Session(const Model& model, cudakit::StreamRef stream, SessionLimits limits = {});
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Runs `batch` prompts of `prompt_length` tokens ([batch][prompt_length], row-major)
  /// through the model at once with causal attention, eagerly: fills positions 0 to
  /// prompt_length - 1 of the KV cache, puts each sequence's greedy next token in the
  /// session's tokens and the position at prompt_length. InvalidArgument beyond the limits.
  void prefill(std::span<const std::int32_t> prompts, int batch, int prompt_length);
  /// One decode step, submitted eagerly on the stream (59 launches). InvalidArgument
  /// before a prompt, or when the KV cache is full (max_positions).
  void step(int batch);
  /// The same step through the session's graph cache, keyed by the batch size.
  cudakit::GraphCacheOutcome step_cached(int batch);
  /// `steps` steps in one launch: the step captured once per (batch, steps) as the body
  /// of a device-side loop (GraphCache::run_loop), whose last kernel records the step's
  /// tokens and ends the loop after `steps`. The tokens: read_loop_tokens. The tokens of
  /// each step equal those of step_cached. InvalidArgument as step, or beyond
  /// SessionLimits::max_loop_steps.
  cudakit::GraphCacheOutcome step_loop(int batch, int steps);
  /// The tokens of the last step_loop, [steps][batch] (waits for them).
  void read_loop_tokens(int batch, int steps, std::span<std::int32_t> out);
  /// Microseconds one read of every weight a step reads takes with a plain streaming
  /// kernel (the memory roofline of a step), the mean of `repeats` reads.
  double measure_streaming_floor_us(int repeats = 20);
  /// Microseconds a CUDA graph of `kernels` dependent kernels takes, each reading an
  /// equal share of the weights before its wait and then the vector the kernel before
  /// it wrote (programmatic dependents where Kernels::programmatic): the floor of a step
  /// of that many kernels, its reads and its kernel boundaries and nothing else. The
  /// mean of `repeats` replays.
  double measure_kernel_chain_floor_us(int kernels, int repeats = 20);

  /// Copies the current tokens (the last step's greedy choice) into `out` (batch
  /// elements), waiting for them. Makes no heap allocation.
  void read_tokens(std::span<std::int32_t> out);
  /// Replaces the current tokens, so that the next step reads them (teacher forcing).
  void write_tokens(std::span<const std::int32_t> tokens);
  /// The final layer norm's output of the last step or prompt ([batch][d_model] bf16
  /// bits): the LM head's input.
  std::vector<std::uint16_t> read_hidden(int batch);
  /// The position the next step writes.
  int read_position();

  cudakit::GraphCacheStatistics cache_statistics() const { return cache_.statistics(); }
  cudakit::StreamRef stream() const noexcept { return stream_; }

 private:
  void check_batch(int batch, const char* call) const;
  /// check_batch, then that a prompt came first and the cache has room; counts the step.
  void check_step(int batch, const char* call);
  void enqueue_step(cudakit::StreamRef stream, int batch);
  /// The layers over `rows` rows of x (rows = batch for a step, batch · prompt_length for
  /// a prompt), then the final norm of the last row of each sequence, the LM head and
  /// the argmax.
  void enqueue_forward(cudakit::StreamRef stream, int batch, int prompt_length);
  cudakit::DeviceSpan<bf16> layer_cache(cudakit::DeviceBuffer<bf16>& cache, int layer);

  const Model& model_;
  cudakit::StreamRef stream_;
  SessionLimits limits_;
  cudakit::BlasLt lt_;
  cudakit::Blas blas_;  // the LM head (but in the GEMV path): bf16 in, fp32 logits out
  cudakit::DeviceBuffer<int> prompt_tokens_;  // [max_batch · max_prompt]
  cudakit::DeviceBuffer<int> tokens_;         // [max_batch]: this step's input, then its output
  cudakit::DeviceValue<int> position_;
  cudakit::DeviceBuffer<bf16> x_, normed_, qkv_, attention_, ffn_, hidden_;
  cudakit::DeviceBuffer<float> logits_;
  cudakit::DeviceBuffer<bf16> key_cache_, value_cache_;  // [layers][max_batch][heads][max_positions][64]
  cudakit::PinnedBuffer<int> host_tokens_;
  cudakit::GraphCache<int> cache_;
  cudakit::DeviceValue<int> loop_steps_done_;  // steps done in the current step_loop
  cudakit::DeviceBuffer<int> loop_tokens_;     // [max_loop_steps][max_batch]: step_loop's tokens
  cudakit::DeviceBuffer<unsigned> stream_sink_;  // the streaming read's (never written) result
  // gemv_logits' greedy-choice state (Kernels::gemv_choice_words): zeros between steps.
  cudakit::DeviceBuffer<unsigned long long> greedy_choice_;
  // The fused QKV GEMV's count of blocks done for each head: zeros between kernels.
  cudakit::DeviceBuffer<unsigned> heads_done_;
  cudakit::GraphCache<std::pair<int, int>> loop_cache_{{.capacity = 8}};  // keyed by (batch, steps)
  int next_position_ = -1;  // the device's position as the host knows it; -1 before a prompt
};

}  // namespace decoder
