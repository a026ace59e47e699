// The decoder's weights and inputs on the host (model.hpp).
#include "model.hpp"

#include <cmath>
#include <cstring>
#include <numeric>

namespace decoder {

namespace {

// splitmix64: a counter-based generator, so element i of the weights has the same value
// wherever and in whatever order it is computed.
std::uint64_t mix(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [-1, 1), 24 bits.
float uniform(std::uint64_t seed, std::uint64_t index) noexcept {
  const auto bits = static_cast<std::uint32_t>(mix(seed ^ mix(index)) >> 40);
  return static_cast<float>(bits) * (2.0f / 16777216.0f) - 1.0f;
}

template <class T>
std::span<const std::byte> bytes_of(const std::vector<T>& v) {
  return std::as_bytes(std::span(v));
}

int metadata_int(const Safetensors& file, const char* key) {
  auto it = file.metadata().find(key);
  if (it == file.metadata().end())
    throw SafetensorsError(std::string("weights file: metadata has no '") + key + "'");
  try {
    return std::stoi(it->second);
  } catch (const std::exception&) {
    throw SafetensorsError(std::string("weights file: metadata '") + key + "' is '" + it->second + "', not a number");
  }
}

std::vector<std::int32_t> random_tokens(std::size_t count, int vocab, std::uint64_t seed) {
  std::vector<std::int32_t> tokens(count);
  for (std::size_t i = 0; i < count; ++i)
    tokens[i] = static_cast<std::int32_t>(mix(seed ^ mix(i)) % static_cast<std::uint64_t>(vocab));
  return tokens;
}

std::vector<std::int32_t> read_tokens(const Safetensors& file, const char* name, std::int64_t rows, std::int64_t cols) {
  const TensorInfo& t = file.tensor(name);
  if (t.dtype != Dtype::i32 || t.shape != std::vector<std::int64_t>{rows, cols})
    throw SafetensorsError(std::string("inputs file: '") + name + "' is not I32 [" + std::to_string(rows) + ", " +
                           std::to_string(cols) + "]");
  std::vector<std::byte> bytes = file.read_tensor(name);
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(rows * cols));
  std::memcpy(tokens.data(), bytes.data(), bytes.size());
  return tokens;
}

}  // namespace

std::int64_t WeightSpec::elements() const noexcept {
  return std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
}

std::string layer_weight(int layer, const std::string& name) {
  return "layers." + std::to_string(layer) + "." + name;
}

std::vector<WeightSpec> weight_specs(const Config& c) {
  const std::int64_t d = c.d_model, f = c.ffn, v = c.vocab, t = c.max_positions;
  // GPT-2's scales: 0.02 for projections and embeddings, 0.02/√(2·layers) for the two
  // projections that feed the residual stream; layer norms near 1 and 0. Biases are
  // small but never zero, so a bias left out changes the result.
  const float weight = 0.02f, residual = 0.02f / std::sqrt(2.0f * static_cast<float>(c.layers)), bias = 0.02f;
  std::vector<WeightSpec> specs{{"embed.weight", {v, d}, 0, weight}, {"position.weight", {t, d}, 0, 0.01f}};
  for (int l = 0; l < c.layers; ++l) {
    auto add = [&](const char* name, std::vector<std::int64_t> shape, float mean, float std) {
      specs.push_back({layer_weight(l, name), std::move(shape), mean, std});
    };
    add("ln1.weight", {d}, 1.0f, 0.1f);
    add("ln1.bias", {d}, 0, bias);
    add("attn.qkv.weight", {3 * d, d}, 0, weight);
    add("attn.qkv.bias", {3 * d}, 0, bias);
    add("attn.out.weight", {d, d}, 0, residual);
    add("attn.out.bias", {d}, 0, bias);
    add("ln2.weight", {d}, 1.0f, 0.1f);
    add("ln2.bias", {d}, 0, bias);
    add("ffn.up.weight", {f, d}, 0, weight);
    add("ffn.up.bias", {f}, 0, bias);
    add("ffn.down.weight", {d, f}, 0, residual);
    add("ffn.down.bias", {d}, 0, bias);
  }
  specs.push_back({"final_norm.weight", {d}, 1.0f, 0.1f});
  specs.push_back({"final_norm.bias", {d}, 0, bias});
  specs.push_back({"lm_head.weight", {v, d}, 0, weight});
  return specs;
}

std::uint16_t to_bf16(float value) noexcept {
  std::uint32_t u;
  std::memcpy(&u, &value, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

float from_bf16(std::uint16_t bits) noexcept {
  const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

HostWeights random_weights(const Config& config, std::uint64_t seed) {
  HostWeights w;
  w.config = config;
  const std::vector<WeightSpec> specs = weight_specs(config);
  std::size_t total = 0;
  for (const WeightSpec& s : specs) total += static_cast<std::size_t>(s.elements());
  w.values.resize(total);
  const float unit = std::sqrt(3.0f);  // uniform on [-√3, √3) has variance 1
  std::size_t index = 0;
  for (const WeightSpec& s : specs) {
    w.layout.push_back({s.name, Dtype::bf16, s.shape, index * 2, static_cast<std::size_t>(s.elements()) * 2});
    for (std::int64_t i = 0; i < s.elements(); ++i, ++index)
      w.values[index] = to_bf16(s.mean + s.std * unit * uniform(seed, index));
  }
  return w;
}

void write_weights(const HostWeights& weights, const std::filesystem::path& path) {
  const Config& c = weights.config;
  SafetensorsWriter out;
  out.metadata("format", "pt")
      .metadata("model", "pre-LayerNorm GPT decoder, GELU (tanh), learned positions, untied LM head")
      .metadata("layers", std::to_string(c.layers))
      .metadata("d_model", std::to_string(c.d_model))
      .metadata("heads", std::to_string(c.heads))
      .metadata("head_dim", std::to_string(c.head_dim))
      .metadata("ffn", std::to_string(c.ffn))
      .metadata("vocab", std::to_string(c.vocab))
      .metadata("max_positions", std::to_string(c.max_positions))
      .metadata("layer_norm_eps", "1e-05");
  const auto* base = reinterpret_cast<const std::byte*>(weights.values.data());
  for (const TensorInfo& t : weights.layout) out.add(t.name, t.dtype, t.shape, {base + t.offset, t.bytes});
  out.write(path);
}

Config config_from_metadata(const Safetensors& file) {
  Config c;
  c.layers = metadata_int(file, "layers");
  c.d_model = metadata_int(file, "d_model");
  c.heads = metadata_int(file, "heads");
  c.head_dim = metadata_int(file, "head_dim");
  c.ffn = metadata_int(file, "ffn");
  c.vocab = metadata_int(file, "vocab");
  c.max_positions = metadata_int(file, "max_positions");
  if (c.layers < 1 || c.heads < 1 || c.head_dim < 1 || c.heads * c.head_dim != c.d_model || c.ffn < 1 ||
      c.vocab < 1 || c.max_positions < 1)
    throw SafetensorsError("weights file: the metadata describes no valid model (heads × head_dim must be d_model)");
  return c;
}

HostWeights read_weights(const std::filesystem::path& path) {
  Safetensors file = Safetensors::open(path);
  HostWeights w;
  w.config = config_from_metadata(file);
  const std::vector<WeightSpec> specs = weight_specs(w.config);
  if (file.tensors().size() != specs.size())
    throw SafetensorsError("weights file " + path.string() + ": " + std::to_string(file.tensors().size()) +
                           " tensors, but the model has " + std::to_string(specs.size()));
  for (const WeightSpec& s : specs) {
    const TensorInfo& t = file.tensor(s.name);
    if (t.dtype != Dtype::bf16 || t.shape != s.shape)
      throw SafetensorsError("weights file " + path.string() + ": tensor '" + s.name +
                             "' is not bf16 of the model's shape");
    w.layout.push_back(t);
  }
  w.values.resize(file.data_bytes() / 2);
  file.read_data(std::as_writable_bytes(std::span(w.values)));
  return w;
}

Inputs random_inputs(const Config& config, int sequences, int prompt_length, int forced_steps, std::uint64_t seed) {
  Inputs in{sequences, prompt_length, forced_steps, {}, {}};
  in.prompts = random_tokens(static_cast<std::size_t>(sequences) * prompt_length, config.vocab, seed);
  in.forced = random_tokens(static_cast<std::size_t>(sequences) * forced_steps, config.vocab, mix(seed));
  return in;
}

void write_inputs(const Inputs& inputs, const std::filesystem::path& path) {
  SafetensorsWriter out;
  out.metadata("prompts", "one prompt per sequence; a batch of b sequences uses the first b")
      .metadata("forced", "per sequence, the tokens fed at the correctness check's decode steps");
  out.add("prompts", Dtype::i32, {inputs.sequences, inputs.prompt_length}, bytes_of(inputs.prompts));
  out.add("forced", Dtype::i32, {inputs.sequences, inputs.forced_steps}, bytes_of(inputs.forced));
  out.write(path);
}

Inputs read_inputs(const std::filesystem::path& path) {
  Safetensors file = Safetensors::open(path);
  Inputs in;
  const TensorInfo& prompts = file.tensor("prompts");
  const TensorInfo& forced = file.tensor("forced");
  if (prompts.shape.size() != 2 || forced.shape.size() != 2 || prompts.shape[0] != forced.shape[0])
    throw SafetensorsError("inputs file " + path.string() + ": 'prompts' and 'forced' must be [sequences, n]");
  in.sequences = static_cast<int>(prompts.shape[0]);
  in.prompt_length = static_cast<int>(prompts.shape[1]);
  in.forced_steps = static_cast<int>(forced.shape[1]);
  in.prompts = read_tokens(file, "prompts", in.sequences, in.prompt_length);
  in.forced = read_tokens(file, "forced", in.sequences, in.forced_steps);
  return in;
}

}  // namespace decoder
