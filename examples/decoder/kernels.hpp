// The decoder's own kernels (layer norm, attention over the KV cache, greedy argmax, the
// end of a looped step, a streaming read), compiled with NVRTC for the device in use. The
// GEMMs are cuBLASLt's (decoder.hpp).
#pragma once

#include <cuda_bf16.h>

#include "cudakit/cudakit.hpp"
#include "model.hpp"

namespace decoder {

using bf16 = __nv_bfloat16;

/// The kernels, loaded on one device. Shared by every session on that device.
struct Kernels {
  /// x = token_embedding[token] + position_embedding[position]; normed = layer_norm(x).
  /// (tokens, position, token_embedding, position_embedding, gamma, beta, x, normed,
  /// rows_per_sequence); one block of d_model/8 threads per row.
  using EmbedLayerNorm = void(const int*, const int*, const bf16*, const bf16*, const bf16*, const bf16*, bf16*, bf16*,
                              int);
  /// normed[r] = layer_norm(x[r · row_stride]) (x, row_stride, gamma, beta, normed).
  using LayerNorm = void(const bf16*, int, const bf16*, const bf16*, bf16*);
  /// (qkv, key_cache, value_cache, position, out, max_positions); grid (heads, batch), 256 threads.
  using DecodeAttention = void(const bf16*, bf16*, bf16*, const int*, bf16*, int);
  /// (qkv, key_cache, value_cache, out, prompt_length, max_positions); grid (heads, batch).
  using PrefillAttention = void(const bf16*, bf16*, bf16*, bf16*, int, int);
  /// (logits, vocab, next_tokens, position, advance); one block of 256 threads per row.
  using ArgmaxTokens = void(const float*, int, int*, int*, int);
  /// (loop, tokens, history, done, steps, batch); one thread: the end of a looped step.
  using LoopControl = void(unsigned long long, const int*, int*, int*, int, int);
  /// (x, gamma, beta, w, bias, residual, out, rows, n, k, gelu): out = epilogue(ln?(x) · wᵀ + bias),
  /// at most gemv_max_rows rows; the launch is gemv_shape's.
  using GemvBias = void(const bf16*, const bf16*, const bf16*, const bf16*, const bf16*, const bf16*, bf16*, int, int,
                        int, int);
  /// (x, gamma, beta, w, logits, normed, rows, n, k): logits = layer_norm(x) · wᵀ in fp32 and
  /// normed = layer_norm(x), the final norm and LM head of a decode step of at most
  /// gemv_max_rows contiguous rows; the launch is gemv_shape's.
  using GemvLogits = void(const bf16*, const bf16*, const bf16*, const bf16*, float*, bf16*, int, int, int);
  /// (data, 16-byte words, sink): reads every word once, for the streaming floor.
  using StreamRead = void(const bf16*, long long, unsigned*);

  static constexpr unsigned attention_threads = 256;
  static constexpr unsigned argmax_threads = 256;

  cudakit::Module module;
  cudakit::Kernel<EmbedLayerNorm> embed_layer_norm;
  cudakit::Kernel<LayerNorm> layer_norm;
  cudakit::Kernel<DecodeAttention> decode_attention;
  /// The same, loading the values with the keys: one memory round trip fewer, at half the
  /// blocks a multiprocessor holds (attention_kernel chooses).
  cudakit::Kernel<DecodeAttention> decode_attention_few;
  /// The device's multiprocessors (the choice of attention kernel).
  int multiprocessors = 0;
  cudakit::Kernel<PrefillAttention> prefill_attention;
  cudakit::Kernel<ArgmaxTokens> argmax_tokens;
  cudakit::Kernel<LoopControl> loop_control;
  cudakit::Kernel<StreamRead> stream_read;
  cudakit::Kernel<GemvBias> gemv_bias;
  cudakit::Kernel<GemvLogits> gemv_logits;
  /// Whether decode steps of at most gemv_rows sequences use gemv_bias, with the layer
  /// norms fused into it, instead of cuBLASLt and the layer_norm kernels, and gemv_logits
  /// for the LM head instead of cuBLAS (unless CUDAKIT_DECODER_GEMV=0).
  bool small_batch_gemv = false;
  static constexpr int gemv_max_rows = 16;  // what the kernels hold (the mma's 16 rows)
  /// The rows up to which decode steps take the GEMV path.
  static constexpr int gemv_rows = 16;
  static_assert(gemv_rows <= gemv_max_rows, "the GEMV kernels hold at most gemv_max_rows rows");
  /// Shared memory a block may opt in to on the device (the GEMV stages x there).
  std::size_t shared_memory_optin = 0;
  /// The GEMV's static shared memory (its warps' sums and the rows' norms), at most.
  static constexpr std::size_t gemv_static_shared = 9 * 1024;

  /// Whether a decode step of `rows` rows whose widest GEMM input is `widest_k` takes the
  /// GEMV path: switched on, at most gemv_rows rows, and x's rows fit the shared memory.
  bool takes_gemv(int rows, int widest_k) const {
    return small_batch_gemv && rows <= gemv_rows &&
           gemv_shape(rows, 8, widest_k).shared_memory_bytes + gemv_static_shared <= shared_memory_optin;
  }

  /// The launch of a GEMV over `rows` rows, n_out outputs and k_in inputs: a block of 8
  /// output columns each, with a warp per 32 words of k (4 to 16 warps: each lane's 8
  /// words, up to 8192-wide rows, are then in flight before the wait, and the blocks of
  /// two successive GEMVs fit the multiprocessors at once), and x's rows staged in shared
  /// memory.
  static cudakit::LaunchConfig gemv_shape(int rows, int n_out, int k_in) {
    const int words = k_in / 8;
    const int warps = words / 32 < 4 ? 4 : words / 32 > 16 ? 16 : words / 32;
    return {.grid = static_cast<unsigned>(n_out / 8),
            .block = static_cast<unsigned>(warps * 32),
            .shared_memory_bytes = static_cast<std::size_t>(rows) * static_cast<std::size_t>(words + 4) * 16,
            .allow_large_shared_memory = true};
  }

  /// Whether the decoder's own kernels are launched as programmatic dependents of the
  /// kernel before them (compute capability 9.0+, unless CUDAKIT_DECODER_PDL=0).
  bool programmatic = false;
  /// Whether each kernel lets its dependent launch as soon as all of its blocks run, so
  /// the next GEMV's weight reads overlap it (unless CUDAKIT_DECODER_EARLY_TRIGGER=0).
  bool early_trigger = true;

  /// `config` as a programmatic dependent launch when `programmatic` is set.
  cudakit::LaunchConfig dependent(cudakit::LaunchConfig config) const {
    config.programmatic_dependent_launch = programmatic;
    return config;
  }

  /// Compiles for `device` and loads. InvalidArgument for a shape the kernels do not
  /// cover (heads other than 64 wide, d_model not a multiple of 8 or above 8192, a
  /// vocabulary not a multiple of 8); CompileError, CompilerUnavailable from NVRTC.
  static Kernels compile(const cudakit::Device& device, const Config& config);

  /// The kernels' program compiled for `options.arch` (and its other options), with the
  /// shape of `config` and early triggers on or off, without loading it: what compile()
  /// loads, and what a machine without a GPU can check. Errors as compile().
  static cudakit::CompiledProgram compile_program(const Config& config, bool early_trigger,
                                                  cudakit::CompileOptions options);

  /// The decode attention for a grid of heads × batch blocks: decode_attention_few when
  /// the grid fits the multiprocessors at 2 blocks each (its registers allow no more),
  /// decode_attention otherwise.
  const cudakit::Kernel<DecodeAttention>& attention_kernel(int heads, int batch) const {
    return static_cast<long long>(heads) * batch <= 2LL * multiprocessors ? decode_attention_few : decode_attention;
  }

  /// Bytes of dynamic shared memory prefill_attention needs for a prompt.
  static std::size_t prefill_shared_bytes(int prompt_length) {
    const auto n = static_cast<std::size_t>(prompt_length);
    return (2 * n * 33 + 8 * (64 + n)) * 4;
  }
};

}  // namespace decoder
