// The decoder's function, as both this program and bench/decoder_torch.py compute it, and
// its weights and inputs as files.
//
// A GPT-style decoder with pre-LayerNorm blocks:
//   x   = token_embedding[token] + position_embedding[position]
//   per layer:
//     x = x + out(attention(qkv(layer_norm_1(x))))          causal, over the KV cache
//     x = x + down(gelu(up(layer_norm_2(x))))               GELU: the tanh approximation
//   logits = lm_head(layer_norm_final(x)); next token = argmax (the lowest index on a tie)
// Every linear map is y = x·Wᵀ + b with W stored [out, in] (PyTorch's nn.Linear layout);
// the LM head has no bias. qkv's output is [q | k | v], each head-major (head h at columns
// h·64 to h·64 + 63); attention scales scores by 1/√64. Layer norms use ε = 1e-5.
// Precision: bf16 weights and activations, fp32 accumulation in every GEMM, fp32 means,
// variances and softmax, fp32 logits (the LM head's sums stored unrounded).
//
// Weights are random with a fixed seed (random_weights): uniform noise of the stated
// standard deviation, never zero (biases too), so that a missing bias or a swapped tensor
// changes the output. They are written once to a safetensors file (write_weights) that
// both sides load; the inputs (every sequence's prompt and the tokens that teacher-force
// the correctness check) go to a second file (write_inputs).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "safetensors.hpp"

namespace decoder {

/// The model's shape (fixed by the workload; read back from a file's metadata).
struct Config {
  int layers = 8;
  int d_model = 1024;
  int heads = 16;
  int head_dim = 64;
  int ffn = 4096;
  int vocab = 16384;
  int max_positions = 1024;  // the position table and the KV cache's capacity
  float layer_norm_eps = 1e-5f;

  friend bool operator==(const Config&, const Config&) = default;
};

/// The seed of the weights and of the inputs.
inline constexpr std::uint64_t weights_seed = 20261202;
inline constexpr std::uint64_t inputs_seed = 20261203;

/// One weight tensor: its name, shape and the statistics of its random values.
struct WeightSpec {
  std::string name;
  std::vector<std::int64_t> shape;
  float mean = 0;
  float std = 0;

  std::int64_t elements() const noexcept;
};

/// Every weight of the model, in file order (each layer's tensors together).
std::vector<WeightSpec> weight_specs(const Config& config);

/// The name of one layer's tensor: layer_weight(3, "attn.qkv.weight") is
/// "layers.3.attn.qkv.weight".
std::string layer_weight(int layer, const std::string& name);

/// The bf16 bit pattern of a float, rounded to nearest even (NaN stays NaN), as the GPU's
/// __float2bfloat16_rn and PyTorch round.
std::uint16_t to_bf16(float value) noexcept;
/// The float a bf16 bit pattern stands for.
float from_bf16(std::uint16_t bits) noexcept;

/// The model's weights as bf16 bit patterns, back to back in the order of
/// weight_specs(config), with their layout (name, shape, offset in bytes).
struct HostWeights {
  Config config;
  std::vector<TensorInfo> layout;
  std::vector<std::uint16_t> values;
};

/// Random weights from `seed` (see above). The same seed gives the same bits on every
/// machine (a counter-based generator, no library distribution).
HostWeights random_weights(const Config& config, std::uint64_t seed = weights_seed);

/// Writes the weights with the config as metadata.
void write_weights(const HostWeights& weights, const std::filesystem::path& path);
/// Reads weights written by write_weights: every tensor must be bf16 and named and shaped
/// as weight_specs(config) says for the config in the file's metadata (SafetensorsError
/// otherwise).
HostWeights read_weights(const std::filesystem::path& path);

/// The config a file's metadata describes (SafetensorsError for a missing or bad entry).
Config config_from_metadata(const Safetensors& file);

/// What the benchmark and the check feed the model: one prompt per sequence (the batch of
/// b sequences uses the first b) and, per sequence, the tokens that teacher-force the
/// check's steps.
struct Inputs {
  int sequences = 32;
  int prompt_length = 128;
  int forced_steps = 32;
  std::vector<std::int32_t> prompts;  // [sequences][prompt_length]
  std::vector<std::int32_t> forced;   // [sequences][forced_steps]
};

/// Random tokens in [0, vocab) from `seed`.
Inputs random_inputs(const Config& config, int sequences = 32, int prompt_length = 128, int forced_steps = 32,
                     std::uint64_t seed = inputs_seed);
void write_inputs(const Inputs& inputs, const std::filesystem::path& path);
Inputs read_inputs(const std::filesystem::path& path);

}  // namespace decoder
