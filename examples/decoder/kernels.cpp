// The decoder's kernels: their CUDA C++ source, compiled at run time with NVRTC for the
// device in use, and their typed handles (kernels.hpp).
#include "kernels.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace decoder {

namespace {

// The source. bf16 values travel as their bit patterns (unsigned short), so that no
// toolkit header is needed: conversions round to nearest even, as __float2bfloat16_rn and
// PyTorch do. Every sum, mean, variance and softmax is in fp32. D_MODEL, N_HEADS,
// MAX_POSITIONS and LAYER_NORM_EPS are defined by the compile; heads are 64 wide.
//
// Every kernel may be launched as a programmatic dependent of the kernel before it
// (Kernels::programmatic): its blocks then start while that kernel finishes, and wait for
// it (cudakit::device::wait_for_predecessors) before their first read of memory, so the
// launch latency overlaps the predecessor's tail and nothing is read early. Only the
// GEMV's weights, which no kernel writes, are read before the wait.
//
// With EARLY_TRIGGER (the default; CUDAKIT_DECODER_EARLY_TRIGGER=0 turns it off), every
// kernel lets its dependent launch as soon as all of its own blocks run
// (LET_DEPENDENTS_LAUNCH at its start), so the next GEMV's blocks start and put their
// weight reads in flight while this kernel still computes: the weights stream across the
// kernel boundaries instead of pausing at each one. The order stays the wait's: a
// dependent waits for its predecessor's completion, and that one waited for its own.
constexpr const char* source = R"kernels(
#include "cudakit/device/programmatic_launch.cuh"
#include "cudakit/device/graph_condition.cuh"

#if EARLY_TRIGGER
#define LET_DEPENDENTS_LAUNCH() cudakit::device::trigger_dependents()
#else
#define LET_DEPENDENTS_LAUNCH()
#endif

typedef unsigned short bf16;

#define HEAD_DIM 64
#define WARP 32
// -infinity, without math.h (NVRTC has no standard headers).
#define NEGATIVE_INFINITY __int_as_float(0xff800000)

__device__ __forceinline__ float bf16_to_float(bf16 b) { return __uint_as_float(((unsigned)b) << 16); }

__device__ __forceinline__ bf16 float_to_bf16(float f) {
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (bf16)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (bf16)(u >> 16);
}

// 8 bf16 values in 16 bytes, as floats.
__device__ __forceinline__ void unpack8(uint4 v, float* f) {
  f[0] = __uint_as_float(v.x << 16); f[1] = __uint_as_float(v.x & 0xffff0000u);
  f[2] = __uint_as_float(v.y << 16); f[3] = __uint_as_float(v.y & 0xffff0000u);
  f[4] = __uint_as_float(v.z << 16); f[5] = __uint_as_float(v.z & 0xffff0000u);
  f[6] = __uint_as_float(v.w << 16); f[7] = __uint_as_float(v.w & 0xffff0000u);
}

__device__ __forceinline__ unsigned pack2(float lo, float hi) {
  return (unsigned)float_to_bf16(lo) | ((unsigned)float_to_bf16(hi) << 16);
}

__device__ __forceinline__ uint4 pack8(const float* f) {
  return make_uint4(pack2(f[0], f[1]), pack2(f[2], f[3]), pack2(f[4], f[5]), pack2(f[6], f[7]));
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = WARP / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = WARP / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The sum over the block, returned to every thread; `scratch` holds one float per warp.
__device__ float block_sum(float v, float* scratch) {
  v = warp_sum(v);
  const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP, warps = blockDim.x / WARP;
  __syncthreads();  // an earlier reduction's readers are done with scratch
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  return warp_sum(lane < warps ? scratch[lane] : 0.0f);
}

__device__ float block_max(float v, float* scratch) {
  v = warp_max(v);
  const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP, warps = blockDim.x / WARP;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  return warp_max(lane < warps ? scratch[lane] : NEGATIVE_INFINITY);
}

// Layer norm of one row of D_MODEL values held 8 per thread (blockDim.x = D_MODEL / 8):
// PyTorch's formula, (x - mean) · rstd · gamma + beta, with the biased variance.
__device__ uint4 layer_norm_row(const float* x, const bf16* gamma, const bf16* beta) {
  __shared__ float scratch[WARP];
  float s = 0.0f;
  for (int i = 0; i < 8; ++i) s += x[i];
  const float mean = block_sum(s, scratch) * (1.0f / D_MODEL);
  float q = 0.0f;
  for (int i = 0; i < 8; ++i) q += (x[i] - mean) * (x[i] - mean);
  const float rstd = rsqrtf(block_sum(q, scratch) * (1.0f / D_MODEL) + LAYER_NORM_EPS);
  float g[8], b[8], y[8];
  unpack8(reinterpret_cast<const uint4*>(gamma)[threadIdx.x], g);
  unpack8(reinterpret_cast<const uint4*>(beta)[threadIdx.x], b);
  for (int i = 0; i < 8; ++i) y[i] = (x[i] - mean) * rstd * g[i] + b[i];
  return pack8(y);
}

// Word c (8 values) of token_embedding[token] + position_embedding[at], rounded to bf16
// as a bf16 add does.
__device__ __forceinline__ uint4 embedding_word(const bf16* token_embedding, const bf16* position_embedding,
                                                long long token, long long at, int c) {
  float e[8], p[8];
  unpack8(reinterpret_cast<const uint4*>(token_embedding + token * D_MODEL)[c], e);
  unpack8(reinterpret_cast<const uint4*>(position_embedding + at * D_MODEL)[c], p);
  for (int i = 0; i < 8; ++i) e[i] += p[i];
  return pack8(e);
}

// x = token_embedding[token] + position_embedding[position] (embedding_word), and its
// layer norm. One block per row; row r is token r of its sequence
// when rows_per_sequence > 1 (a prompt), at position *position + r % rows_per_sequence.
extern "C" __global__ void embed_layer_norm(const int* tokens, const int* position, const bf16* token_embedding,
                                            const bf16* position_embedding, const bf16* gamma, const bf16* beta,
                                            bf16* x, bf16* normed, int rows_per_sequence) {
  LET_DEPENDENTS_LAUNCH();
  cudakit::device::wait_for_predecessors();
  const int row = blockIdx.x;
  const long long token = tokens[row];
  const long long at = *position + row % rows_per_sequence;
  const uint4 word = embedding_word(token_embedding, position_embedding, token, at, threadIdx.x);
  float v[8];
  unpack8(word, v);
  reinterpret_cast<uint4*>(x + (long long)row * D_MODEL)[threadIdx.x] = word;
  reinterpret_cast<uint4*>(normed + (long long)row * D_MODEL)[threadIdx.x] = layer_norm_row(v, gamma, beta);
}

// normed[r] = layer_norm(x[r · row_stride]): row_stride is D_MODEL for every row, or a
// prompt's length times D_MODEL for the last token of each prompt.
extern "C" __global__ void layer_norm(const bf16* x, int row_stride, const bf16* gamma, const bf16* beta,
                                      bf16* normed) {
  LET_DEPENDENTS_LAUNCH();
  cudakit::device::wait_for_predecessors();
  const int row = blockIdx.x;
  float v[8];
  unpack8(reinterpret_cast<const uint4*>(x + (long long)row * row_stride)[threadIdx.x], v);
  reinterpret_cast<uint4*>(normed + (long long)row * D_MODEL)[threadIdx.x] = layer_norm_row(v, gamma, beta);
}

// Decode attention: one block of 256 threads per (head, sequence). Appends this step's
// key and value (from qkv) to the cache at *position, then attends over positions 0 to
// *position: scores in fp32 in shared memory, an fp32 softmax, the weighted sum of values
// in fp32. Each key and value row (64 bf16, 128 bytes) is read once, by 8 threads of 16
// bytes each; 32 rows per pass, DECODE_UNROLL passes in flight per thread.
// Cache layout: [sequence][head][MAX_POSITIONS... max_positions][64] per layer.
// VALUES_WITH_KEYS loads the first pass's values together with its keys (they do not
// depend on the scores): up to THREADS / 8 · DECODE_UNROLL positions, the whole cache in
// most steps, then cost one memory round trip instead of two, for 96 registers a thread
// instead of 58. The host takes that variant (decode_attention_few) only for a grid that
// fits the multiprocessors at 2 blocks each; a larger one keeps the occupancy.
// THREADS is the block's size (the fused QKV GEMV's attention runs in its 128 threads);
// FROM_L2 reads this step's q, k and v through L2 only: the fused kernel's other blocks
// wrote them during the same kernel, and no L1 line of this multiprocessor may stand in.
#define DECODE_THREADS 256
#define DECODE_UNROLL 8

__device__ __forceinline__ uint4 load_from_l2(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

template <bool FROM_L2>
__device__ __forceinline__ uint4 load_qkv_word(const bf16* at, int word) {
  const uint4* p = reinterpret_cast<const uint4*>(at) + word;
  return FROM_L2 ? load_from_l2(p) : *p;
}

// The shared memory of attend for up to THREADS threads, declared by its caller (the
// fused QKV GEMV's two block sizes then share one).
template <int THREADS>
struct AttendShared {
  float probabilities[MAX_POSITIONS];
  float scratch[WARP];
  float partial[THREADS / WARP][HEAD_DIM];
};

template <bool VALUES_WITH_KEYS, int THREADS, bool FROM_L2, int SHARED_THREADS>
__device__ __forceinline__ void attend(const bf16* qkv, bf16* key_cache, bf16* value_cache, const int* position,
                                       bf16* out, int max_positions, int head, int sequence,
                                       AttendShared<SHARED_THREADS>& shared) {
  static_assert(THREADS <= SHARED_THREADS, "attend's shared memory holds its threads' sums");
  constexpr int GROUPS = THREADS / 8;
  float* probabilities = shared.probabilities;
  float* scratch = shared.scratch;
  auto& partial = shared.partial;
  const int tid = threadIdx.x;
  const int chunk = tid % 8, group = tid / 8;
  const int at = *position, length = at + 1;
  const bf16* row = qkv + (long long)sequence * 3 * D_MODEL;
  const long long base = ((long long)sequence * N_HEADS + head) * max_positions * HEAD_DIM;
  uint4* keys = reinterpret_cast<uint4*>(key_cache + base);
  uint4* values = reinterpret_cast<uint4*>(value_cache + base);

  if (tid < 8)
    keys[(long long)at * 8 + tid] = load_qkv_word<FROM_L2>(row + D_MODEL + head * HEAD_DIM, tid);
  else if (tid < 16)
    values[(long long)at * 8 + tid - 8] = load_qkv_word<FROM_L2>(row + 2 * D_MODEL + head * HEAD_DIM, tid - 8);
  float q[8];
  unpack8(load_qkv_word<FROM_L2>(row + head * HEAD_DIM, chunk), q);
  __syncthreads();  // this step's key and value are in the cache for every thread

  const float scale = 0.125f;  // 1/√64
  float local_max = NEGATIVE_INFINITY;
  uint4 first_values[DECODE_UNROLL];
  for (int first = 0; first < length; first += GROUPS * DECODE_UNROLL) {
    uint4 k[DECODE_UNROLL];
#pragma unroll
    for (int u = 0; u < DECODE_UNROLL; ++u) {
      const int j = first + group + GROUPS * u;
      k[u] = j < length ? keys[(long long)j * 8 + chunk] : make_uint4(0, 0, 0, 0);
      if (VALUES_WITH_KEYS && first == 0)
        first_values[u] = j < length ? values[(long long)j * 8 + chunk] : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < DECODE_UNROLL; ++u) {
      const int j = first + group + GROUPS * u;
      float kf[8];
      unpack8(k[u], kf);
      float s = 0.0f;
      for (int i = 0; i < 8; ++i) s += q[i] * kf[i];
      s += __shfl_xor_sync(0xffffffffu, s, 1);
      s += __shfl_xor_sync(0xffffffffu, s, 2);
      s += __shfl_xor_sync(0xffffffffu, s, 4);
      s *= scale;
      if (j < length) {
        if (chunk == 0) probabilities[j] = s;
        local_max = fmaxf(local_max, s);
      }
    }
  }
  const float max_score = block_max(local_max, scratch);  // its barrier publishes the scores
  float local_sum = 0.0f;
  for (int j = tid; j < length; j += THREADS) {
    const float p = expf(probabilities[j] - max_score);
    probabilities[j] = p;
    local_sum += p;
  }
  const float sum = block_sum(local_sum, scratch);  // and the probabilities

  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int first = 0; first < length; first += GROUPS * DECODE_UNROLL) {
    uint4 v[DECODE_UNROLL];
#pragma unroll
    for (int u = 0; u < DECODE_UNROLL; ++u) {
      const int j = first + group + GROUPS * u;
      if (VALUES_WITH_KEYS && first == 0) v[u] = first_values[u];
      else v[u] = j < length ? values[(long long)j * 8 + chunk] : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < DECODE_UNROLL; ++u) {
      const int j = first + group + GROUPS * u;
      const float p = j < length ? probabilities[j] : 0.0f;
      float vf[8];
      unpack8(v[u], vf);
      for (int i = 0; i < 8; ++i) acc[i] += p * vf[i];
    }
  }
  // The 4 groups of a warp share each chunk: lanes c, c+8, c+16, c+24.
  for (int i = 0; i < 8; ++i) {
    acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], 8);
    acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], 16);
  }
  const int warp = tid / WARP, lane = tid % WARP;
  if (lane < 8)
    for (int i = 0; i < 8; ++i) partial[warp][lane * 8 + i] = acc[i];
  __syncthreads();
  if (tid < HEAD_DIM) {
    float total = 0.0f;
    for (int w = 0; w < THREADS / WARP; ++w) total += partial[w][tid];
    out[(long long)sequence * D_MODEL + head * HEAD_DIM + tid] = float_to_bf16(total / sum);
  }
}

extern "C" __global__ void __launch_bounds__(DECODE_THREADS)
decode_attention(const bf16* qkv, bf16* key_cache, bf16* value_cache, const int* position, bf16* out,
                 int max_positions) {
  LET_DEPENDENTS_LAUNCH();
  cudakit::device::wait_for_predecessors();
  __shared__ AttendShared<DECODE_THREADS> shared;
  attend<false, DECODE_THREADS, false>(qkv, key_cache, value_cache, position, out, max_positions, blockIdx.x,
                                       blockIdx.y, shared);
}

extern "C" __global__ void __launch_bounds__(DECODE_THREADS)
decode_attention_few(const bf16* qkv, bf16* key_cache, bf16* value_cache, const int* position, bf16* out,
                     int max_positions) {
  LET_DEPENDENTS_LAUNCH();
  cudakit::device::wait_for_predecessors();
  __shared__ AttendShared<DECODE_THREADS> shared;
  attend<true, DECODE_THREADS, false>(qkv, key_cache, value_cache, position, out, max_positions, blockIdx.x,
                                      blockIdx.y, shared);
}

// Prompt attention: one block of 256 threads per (head, sequence) over a prompt of
// `length` tokens at positions 0 to length - 1. Copies the prompt's keys and values into
// the cache and into shared memory (rows padded to 33 words, so that 32 lanes reading
// 32 rows hit 32 banks), then each warp takes queries t = warp, warp + 8, ...: causal
// scores over keys 0..t in fp32, an fp32 softmax, the weighted sum of values.
// Dynamic shared memory: 2 · length · 33 words for keys and values, 8 · (64 + length)
// floats for each warp's query and probabilities.
#define PREFILL_THREADS 256
#define PREFILL_WARPS (PREFILL_THREADS / WARP)
#define ROW_WORDS 33
extern "C" __global__ void __launch_bounds__(PREFILL_THREADS)
prefill_attention(const bf16* qkv, bf16* key_cache, bf16* value_cache, bf16* out, int length, int max_positions) {
  cudakit::device::wait_for_predecessors();
  extern __shared__ unsigned shared_words[];
  unsigned* key_rows = shared_words;
  unsigned* value_rows = key_rows + length * ROW_WORDS;
  float* warp_space = reinterpret_cast<float*>(value_rows + length * ROW_WORDS);
  const int head = blockIdx.x, sequence = blockIdx.y, tid = threadIdx.x;
  const long long base = ((long long)sequence * N_HEADS + head) * max_positions * HEAD_DIM;
  uint4* keys = reinterpret_cast<uint4*>(key_cache + base);
  uint4* values = reinterpret_cast<uint4*>(value_cache + base);

  for (int i = tid; i < length * 8; i += PREFILL_THREADS) {
    const int t = i / 8, chunk = i % 8;
    const bf16* row = qkv + ((long long)sequence * length + t) * 3 * D_MODEL + head * HEAD_DIM;
    const uint4 k = reinterpret_cast<const uint4*>(row + D_MODEL)[chunk];
    const uint4 v = reinterpret_cast<const uint4*>(row + 2 * D_MODEL)[chunk];
    keys[(long long)t * 8 + chunk] = k;
    values[(long long)t * 8 + chunk] = v;
    unsigned* kr = key_rows + t * ROW_WORDS + chunk * 4;
    unsigned* vr = value_rows + t * ROW_WORDS + chunk * 4;
    kr[0] = k.x; kr[1] = k.y; kr[2] = k.z; kr[3] = k.w;
    vr[0] = v.x; vr[1] = v.y; vr[2] = v.z; vr[3] = v.w;
  }
  __syncthreads();

  const int warp = tid / WARP, lane = tid % WARP;
  float* query = warp_space + warp * (HEAD_DIM + length);
  float* probabilities = query + HEAD_DIM;
  const float scale = 0.125f;
  for (int t = warp; t < length; t += PREFILL_WARPS) {
    const bf16* row = qkv + ((long long)sequence * length + t) * 3 * D_MODEL + head * HEAD_DIM;
    const unsigned qw = reinterpret_cast<const unsigned*>(row)[lane];
    query[2 * lane] = __uint_as_float(qw << 16);
    query[2 * lane + 1] = __uint_as_float(qw & 0xffff0000u);
    __syncwarp();
    float local_max = NEGATIVE_INFINITY;
    for (int j = lane; j <= t; j += WARP) {
      const unsigned* kr = key_rows + j * ROW_WORDS;
      float s = 0.0f;
      for (int w = 0; w < HEAD_DIM / 2; ++w) {
        s += query[2 * w] * __uint_as_float(kr[w] << 16);
        s += query[2 * w + 1] * __uint_as_float(kr[w] & 0xffff0000u);
      }
      s *= scale;
      probabilities[j] = s;
      local_max = fmaxf(local_max, s);
    }
    const float max_score = warp_max(local_max);
    float local_sum = 0.0f;
    for (int j = lane; j <= t; j += WARP) {
      const float p = expf(probabilities[j] - max_score);
      probabilities[j] = p;
      local_sum += p;
    }
    const float sum = warp_sum(local_sum);
    __syncwarp();
    float a0 = 0.0f, a1 = 0.0f;
    for (int j = 0; j <= t; ++j) {
      const unsigned vw = value_rows[j * ROW_WORDS + lane];
      a0 += probabilities[j] * __uint_as_float(vw << 16);
      a1 += probabilities[j] * __uint_as_float(vw & 0xffff0000u);
    }
    reinterpret_cast<unsigned*>(out + ((long long)sequence * length + t) * D_MODEL + head * HEAD_DIM)[lane] =
        pack2(a0 / sum, a1 / sum);
    __syncwarp();  // the next query overwrites this one's query and probabilities
  }
}

// Greedy decoding: next_tokens[r] = the index of row r's largest logit (the lowest index
// among equal ones, as torch.argmax). One block of 256 threads per row. Block 0 then
// advances *position by `advance` (1 after a decode step, 0 after a prompt): the graph of
// a step moves to the next position by itself.
#define ARGMAX_THREADS 256
extern "C" __global__ void __launch_bounds__(ARGMAX_THREADS)
argmax_tokens(const float* logits, int vocab, int* next_tokens, int* position, int advance) {
  LET_DEPENDENTS_LAUNCH();
  cudakit::device::wait_for_predecessors();
  __shared__ float best_values[ARGMAX_THREADS / WARP];
  __shared__ int best_indices[ARGMAX_THREADS / WARP];
  const int row = blockIdx.x, tid = threadIdx.x;
  const float4* values = reinterpret_cast<const float4*>(logits + (long long)row * vocab);
  float best = NEGATIVE_INFINITY;
  int index = 0x7fffffff;
  for (int c = tid; c < vocab / 4; c += ARGMAX_THREADS) {
    const float4 v = values[c];
    const float f[4] = {v.x, v.y, v.z, v.w};
    for (int i = 0; i < 4; ++i)
      if (f[i] > best) best = f[i], index = c * 4 + i;  // c rises: the first of equal values stays
  }
  for (int o = WARP / 2; o > 0; o >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, best, o);
    const int other_index = __shfl_xor_sync(0xffffffffu, index, o);
    if (other > best || (other == best && other_index < index)) best = other, index = other_index;
  }
  const int warp = tid / WARP, lane = tid % WARP;
  if (lane == 0) best_values[warp] = best, best_indices[warp] = index;
  __syncthreads();
  if (tid == 0) {
    for (int w = 1; w < ARGMAX_THREADS / WARP; ++w)
      if (best_values[w] > best || (best_values[w] == best && best_indices[w] < index))
        best = best_values[w], index = best_indices[w];
    next_tokens[row] = index == 0x7fffffff ? 0 : index;
    if (row == 0) *position += advance;
  }
}

// The small-batch GEMM of a decode step, y = epilogue(x · Wᵀ + b), for at most
// GEMV_MAX_ROWS rows of x: a weight-streaming GEMV on the tensor cores. The rows of x are
// few, so the time is the weights' reading; each weight is read once and used for every
// row, and the multiply-adds are mma.sync's (m16n8k16, bf16 in, fp32 sums), so the
// multiply-adds of 16 rows cost what those of 1 cost, and 32 rows two mmas a word instead
// of one. (Staging x's rows does grow with them: Kernels::default_gemv_rows.)
//
// One block computes 8 output columns (the mma's n) over the whole of k. W is [n][k]
// row-major, read in 16-byte words. x is staged in shared memory a slice of `slice` words
// at a time (the host makes it all of k where the rows fit, and always for a fused norm),
// rows padded by 4 words so that two rows' fragments fall in different banks, optionally
// layer-normed on the way in (gamma non-null: x is the residual stream, the next layer's
// norm fused into its first GEMM). The warps split each slice in contiguous parts; lane
// (g, t) of a warp (g = lane / 4, t = lane % 4) reads column g's words part_begin + t + 4·s,
// and each word feeds two mmas: the mma's k order is a permutation of the word's, the
// same one for x's fragment (row g's word at the same place), so the sums are x · wᵀ.
// The warps' sums meet in shared memory; the epilogue is cuBLASLt's: the fp32 sum plus
// the bias, plus the residual (residual non-null; it may be `out` itself), then GELU
// (gelu non-zero), rounded to bf16 once.
//
// A lane's first GEMV_AHEAD words are loaded before the wait (for every matrix of this
// model that is all of them: the host gives a block a warp per 32 words of k), so the
// weights stream while the kernel before still runs; later words keep GEMV_AHEAD in flight.
// GEMV_MAX_ROWS is Kernels::gemv_max_rows, defined by the compile; GEMV_ONE_ROW_IN_REGISTERS
// (1 unless CUDAKIT_DECODER_STAGED_ROW=1) takes gemv_one_row_word's path at one row.
#define GEMV_MAX_WARPS 16
#define GEMV_AHEAD 8
#define GEMV_ROW_PAD 4

// Word c of column `row` of W, or zeros where the lane's part has none.
__device__ __forceinline__ uint4 gemv_weight_word(const uint4* row, int c, bool inside) {
  return inside ? row[c] : make_uint4(0, 0, 0, 0);
}

// The two mmas of one 16-byte word of W, the first adding into `first`, the second into
// `second`: two independent chains where they differ (gemv_one_row_mmas), one where not.
__device__ __forceinline__ void gemv_mma_split(uint4 w, uint4 low, uint4 high, float* first, float* second) {
#if __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(first[0]), "+f"(first[1]), "+f"(first[2]), "+f"(first[3])
      : "r"(low.x), "r"(high.x), "r"(low.y), "r"(high.y), "r"(w.x), "r"(w.y));
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(second[0]), "+f"(second[1]), "+f"(second[2]), "+f"(second[3])
      : "r"(low.z), "r"(high.z), "r"(low.w), "r"(high.w), "r"(w.z), "r"(w.w));
#endif
}

// acc += x fragment · weight word: the two mmas one 16-byte word of W feeds. `low` and
// `high` are x's words of rows g and g + 8 (of a tile of 16 rows) at the weight word's place.
__device__ __forceinline__ void gemv_mma(uint4 w, uint4 low, uint4 high, float* acc) {
  gemv_mma_split(w, low, high, acc, acc);
}

__device__ __forceinline__ float gelu_tanh(float v) {
  const float inner = 0.7978845608028654f * (v + 0.044715f * v * v * v);
  return 0.5f * v * (1.0f + tanhf(inner));
}

// Stages words [first, first + count) of `rows` rows of x (k values each, contiguous) in
// shared memory, `stride` words apart, after a barrier (the previous slice's readers are
// done) and before one (this slice is there for every warp). The copies are cp.async's:
// every word in flight at once, through no register (the weight words hold those).
__device__ __forceinline__ void copy_to_shared(uint4* to, const uint4* from) {
#if __CUDA_ARCH__ >= 800
  unsigned address;
  asm volatile("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }\n" : "=r"(address) : "l"(to));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(from) : "memory");
#endif
}

__device__ void gemv_stage_slice(const bf16* x, uint4* staged, int stride, int rows, int words, int first,
                                 int count) {
  __syncthreads();
  for (int i = threadIdx.x; i < rows * count; i += blockDim.x)
    copy_to_shared(staged + (i / count) * stride + i % count,
                   reinterpret_cast<const uint4*>(x) + (i / count) * words + first + i % count);
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
  __syncthreads();
}

// Two bf16 values of x (one 32-bit word), normed: (x - mean) · rstd · gamma + beta.
__device__ __forceinline__ unsigned norm_pair(unsigned x, unsigned gamma, unsigned beta, float mean, float rstd) {
  const float lo = (__uint_as_float(x << 16) - mean) * rstd * __uint_as_float(gamma << 16) + __uint_as_float(beta << 16);
  const float hi = (__uint_as_float(x & 0xffff0000u) - mean) * rstd * __uint_as_float(gamma & 0xffff0000u) +
                   __uint_as_float(beta & 0xffff0000u);
  return pack2(lo, hi);
}

// Layer norm, in place, of the staged rows (all of k: PyTorch's formula, fp32, the biased
// variance); `gamma_word` and `beta_word` are word tid of gamma and beta (where tid <
// words), loaded before the wait. When `normed` is non-null, block 0 also writes the normed rows there.
__device__ void gemv_norm_staged(const bf16* gamma, const bf16* beta, uint4 gamma_word, uint4 beta_word,
                                 uint4* staged, int stride, int rows, int words, int k, bf16* normed) {
  __shared__ float mean_rstd[GEMV_MAX_ROWS][2];
  const int tid = threadIdx.x, threads = blockDim.x, warp = tid / WARP, lane = tid % WARP;
  for (int r = warp; r < rows; r += threads / WARP) {  // a warp a row
    const uint4* row = staged + r * stride;
    float s = 0.0f;
    for (int c = lane; c < words; c += WARP) {
      float v[8];
      unpack8(row[c], v);
      for (int j = 0; j < 8; ++j) s += v[j];
    }
    const float mean = warp_sum(s) / k;
    float q = 0.0f;
    for (int c = lane; c < words; c += WARP) {
      float v[8];
      unpack8(row[c], v);
      for (int j = 0; j < 8; ++j) q += (v[j] - mean) * (v[j] - mean);
    }
    const float rstd = rsqrtf(warp_sum(q) / k + LAYER_NORM_EPS);
    if (lane == 0) mean_rstd[r][0] = mean, mean_rstd[r][1] = rstd;
  }
  __syncthreads();
  // A column of words at a time, every row: gamma and beta are read once (the first
  // column's were loaded before the wait).
  for (int c = tid; c < words; c += threads) {
    const uint4 gw = c == tid ? gamma_word : reinterpret_cast<const uint4*>(gamma)[c];
    const uint4 bw = c == tid ? beta_word : reinterpret_cast<const uint4*>(beta)[c];
    for (int r = 0; r < rows; ++r) {
      uint4 y = staged[r * stride + c];
      const float mean = mean_rstd[r][0], rstd = mean_rstd[r][1];
      y.x = norm_pair(y.x, gw.x, bw.x, mean, rstd);
      y.y = norm_pair(y.y, gw.y, bw.y, mean, rstd);
      y.z = norm_pair(y.z, gw.z, bw.z, mean, rstd);
      y.w = norm_pair(y.w, gw.w, bw.w, mean, rstd);
      staged[r * stride + c] = y;
      if (normed != nullptr && blockIdx.x == 0) reinterpret_cast<uint4*>(normed)[r * words + c] = y;
    }
  }
  __syncthreads();
}

// The rows a GEMV multiplies: x (`rows` rows, k wide, contiguous), or, for the first GEMM
// of a decode step, the embeddings of the step's tokens at its position (gemv_embed).
struct GemvRows {
  const bf16* x;
  const int* tokens;                // the embedded rows' tokens, one a row
  const int* position;              // the step's position
  const bf16* token_embedding;      // [vocab][D_MODEL]
  const bf16* position_embedding;   // [MAX_POSITIONS][D_MODEL]
  bf16* embedded;                   // block 0 writes the embedded rows here: the residual stream
};

// Stages a decode step's embedded rows whole (k = D_MODEL, embedding_word), between two
// barriers as gemv_stage_slice. Block 0 also writes them to rows.embedded, which the later
// GEMMs of the step add to.
__device__ void gemv_stage_embeddings(const GemvRows& rows_in, uint4* staged, int stride, int rows, int words) {
  __syncthreads();
  const long long at = *rows_in.position;
  for (int i = threadIdx.x; i < rows * words; i += blockDim.x) {
    const int r = i / words, c = i % words;
    const uint4 y = embedding_word(rows_in.token_embedding, rows_in.position_embedding, rows_in.tokens[r], at, c);
    staged[r * stride + c] = y;
    if (blockIdx.x == 0) reinterpret_cast<uint4*>(rows_in.embedded)[r * words + c] = y;
  }
  __syncthreads();
}

// Counts this block done on *count (after a barrier: every thread's writes that others
// need were fenced by the thread that made them) and tells every thread of the block
// whether it was the last of `blocks`; the last then fences, so that the other blocks'
// writes are seen after their counts. No block waits for another.
template <typename Count>
__device__ bool counted_last(Count* count, Count blocks) {
  __shared__ int last;
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(count, Count(1)) == blocks - 1;
  __syncthreads();
  if (last) __threadfence();
  return last;
}

// The greedy choice fused into the LM head's GEMV (gemv_logits): what argmax_tokens does,
// without a kernel of its own. `state` holds a 64-bit key per row, then the count of the
// kernel's blocks that are done: zeros between steps (the last block leaves them so).
struct GreedyChoice {
  int* next_tokens;
  int* position;
  unsigned long long* state;  // [GEMV_MAX_ROWS + 1]
  int advance;
};

// A logit and its column as one key whose order is torch.argmax's choice: the larger
// value first, then the lower column. -0 keys as +0 (they are equal); NaN keys as 0,
// below every value, so it is never chosen (an all-NaN row gives token 0, as
// argmax_tokens does).
__device__ __forceinline__ unsigned long long greedy_key(float v, int column) {
  if (v != v) return 0ull;
  const unsigned bits = v == 0.0f ? 0u : __float_as_uint(v);
  const unsigned ordered = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return ((unsigned long long)ordered << 32) | (unsigned long long)(~(unsigned)column);
}

// Each block offers its best column of each row (thread o holds row o / columns, the
// block's column o % columns: `columns` neighbouring lanes a row, 8, 16 or 32) to the
// row's key, by a 64-bit atomic max that is skipped where a better key is already there.
// The last block to count itself done then reads and resets the keys, writes the tokens,
// resets the count and advances the position.
__device__ void gemv_choose(const GreedyChoice& choice, const unsigned long long* keys, int rows, int columns) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    unsigned long long key = keys[h];
    for (int s = columns / 2; s > 0; s >>= 1) {  // every lane takes part: blockDim.x is whole warps
      const unsigned long long other = __shfl_xor_sync(0xffffffffu, key, s);
      key = other > key ? other : key;
    }
    const int o = tid + h * blockDim.x;
    if (o < rows * columns && o % columns == 0) {
      unsigned long long* best = choice.state + o / columns;
      if (key > *reinterpret_cast<volatile unsigned long long*>(best)) {
        atomicMax(best, key);
        __threadfence();  // the offer is seen before the block's count
      }
    }
  }
  if (!counted_last(choice.state + GEMV_MAX_ROWS, (unsigned long long)gridDim.x)) return;
  if (tid < rows) {
    const unsigned long long key = atomicExch(choice.state + tid, 0ull);
    choice.next_tokens[tid] = key == 0ull ? 0 : (int)~(unsigned)key;
  }
  if (tid == 0) {
    atomicExch(choice.state + GEMV_MAX_ROWS, 0ull);
    *choice.position += choice.advance;
  }
}

// The decode attention fused into the QKV GEMV (gemv_qkv_attend, gemv_embed_attend):
// each block counts itself done for its head (its 8 · groups columns lie in one head's
// q, k or v); the last of a head's 3 · 64 / (8 · groups) blocks runs the head's decode
// attention (attend) for every sequence, in the block's 128 or 256 threads, and resets
// the count for the next layer's kernel. The attention kernel of its own, and its launch
// and wait, are then gone from the step.
struct FusedAttention {
  bf16* key_cache;
  bf16* value_cache;
  const int* position;
  bf16* out;
  int max_positions;
  unsigned* heads_done;  // [N_HEADS]: zeros between kernels
};

__device__ void gemv_attend_if_last(const FusedAttention& a, const bf16* qkv, int column0, int columns,
                                    int sequences) {
  __shared__ AttendShared<256> shared;  // for either block size
  const int head = (column0 % D_MODEL) / HEAD_DIM;
  __threadfence();  // this block's columns of q, k or v are seen before its count
  if (!counted_last(a.heads_done + head, 3u * HEAD_DIM / columns)) return;
  if (threadIdx.x == 0) atomicExch(a.heads_done + head, 0u);
  for (int s = 0; s < sequences; ++s) {
    if (blockDim.x == 256)
      attend<false, 256, true>(qkv, a.key_cache, a.value_cache, a.position, a.out, a.max_positions, head, s, shared);
    else
      attend<false, 128, true>(qkv, a.key_cache, a.value_cache, a.position, a.out, a.max_positions, head, s, shared);
  }
}

// One row of x, one group, a warp per 32 words of k: a decode step's GEMVs at batch 1
// (gemv's one_row). Then lane (0, t) of warp k_warp needs x's words k_warp·32 + t + 4i for
// the mma's 8 steps i, and lane L holds word k_warp·32 + L: one word a lane, from global
// memory (L2) straight into registers, passed on by shuffles. A normed x (k is D_MODEL,
// at most GEMV_ONE_ROW_NORM_WORDS words a lane) is normed by every warp itself from the
// whole row in its lanes' registers: the sums, in their order, are gemv_norm_staged's.
#define GEMV_ONE_ROW_NORM_WORDS 4

template <bool EMBED>
__device__ __forceinline__ uint4 gemv_row_word(const GemvRows& rows_in, long long at, int c) {
  if (EMBED) return embedding_word(rows_in.token_embedding, rows_in.position_embedding, rows_in.tokens[0], at, c);
  return reinterpret_cast<const uint4*>(rows_in.x)[c];
}

// This lane's word of the row, normed where gamma is non-null; block 0 also writes the
// embedded row (EMBED) and the normed row (`normed` non-null), as the staging does.
template <bool EMBED>
__device__ __forceinline__ uint4 gemv_one_row_word(const GemvRows& rows_in, bool norm, uint4 gamma_word,
                                                   uint4 beta_word, int words, int k, bf16* normed) {
  const int lane = threadIdx.x % WARP, k_warp = threadIdx.x / WARP, c = k_warp * WARP + lane;
  const long long at = EMBED ? *rows_in.position : 0;
  uint4 own = make_uint4(0, 0, 0, 0);
  if (!norm) {
    own = gemv_row_word<EMBED>(rows_in, at, c);
    if (EMBED && blockIdx.x == 0) reinterpret_cast<uint4*>(rows_in.embedded)[c] = own;
  } else {
    uint4 row[GEMV_ONE_ROW_NORM_WORDS];
#pragma unroll
    for (int j = 0; j < GEMV_ONE_ROW_NORM_WORDS; ++j)
      row[j] = j * WARP < words ? gemv_row_word<EMBED>(rows_in, at, j * WARP + lane) : make_uint4(0, 0, 0, 0);
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < GEMV_ONE_ROW_NORM_WORDS; ++j) {
      float v[8];
      unpack8(row[j], v);
      for (int i = 0; i < 8; ++i) s += v[i];
    }
    const float mean = warp_sum(s) / k;
    float q = 0.0f;
#pragma unroll
    for (int j = 0; j < GEMV_ONE_ROW_NORM_WORDS; ++j) {
      if (j * WARP >= words) continue;  // the padding's zeros are no values of the row
      float v[8];
      unpack8(row[j], v);
      for (int i = 0; i < 8; ++i) q += (v[i] - mean) * (v[i] - mean);
    }
    const float rstd = rsqrtf(warp_sum(q) / k + LAYER_NORM_EPS);
#pragma unroll
    for (int j = 0; j < GEMV_ONE_ROW_NORM_WORDS; ++j)  // row[k_warp], without indexing registers at run time
      if (j == k_warp) own = row[j];
    if (EMBED && blockIdx.x == 0) reinterpret_cast<uint4*>(rows_in.embedded)[c] = own;
    own.x = norm_pair(own.x, gamma_word.x, beta_word.x, mean, rstd);
    own.y = norm_pair(own.y, gamma_word.y, beta_word.y, mean, rstd);
    own.z = norm_pair(own.z, gamma_word.z, beta_word.z, mean, rstd);
    own.w = norm_pair(own.w, gamma_word.w, beta_word.w, mean, rstd);
    if (normed != nullptr && blockIdx.x == 0) reinterpret_cast<uint4*>(normed)[c] = own;
  }
  return own;
}

// The mmas of one row (gemv_one_row_word): step i's x word comes from lane t + 4i to the
// lanes of row 0 (g = 0), zeros to the others; the two mmas of a word add into two sums
// (acc and other), so that the 16 mmas make two chains of 8, not one of 16.
__device__ __forceinline__ void gemv_one_row_mmas(const uint4* ahead, uint4 own, float* acc) {
  const int lane = threadIdx.x % WARP, g = lane / 4, t = lane % 4;
  float other[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < GEMV_AHEAD; ++i) {
    uint4 x;
    x.x = __shfl_sync(0xffffffffu, own.x, t + 4 * i);
    x.y = __shfl_sync(0xffffffffu, own.y, t + 4 * i);
    x.z = __shfl_sync(0xffffffffu, own.z, t + 4 * i);
    x.w = __shfl_sync(0xffffffffu, own.w, t + 4 * i);
    if (g != 0) x = make_uint4(0, 0, 0, 0);
    gemv_mma_split(ahead[i], x, make_uint4(0, 0, 0, 0), acc, other);
  }
  for (int j = 0; j < 4; ++j) acc[j] += other[j];
}

// The body of the GEMV kernels: LOGITS writes the fp32 sums as they are (the LM head's
// logits, no epilogue) and makes the greedy choice, otherwise the bf16 epilogue above;
// EMBED takes the rows from the embeddings (gemv_stage_embeddings) instead of x; ATTEND
// (a QKV GEMV in blocks of 128 or 256 threads) runs the decode attention after it
// (gemv_attend_if_last).
// blockDim.x is 32 × warps, 4 to GEMV_MAX_WARPS warps, in `groups` groups (1, 2 or 4) of
// warps / groups; a group computes 8 output columns (the mma's n), its warps splitting k,
// so a block computes 8 · groups columns and x staged once serves them all (at many rows
// the staging's reads from L2 grow as large as the weights': Kernels::gemv_launch). The
// grid is n / (8 · groups) blocks; `slice` words of x are staged at a time (all of k when
// gamma is non-null), a multiple of 4 · warps unless it is all of k (then groups is 1).
template <bool LOGITS, bool EMBED, bool ATTEND, int TILES>
__device__ __forceinline__ void gemv(const GemvRows& rows_in, const bf16* gamma, const bf16* beta, const bf16* w,
                                     const bf16* bias, const bf16* residual, void* out, bf16* normed, int rows, int n,
                                     int k, int slice, int groups, int gelu, const GreedyChoice& choice,
                                     const FusedAttention& attention) {
  extern __shared__ uint4 staged[];  // [rows][slice + GEMV_ROW_PAD]
  __shared__ float partial[GEMV_MAX_WARPS][16 * TILES][8];
  const int tid = threadIdx.x, warps = blockDim.x / WARP, warp = tid / WARP, lane = tid % WARP;
  const int g = lane / 4, t = lane % 4;
  const int words = k / 8, stride = slice + GEMV_ROW_PAD;
  const int group_warps = warps / groups, column_group = warp / group_warps, k_warp = warp % group_warps;
  const int columns = 8 * groups, column0 = blockIdx.x * columns;
  // This warp's part of each slice, in words: a multiple of 4, so each lane reads every
  // 4th word. Every warp takes the same number of steps (the barriers between slices need
  // all of them); words past the slice or past k are zeros. Where x comes in several
  // slices, a slice is GEMV_AHEAD steps (the host makes it 32 words a warp), so the words
  // in flight and the slice change at the same step.
  const int part = ((slice + group_warps - 1) / group_warps + 3) & ~3;
  const int steps_per_slice = part / 4;
  const int slices = (words + slice - 1) / slice;
  const int steps = slices * steps_per_slice;
  const uint4* row = reinterpret_cast<const uint4*>(w + (long long)(column0 + 8 * column_group + g) * k);
  // Step s's word of W, and its place in its slice of x: GEMV_AHEAD steps from s0 on lie in
  // one slice.
  struct Group {
    int first, place, count;  // the slice's first word, this lane's place at s0, the slice's words
  };
  auto group = [&](int s0) {
    const int first = (s0 / steps_per_slice) * slice;
    return Group{first, k_warp * part + t + 4 * (s0 % steps_per_slice), min(slice, words - first)};
  };
  // The weights, gamma, beta and bias depend on nothing earlier in the step: they are in
  // flight before the wait for the kernel that wrote x.
  uint4 ahead[GEMV_AHEAD];
  const Group start = group(0);
#pragma unroll
  for (int i = 0; i < GEMV_AHEAD; ++i) {
    const int c = start.place + 4 * i;
    ahead[i] = gemv_weight_word(row, start.first + c, i < steps && c < start.count);
  }
  const bool norm = gamma != nullptr;
  const uint4 gamma_word = norm && tid < words ? reinterpret_cast<const uint4*>(gamma)[tid] : make_uint4(0, 0, 0, 0);
  const uint4 beta_word = norm && tid < words ? reinterpret_cast<const uint4*>(beta)[tid] : make_uint4(0, 0, 0, 0);
  // Thread tid finishes outputs (o / columns, column0 + o % columns) for o = tid,
  // tid + blockDim.x (rows · columns is at most twice the block's 32 · columns threads or
  // more; blockDim.x is a multiple of columns, so o % columns is tid's).
  const int out_column = column0 + tid % columns;
  const float bias_value = !LOGITS ? bf16_to_float(bias[out_column]) : 0.0f;
  LET_DEPENDENTS_LAUNCH();
  cudakit::device::wait_for_predecessors();

  float residual_value[2] = {0.0f, 0.0f};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int o = tid + h * blockDim.x;
    if (!LOGITS && residual != nullptr && o < rows * columns)
      residual_value[h] = bf16_to_float(residual[(long long)(o / columns) * n + out_column]);
  }

  // acc[tile] holds rows 16·tile + g and 16·tile + g + 8, columns 2t and 2t + 1.
  float acc[TILES][4];
#pragma unroll
  for (int tile = 0; tile < TILES; ++tile) acc[tile][0] = acc[tile][1] = acc[tile][2] = acc[tile][3] = 0.0f;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  // One row (gemv_one_row_word): every weight word was loaded before the wait (steps is
  // GEMV_AHEAD), and x goes through no shared memory and no barrier.
  const bool one_row = GEMV_ONE_ROW_IN_REGISTERS && TILES == 1 && !ATTEND && rows == 1 && groups == 1 &&
                       slice == words && words == WARP * group_warps &&
                       (!norm || words <= GEMV_ONE_ROW_NORM_WORDS * WARP);
  if (one_row) {
    gemv_one_row_mmas(ahead, gemv_one_row_word<EMBED>(rows_in, norm, gamma_word, beta_word, words, k, normed),
                      acc[0]);
  } else {
    if (EMBED) gemv_stage_embeddings(rows_in, staged, stride, rows, words);
    else gemv_stage_slice(rows_in.x, staged, stride, rows, words, 0, min(slice, words));
    if (norm) gemv_norm_staged(gamma, beta, gamma_word, beta_word, staged, stride, rows, words, k, normed);
  }
  for (int s0 = 0; !one_row && s0 < steps; s0 += GEMV_AHEAD) {
    const Group at = group(s0);
    if (s0 > 0 && s0 % steps_per_slice == 0)  // a new slice (a normed x is staged whole)
      gemv_stage_slice(rows_in.x, staged, stride, rows, words, at.first, at.count);
    const Group after = group(s0 + GEMV_AHEAD);
#pragma unroll
    for (int i = 0; i < GEMV_AHEAD; ++i) {
      if (s0 + i < steps) {  // the same for the whole block: mma.sync needs every lane
        const int c = at.place + 4 * i;
        const bool in = c < at.count;
#pragma unroll
        for (int tile = 0; tile < TILES; ++tile) {
          const int low = 16 * tile + g, high = low + 8;
          gemv_mma(ahead[i], in && low < rows ? staged[low * stride + c] : zero,
                   in && high < rows ? staged[high * stride + c] : zero, acc[tile]);
        }
        // Its place taken by the word GEMV_AHEAD steps on.
        const int later = after.place + 4 * i;
        ahead[i] = gemv_weight_word(row, after.first + later, s0 + GEMV_AHEAD + i < steps && later < after.count);
      }
    }
  }
#pragma unroll
  for (int tile = 0; tile < TILES; ++tile) {
    const int low = 16 * tile + g, high = low + 8;
    if (low < rows) partial[warp][low][2 * t] = acc[tile][0], partial[warp][low][2 * t + 1] = acc[tile][1];
    if (high < rows) partial[warp][high][2 * t] = acc[tile][2], partial[warp][high][2 * t + 1] = acc[tile][3];
  }
  __syncthreads();
  cudakit::device::trigger_dependents();
  unsigned long long keys[2] = {0ull, 0ull};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int o = tid + h * blockDim.x;
    if (o >= rows * columns) break;
    const int r = o / columns, first_warp = (o % columns) / 8 * group_warps;
    float v = 0.0f;
    for (int m = 0; m < group_warps; ++m) v += partial[first_warp + m][r][o % 8];
    if (LOGITS) {
      static_cast<float*>(out)[(long long)r * n + out_column] = v;
      keys[h] = greedy_key(v, out_column);
      continue;
    }
    v += bias_value + residual_value[h];
    if (gelu) v = gelu_tanh(v);
    static_cast<bf16*>(out)[(long long)r * n + out_column] = float_to_bf16(v);
  }
  if (LOGITS) gemv_choose(choice, keys, rows, columns);
  if (ATTEND) gemv_attend_if_last(attention, static_cast<const bf16*>(out), column0, columns, rows);
}

// At most 80 registers a thread (the 8 weight words in flight take 32): 6 blocks of 4
// warps, or one of 16, on a multiprocessor, so a GEMV's blocks and its successor's fit at
// once. The _wide kernels take 17 to 32 rows (two tiles of the mma's 16).
extern "C" __global__ void __maxnreg__(80)
gemv_bias(const bf16* x, const bf16* gamma, const bf16* beta, const bf16* w, const bf16* bias, const bf16* residual,
          bf16* out, int rows, int n, int k, int slice, int groups, int gelu) {
  gemv<false, false, false, 1>({x}, gamma, beta, w, bias, residual, out, nullptr, rows, n, k, slice, groups, gelu, {},
                               {});
}

extern "C" __global__ void __maxnreg__(80)
gemv_bias_wide(const bf16* x, const bf16* gamma, const bf16* beta, const bf16* w, const bf16* bias,
               const bf16* residual, bf16* out, int rows, int n, int k, int slice, int groups, int gelu) {
  gemv<false, false, false, 2>({x}, gamma, beta, w, bias, residual, out, nullptr, rows, n, k, slice, groups, gelu, {},
                               {});
}

// A QKV GEMM with the decode attention fused in (gemv_attend_if_last): qkv = layer_norm(x)
// · wᵀ + bias, then attention = the heads' attention over the cache, this step's keys and
// values appended at *position. Blocks of 128 or 256 threads, at most 16 rows.
extern "C" __global__ void __maxnreg__(80)
gemv_qkv_attend(const bf16* x, const bf16* gamma, const bf16* beta, const bf16* w, const bf16* bias, bf16* qkv,
                int rows, int n, int k, int slice, int groups, bf16* key_cache, bf16* value_cache, const int* position,
                bf16* attention, int max_positions, unsigned* heads_done) {
  gemv<false, false, true, 1>({x}, gamma, beta, w, bias, nullptr, qkv, nullptr, rows, n, k, slice, groups, 0, {},
                              {key_cache, value_cache, position, attention, max_positions, heads_done});
}

// The first GEMM of a decode step with the embedding and the first layer norm fused in:
// out = layer_norm(x) · wᵀ + bias with x = token_embedding[tokens[r]] +
// position_embedding[*position], which block 0 also writes to `embedded` (what
// embed_layer_norm writes to x); k is D_MODEL, staged whole.
extern "C" __global__ void __maxnreg__(80)
gemv_embed(const int* tokens, const int* position, const bf16* token_embedding, const bf16* position_embedding,
           const bf16* gamma, const bf16* beta, const bf16* w, const bf16* bias, bf16* embedded, bf16* out, int rows,
           int n, int k, int slice, int groups) {
  gemv<false, true, false, 1>({nullptr, tokens, position, token_embedding, position_embedding, embedded}, gamma, beta,
                              w, bias, nullptr, out, nullptr, rows, n, k, slice, groups, 0, {}, {});
}

extern "C" __global__ void __maxnreg__(80)
gemv_embed_wide(const int* tokens, const int* position, const bf16* token_embedding, const bf16* position_embedding,
                const bf16* gamma, const bf16* beta, const bf16* w, const bf16* bias, bf16* embedded, bf16* out,
                int rows, int n, int k, int slice, int groups) {
  gemv<false, true, false, 2>({nullptr, tokens, position, token_embedding, position_embedding, embedded}, gamma, beta,
                              w, bias, nullptr, out, nullptr, rows, n, k, slice, groups, 0, {}, {});
}

// gemv_embed with the decode attention fused in, as gemv_qkv_attend.
extern "C" __global__ void __maxnreg__(80)
gemv_embed_attend(const int* tokens, const int* position, const bf16* token_embedding,
                  const bf16* position_embedding, const bf16* gamma, const bf16* beta, const bf16* w, const bf16* bias,
                  bf16* embedded, bf16* qkv, int rows, int n, int k, int slice, int groups, bf16* key_cache,
                  bf16* value_cache, bf16* attention, int max_positions, unsigned* heads_done) {
  gemv<false, true, true, 1>({nullptr, tokens, position, token_embedding, position_embedding, embedded}, gamma, beta,
                             w, bias, nullptr, qkv, nullptr, rows, n, k, slice, groups, 0, {},
                             {key_cache, value_cache, position, attention, max_positions, heads_done});
}

// The LM head of a decode step: logits = layer_norm(x) · Wᵀ in fp32, unrounded (as the
// cuBLAS GEMM of the other path stores them), for at most GEMV_MAX_ROWS rows of x (the
// last layer's residual stream, contiguous), with the final norm fused in; block 0 also
// writes the normed rows to `normed` (the step's hidden state). Then the greedy choice
// (gemv_choose): next_tokens[r] = argmax of row r's logits, *position += advance.
extern "C" __global__ void __maxnreg__(80)
gemv_logits(const bf16* x, const bf16* gamma, const bf16* beta, const bf16* w, float* logits, bf16* normed, int rows,
            int n, int k, int slice, int groups, int* next_tokens, int* position, unsigned long long* choice,
            int advance) {
  gemv<true, false, false, 1>({x}, gamma, beta, w, nullptr, nullptr, logits, normed, rows, n, k, slice, groups, 0,
                              {next_tokens, position, choice, advance}, {});
}

extern "C" __global__ void __maxnreg__(80)
gemv_logits_wide(const bf16* x, const bf16* gamma, const bf16* beta, const bf16* w, float* logits, bf16* normed,
                 int rows, int n, int k, int slice, int groups, int* next_tokens, int* position,
                 unsigned long long* choice, int advance) {
  gemv<true, false, false, 2>({x}, gamma, beta, w, nullptr, nullptr, logits, normed, rows, n, k, slice, groups, 0,
                              {next_tokens, position, choice, advance}, {});
}

// The end of a step in a device-side loop (GraphCache::run_loop): records the step's
// tokens at history[*done][0..batch), counts the step, and ends the loop after `steps`.
// One thread.
extern "C" __global__ void loop_control(unsigned long long loop, const int* tokens, int* history, int* done, int steps,
                                        int batch) {
  cudakit::device::wait_for_predecessors();
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  const int d = *done;
  for (int b = 0; b < batch; ++b) history[(long long)d * batch + b] = tokens[b];
  *done = d + 1;
  if (d + 1 >= steps) cudakit::device::set_condition(loop, 0u);
}

// Reads `words` 16-byte words once (a grid-stride loop over every multiprocessor): the
// streaming floor a step's weights are measured against. The sum goes to *sink only when
// it is a value no input gives, so that the reads are not optimized away.
extern "C" __global__ void stream_read(const bf16* values, long long words, unsigned* sink) {
  const uint4* data = reinterpret_cast<const uint4*>(values);
  unsigned acc = 0;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < words; i += stride) {
    const uint4 v = data[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u && sink != nullptr) *sink = acc;
}

// One link of the kernel-chain floor (Session::measure_kernel_chain_floor_us): the least a
// GEMV of the step can do. It loads its share of the weights as a GEMV does (every word in
// flight before the wait, CHAIN_AHEAD a thread), lets its dependents launch, waits for the
// link before it, reads the vector that link wrote (as a GEMV stages x) and writes the
// next one (block 0). No arithmetic, no barrier, no reduction: a chain of these costs
// what a step of as many kernels costs for its reads and its kernel boundaries alone.
// CHAIN_AHEAD is Kernels::chain_link_words_a_thread, defined by the compile.
extern "C" __global__ void chain_link(const bf16* weights, long long words, const bf16* in, bf16* out, int width,
                                      unsigned* sink) {
  const uint4* data = reinterpret_cast<const uint4*>(weights);
  const long long first = (long long)blockIdx.x * blockDim.x * CHAIN_AHEAD + threadIdx.x;
  uint4 ahead[CHAIN_AHEAD];
#pragma unroll
  for (int i = 0; i < CHAIN_AHEAD; ++i) {
    const long long at = first + (long long)i * blockDim.x;
    ahead[i] = at < words ? data[at] : make_uint4(0, 0, 0, 0);
  }
  LET_DEPENDENTS_LAUNCH();
  cudakit::device::wait_for_predecessors();
  const unsigned short* x = reinterpret_cast<const unsigned short*>(in);
  unsigned acc = 0;
  for (int c = threadIdx.x; c < width; c += blockDim.x) {
    acc ^= x[c];
    if (blockIdx.x == 0) reinterpret_cast<unsigned short*>(out)[c] = x[c] ^ 1u;
  }
#pragma unroll
  for (int i = 0; i < CHAIN_AHEAD; ++i) acc ^= ahead[i].x ^ ahead[i].y ^ ahead[i].z ^ ahead[i].w;
  cudakit::device::trigger_dependents();
  if (acc == 0x9e3779b9u && sink != nullptr) *sink = acc;
}
)kernels";

// The value of an environment switch, empty when unset.
std::string switch_value(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

// A float as a C++ literal that reads back as the same float.
std::string float_literal(float value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9gf", static_cast<double>(value));
  return text;
}

}  // namespace

cudakit::CompiledProgram Kernels::compile_program(const Config& config, bool early_trigger,
                                                  cudakit::CompileOptions options, bool one_row_in_registers) {
  if (config.head_dim != 64 || config.d_model % 8 != 0 || config.d_model / 8 > 1024 || config.vocab % 8 != 0 ||
      config.ffn % 8 != 0 || config.max_positions < 1 || config.max_positions > Kernels::max_positions)
    throw cudakit::InvalidArgument("decoder kernels: heads must be 64 wide, d_model a multiple of 8 up to 8192, "
                                   "the feed-forward width and the vocabulary multiples of 8, and max_positions 1 to " +
                                   std::to_string(Kernels::max_positions));
  options.defines = {"D_MODEL=" + std::to_string(config.d_model), "N_HEADS=" + std::to_string(config.heads),
                     "MAX_POSITIONS=" + std::to_string(config.max_positions),
                     "LAYER_NORM_EPS=" + float_literal(config.layer_norm_eps),
                     std::string("EARLY_TRIGGER=") + (early_trigger ? "1" : "0"),
                     "GEMV_MAX_ROWS=" + std::to_string(gemv_max_rows),
                     "CHAIN_AHEAD=" + std::to_string(chain_link_words_a_thread),
                     std::string("GEMV_ONE_ROW_IN_REGISTERS=") + (one_row_in_registers ? "1" : "0")};
  cudakit::Program text(source, "decoder_kernels.cu");
  cudakit::add_device_headers(text);
  return text.compile(options);
}

Kernels Kernels::compile(const cudakit::Device& device, const Config& config) {
  // Early triggers (see the source's comment): CUDAKIT_DECODER_EARLY_TRIGGER=0 keeps the
  // dependents' launch at each kernel's end, for comparison.
  const bool early_trigger = switch_value("CUDAKIT_DECODER_EARLY_TRIGGER") != "0";
  cudakit::CompileOptions options;
  options.arch = device.compute_capability().arch();
  // CUDAKIT_DECODER_STAGED_ROW=1 stages a single row of x in shared memory as it does
  // several (gemv's one_row), for comparison.
  const bool one_row_in_registers = switch_value("CUDAKIT_DECODER_STAGED_ROW") != "1";
  cudakit::CompiledProgram program = compile_program(config, early_trigger, options, one_row_in_registers);
  Kernels k;
  k.early_trigger = early_trigger;
  k.module = cudakit::Module::load(device, program);
  k.embed_layer_norm = k.module.kernel<EmbedLayerNorm>("embed_layer_norm");
  k.layer_norm = k.module.kernel<LayerNorm>("layer_norm");
  k.decode_attention = k.module.kernel<DecodeAttention>("decode_attention");
  k.decode_attention_few = k.module.kernel<DecodeAttention>("decode_attention_few");
  k.multiprocessors = device.multiprocessor_count();
  k.shared_memory_optin = static_cast<std::size_t>(device.max_shared_memory_per_block_optin());
  k.prefill_attention = k.module.kernel<PrefillAttention>("prefill_attention");
  k.argmax_tokens = k.module.kernel<ArgmaxTokens>("argmax_tokens");
  k.loop_control = k.module.kernel<LoopControl>("loop_control");
  k.stream_read = k.module.kernel<StreamRead>("stream_read");
  k.chain_link = k.module.kernel<ChainLink>("chain_link");
  k.gemv_bias = k.module.kernel<GemvBias>("gemv_bias");
  k.gemv_logits = k.module.kernel<GemvLogits>("gemv_logits");
  k.gemv_bias_wide = k.module.kernel<GemvBias>("gemv_bias_wide");
  k.gemv_logits_wide = k.module.kernel<GemvLogits>("gemv_logits_wide");
  k.gemv_embed = k.module.kernel<GemvEmbed>("gemv_embed");
  k.gemv_embed_wide = k.module.kernel<GemvEmbed>("gemv_embed_wide");
  k.gemv_qkv_attend = k.module.kernel<GemvQkvAttend>("gemv_qkv_attend");
  k.gemv_embed_attend = k.module.kernel<GemvEmbedAttend>("gemv_embed_attend");
  // CUDAKIT_DECODER_FUSED_ATTENTION=1 runs the attention of a one-sequence step inside
  // the QKV GEMV's blocks of 128 threads, =256 in blocks of 256, for comparison
  // (fused_attention_threads says why the attention keeps its own kernel by default).
  const std::string fused_switch = switch_value("CUDAKIT_DECODER_FUSED_ATTENTION");
  k.fused_attention_threads = fused_switch == "1" ? 128 : fused_switch == "256" ? 256 : 0;
  // The weight-streaming GEMV for decode steps of few sequences (Kernels::gemv_rows), with
  // the layer norms fused into it; its mma needs compute capability 8.0.
  // CUDAKIT_DECODER_GEMV=0 keeps cuBLASLt, for comparison; =1 takes the GEMV at every row
  // count its kernels hold.
  const std::string gemv_switch = switch_value("CUDAKIT_DECODER_GEMV");
  k.small_batch_gemv = device.compute_capability().major >= 8 && gemv_switch != "0";
  k.gemv_rows = gemv_switch == "1" ? gemv_max_rows : default_gemv_rows;
  // CUDAKIT_DECODER_GEMV_GROUPS=1, 2 or 4 caps a GEMV block's column groups at every row
  // count (gemv_groups), for comparison.
  const std::string groups_switch = switch_value("CUDAKIT_DECODER_GEMV_GROUPS");
  if (groups_switch == "1" || groups_switch == "2" || groups_switch == "4") k.gemv_groups_cap = std::stoi(groups_switch);
  // Programmatic dependent launch needs compute capability 9.0; CUDAKIT_DECODER_PDL=0
  // keeps the plain launches, for comparison.
  k.programmatic = device.compute_capability().major >= 9 && switch_value("CUDAKIT_DECODER_PDL") != "0";
  return k;
}

}  // namespace decoder
