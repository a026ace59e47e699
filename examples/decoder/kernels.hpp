// The decoder's own kernels (layer norm, attention over the KV cache, greedy argmax, the
// end of a looped step, a streaming read, and the GEMVs of decode steps of few sequences),
// compiled with NVRTC for the device in use. The other GEMMs are cuBLASLt's (decoder.hpp).
#pragma once

#include <algorithm>
#include <cstddef>

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
  /// (x, gamma, beta, w, bias, residual, out, rows, n, k, slice, groups, gelu): out =
  /// epilogue(ln?(x) · wᵀ + bias), at most gemv_max_rows rows; the launch, the slice and
  /// the groups are gemv_launch's.
  using GemvBias = void(const bf16*, const bf16*, const bf16*, const bf16*, const bf16*, const bf16*, bf16*, int, int,
                        int, int, int, int);
  /// (tokens, position, token_embedding, position_embedding, gamma, beta, w, bias, embedded,
  /// out, rows, n, k, slice, groups): the first GEMM of a decode step with the embedding
  /// and ln1 fused in, out = layer_norm(e) · wᵀ + bias for e = token_embedding[tokens[r]] +
  /// position_embedding[*position], and embedded = e (the residual stream: what
  /// embed_layer_norm writes to x); k is d_model; the launch, the slice and the groups
  /// are gemv_launch's.
  using GemvEmbed = void(const int*, const int*, const bf16*, const bf16*, const bf16*, const bf16*, const bf16*,
                         const bf16*, bf16*, bf16*, int, int, int, int, int);
  /// (x, gamma, beta, w, bias, qkv, rows, n, k, slice, groups, key_cache, value_cache,
  /// position, attention, max_positions, heads_done): gemv_bias for a QKV GEMM (no
  /// residual, no GELU), then the decode attention over the layer's cache as
  /// decode_attention computes it, its kernel fused in (takes_fused_attention);
  /// heads_done holds one count a head, zeros between kernels.
  using GemvQkvAttend = void(const bf16*, const bf16*, const bf16*, const bf16*, const bf16*, bf16*, int, int, int, int,
                             int, bf16*, bf16*, const int*, bf16*, int, unsigned*);
  /// (tokens, position, token_embedding, position_embedding, gamma, beta, w, bias, embedded,
  /// qkv, rows, n, k, slice, groups, key_cache, value_cache, attention, max_positions,
  /// heads_done): gemv_embed with the attention fused in, as GemvQkvAttend.
  using GemvEmbedAttend = void(const int*, const int*, const bf16*, const bf16*, const bf16*, const bf16*, const bf16*,
                               const bf16*, bf16*, bf16*, int, int, int, int, int, bf16*, bf16*, bf16*, int, unsigned*);
  /// (x, gamma, beta, w, logits, normed, rows, n, k, slice, groups, next_tokens, position,
  /// choice, advance): logits = layer_norm(x) · wᵀ in fp32 and normed = layer_norm(x), the
  /// final norm and LM head of a decode step of at most gemv_max_rows contiguous rows,
  /// then the greedy choice argmax_tokens makes (next_tokens, *position += advance)
  /// through `choice`, gemv_choice_words words that are zeros between steps; the launch,
  /// the slice and the groups are gemv_launch's.
  using GemvLogits = void(const bf16*, const bf16*, const bf16*, const bf16*, float*, bf16*, int, int, int, int, int,
                          int*, int*, unsigned long long*, int);
  /// (data, 16-byte words, sink): reads every word once, for the streaming floor.
  using StreamRead = void(const bf16*, long long, unsigned*);
  /// (data, 16-byte words, in, out, width, sink): reads its words, then `in` after the
  /// wait, and writes `out` (one link of the kernel-chain floor).
  using ChainLink = void(const bf16*, long long, const bf16*, bf16*, int, unsigned*);
  static constexpr unsigned chain_link_threads = 256;
  static constexpr int chain_link_words_a_thread = 8;  // the source's CHAIN_AHEAD

  static constexpr unsigned attention_threads = 256;
  /// The most positions the kernels take: a decode attention keeps a step's scores in its
  /// block's static shared memory (48 KiB, with the fused QKV GEMV's own beside them).
  static constexpr int max_positions = 8192;
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
  cudakit::Kernel<ChainLink> chain_link;
  cudakit::Kernel<GemvBias> gemv_bias;
  cudakit::Kernel<GemvLogits> gemv_logits;
  cudakit::Kernel<GemvEmbed> gemv_embed;
  /// The same for more than 16 rows (two tiles of the mma's rows).
  cudakit::Kernel<GemvBias> gemv_bias_wide;
  cudakit::Kernel<GemvLogits> gemv_logits_wide;
  cudakit::Kernel<GemvEmbed> gemv_embed_wide;
  cudakit::Kernel<GemvQkvAttend> gemv_qkv_attend;
  cudakit::Kernel<GemvEmbedAttend> gemv_embed_attend;
  /// The threads of a QKV GEMV block that runs the attention inside it (takes_fused_attention):
  /// 0 by default (the attention kernel of its own), 128 with CUDAKIT_DECODER_FUSED_ATTENTION=1
  /// (one group of 8 columns a block), 256 with =256 (two groups: the attention's passes
  /// over the cache hold twice the positions). On the H200 at one sequence (device-side
  /// loop, step p50) the fused attention cost more than the kernel it saves: 229.6 µs at
  /// 128 threads, 212.0 at 256, 206.2 in a kernel of its own. The head's last block runs
  /// its attention alone, after the head's other blocks have finished, and the next
  /// kernel waits for it; the attention kernel spreads the same work over the machine.
  int fused_attention_threads = 0;
  /// Whether decode steps of at most gemv_rows sequences use gemv_bias, with the layer
  /// norms fused into it, instead of cuBLASLt and the layer_norm kernels, and gemv_logits
  /// for the LM head instead of cuBLAS (unless CUDAKIT_DECODER_GEMV=0).
  bool small_batch_gemv = false;
  static constexpr int gemv_max_rows = 32;  // what the kernels hold (two tiles of the mma's 16 rows)
  /// The words of gemv_logits' greedy-choice state: a key per row, then a count of blocks.
  static constexpr int gemv_choice_words = gemv_max_rows + 1;
  /// The rows up to which decode steps take the GEMV path by default. On the H200
  /// (device-side loop, step p50, column groups by default_gemv_groups or as named):
  /// 1 row 206 µs against cuBLASLt's 280, 2 rows 212 against 285, 4 rows 235 against 303,
  /// 8 rows 272 against 288 (4 groups), 16 rows 339 (4 groups) against 315, 32 rows 548
  /// against 333. Its mma costs nothing per row; what grows with the rows is each block's
  /// staging of all of x's rows from L2 after its wait, which the column groups cut.
  static constexpr int default_gemv_rows = 8;
  static_assert(default_gemv_rows <= gemv_max_rows, "the GEMV kernels hold at most gemv_max_rows rows");
  /// The rows up to which decode steps take the GEMV path: default_gemv_rows, or every
  /// row count the kernels hold with CUDAKIT_DECODER_GEMV=1.
  int gemv_rows = default_gemv_rows;
  /// Shared memory a block may opt in to on the device (the GEMV stages x there).
  std::size_t shared_memory_optin = 0;
  /// The GEMV's static shared memory (its warps' sums and the rows' norms), at most.
  static constexpr std::size_t gemv_static_shared = 17 * 1024;

  /// A GEMV's launch, the words of x it stages in shared memory at a time, and the groups
  /// of 8 output columns a block computes.
  struct GemvLaunch {
    cudakit::LaunchConfig config;
    int slice = 0;
    int groups = 1;
  };

  /// The most groups of 8 output columns a GEMV block computes from one staging of x
  /// (gemv_groups): 1 at 1 row, 2 up to 4 rows, 4 above. Each block stages all of x's
  /// rows from L2, so at 8 columns a block and 8 rows the staging reads as many bytes
  /// as the weights, on every kernel's critical path; 4 groups read a quarter of that.
  /// One row's x is small, and one group keeps a block at 4 warps (more blocks per
  /// multiprocessor beside the kernel before). On the H200 (device-side loop, step p50,
  /// µs for 1, 2 and 4 groups): 1 row 229.5, -, 245.8; 2 rows 228.0, 211.6, 217.3; 4 rows
  /// 271.7, 235.4, 235.3; 8 rows 367.8, 290.3, 271.8; 16 rows 515.2, 400.7, 338.5.
  static int default_gemv_groups(int rows) { return rows <= 1 ? 1 : rows <= 4 ? 2 : 4; }
  /// The cap on a block's column groups: default_gemv_groups, or 1, 2 or 4 for every row
  /// count with CUDAKIT_DECODER_GEMV_GROUPS, for comparison.
  int gemv_groups_cap = 0;  // 0: default_gemv_groups
  int gemv_groups(int rows) const { return gemv_groups_cap > 0 ? gemv_groups_cap : default_gemv_groups(rows); }

  /// The warps of a group of 8 output columns over `words` 16-byte words of k, where x is
  /// staged whole: a warp per 32 words, 4 to 16.
  static int gemv_group_warps(int words) { return words / 32 < 4 ? 4 : words / 32 > 16 ? 16 : words / 32; }

  /// The launch of a GEMV over `rows` rows, n_out outputs and k_in inputs: groups of 8
  /// output columns a block (gemv_groups, where x is staged whole, the block stays within
  /// 16 warps and the groups divide n_out), each group with a warp per 32 words of k (4 to
  /// 16 warps: each lane's 8 words, all of a row up to 4096 wide, are then in flight
  /// before the wait), and x's rows staged in shared memory: all of k where they fit, else
  /// slices of 32 words a warp, as many warps as the shared memory holds (slice 0 where not
  /// even 4 warps' fit), and one group.
  /// `groups_wanted`, where non-zero, stands for gemv_groups(rows).
  GemvLaunch gemv_launch(int rows, int n_out, int k_in, int groups_wanted = 0) const {
    const int words = k_in / 8;
    int warps = gemv_group_warps(words);
    const std::size_t budget = shared_memory_optin > gemv_static_shared ? shared_memory_optin - gemv_static_shared : 0;
    const auto row_bytes = static_cast<std::size_t>(rows) * 16;
    int slice = words;
    int groups = 1;
    if (row_bytes * static_cast<std::size_t>(words + 4) > budget) {
      const std::size_t fits = budget / row_bytes;  // words a row, padding included
      warps = fits > 4 ? static_cast<int>(std::min<std::size_t>(16, (fits - 4) / 32)) : 0;
      slice = warps >= 4 ? 32 * warps : 0;
    } else {
      const int most = groups_wanted > 0 ? groups_wanted : gemv_groups(rows);
      while (groups < most && warps * groups * 2 <= 16 && n_out % (16 * groups) == 0) groups *= 2;
    }
    return {{.grid = static_cast<unsigned>(n_out / (8 * groups)),
             .block = static_cast<unsigned>(std::max(warps, 4) * groups * 32),
             .shared_memory_bytes = row_bytes * static_cast<std::size_t>(slice + 4),
             .allow_large_shared_memory = true},
            slice, groups};
  }

  /// Whether a decode step of `rows` rows takes the GEMV path: switched on, at most
  /// gemv_rows rows, the rows of the layer norms' inputs (d_model wide, normed whole) fit
  /// the shared memory, and a slice of the feed-forward width does.
  bool takes_gemv(int rows, int d_model, int ffn) const {
    return small_batch_gemv && rows <= gemv_rows && gemv_launch(rows, 8, d_model).slice == d_model / 8 &&
           gemv_launch(rows, 8, ffn).slice > 0;
  }

  /// Whether a GEMV-path decode step of `rows` rows runs each layer's attention inside its
  /// QKV GEMV: switched on, one row (the last block of a head runs the head's attention
  /// for every sequence, where the attention kernel has a block for each), and the QKV
  /// GEMV's launch (qkv_launch) in blocks of fused_attention_threads.
  bool takes_fused_attention(int rows, int d_model) const {
    return fused_attention_threads > 0 && rows == 1 &&
           qkv_launch(rows, d_model).config.block.x == static_cast<unsigned>(fused_attention_threads);
  }

  /// The QKV GEMV's launch: gemv_launch, at one row with as many groups of 8 columns as
  /// make a block of fused_attention_threads (a group is 128 threads at widths up to 1024).
  GemvLaunch qkv_launch(int rows, int d_model) const {
    const int group_threads = 32 * gemv_group_warps(d_model / 8);
    const int groups = fused_attention_threads > 0 && rows == 1 ? std::max(1, fused_attention_threads / group_threads) : 0;
    return gemv_launch(rows, 3 * d_model, d_model, groups);
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
  /// vocabulary or feed-forward width not a multiple of 8, more than max_positions
  /// positions); CompileError, CompilerUnavailable from NVRTC.
  static Kernels compile(const cudakit::Device& device, const Config& config);

  /// The kernels' program compiled for `options.arch` (and its other options), with the
  /// shape of `config`, early triggers on or off, and a single row of x held in registers
  /// (or staged in shared memory as several are), without loading it: what compile()
  /// loads, and what a machine without a GPU can check. Errors as compile().
  static cudakit::CompiledProgram compile_program(const Config& config, bool early_trigger,
                                                  cudakit::CompileOptions options, bool one_row_in_registers = true);

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
