// The decoder's model and sessions on cudakit (decoder.hpp).
#include "decoder.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

namespace decoder {

namespace {

cudakit::DeviceBuffer<bf16> upload_weights(const HostWeights& weights, cudakit::StreamRef stream) {
  // The bit patterns are bf16 values: the copy moves bytes.
  std::span<const bf16> values(reinterpret_cast<const bf16*>(weights.values.data()), weights.values.size());
  return cudakit::upload(stream, values);
}

std::size_t elements(int rows, int width) { return static_cast<std::size_t>(rows) * static_cast<std::size_t>(width); }

}  // namespace

Model::Model(const HostWeights& weights, cudakit::StreamRef stream)
    : config_(weights.config),
      weights_(upload_weights(weights, stream)),
      kernels_(Kernels::compile(cudakit::Device::get(stream.device_ordinal()), weights.config)) {
  embed_ = view(weights, "embed.weight");
  position_ = view(weights, "position.weight");
  for (int l = 0; l < config_.layers; ++l) {
    auto w = [&](const char* name) { return view(weights, layer_weight(l, name)); };
    layers_.push_back({w("ln1.weight"), w("ln1.bias"), w("attn.qkv.weight"), w("attn.qkv.bias"), w("attn.out.weight"),
                       w("attn.out.bias"), w("ln2.weight"), w("ln2.bias"), w("ffn.up.weight"), w("ffn.up.bias"),
                       w("ffn.down.weight"), w("ffn.down.bias")});
  }
  final_norm_weight_ = view(weights, "final_norm.weight");
  final_norm_bias_ = view(weights, "final_norm.bias");
  lm_head_ = view(weights, "lm_head.weight");
  step_weight_bytes_ = weights_.size_bytes() - embed_.size_bytes() - position_.size_bytes();
  // The weights a step streams: every tensor after the two embedding tables (the layout
  // is in file order; the streaming floor reads the same bytes).
  step_weights_ = std::as_const(weights_).last(step_weight_bytes_ / sizeof(bf16));
}

cudakit::DeviceSpan<const bf16> Model::view(const HostWeights& weights, const std::string& name) {
  for (const TensorInfo& t : weights.layout)
    if (t.name == name) return std::as_const(weights_).subspan(t.offset / sizeof(bf16), t.bytes / sizeof(bf16));
  throw cudakit::InvalidArgument("decoder weights: no tensor named '" + name + "'");
}

Session::Session(const Model& model, cudakit::StreamRef stream, SessionLimits limits)
    : model_(model),
      stream_(stream),
      limits_(limits),
      lt_(stream),
      blas_(stream),
      position_(stream, 0),
      host_tokens_(static_cast<std::size_t>(limits.max_batch), cudakit::uninitialized),
      cache_({.capacity = 8}),
      loop_steps_done_(stream, 0) {
  const Config& c = model.config();
  if (limits.max_batch < 1 || limits.max_prompt < 1 || limits.max_prompt > c.max_positions)
    throw cudakit::InvalidArgument("decoder session: max_batch and max_prompt must be at least 1, max_prompt at most " +
                                   std::to_string(c.max_positions));
  const int rows = limits.max_batch * limits.max_prompt;
  auto buffer = [&](int r, int width) {
    return cudakit::DeviceBuffer<bf16>(stream, elements(r, width), cudakit::uninitialized);
  };
  prompt_tokens_ = cudakit::DeviceBuffer<int>(stream, static_cast<std::size_t>(rows), cudakit::zeroed);
  tokens_ = cudakit::DeviceBuffer<int>(stream, static_cast<std::size_t>(limits.max_batch), cudakit::zeroed);
  x_ = buffer(rows, c.d_model);
  normed_ = buffer(rows, c.d_model);
  qkv_ = buffer(rows, 3 * c.d_model);
  attention_ = buffer(rows, c.d_model);
  ffn_ = buffer(rows, c.ffn);
  hidden_ = buffer(limits.max_batch, c.d_model);
  logits_ = cudakit::DeviceBuffer<float>(stream, elements(limits.max_batch, c.vocab), cudakit::uninitialized);
  const int cache_rows = c.layers * limits.max_batch * c.heads * c.max_positions;
  key_cache_ = buffer(cache_rows, c.head_dim);
  value_cache_ = buffer(cache_rows, c.head_dim);
  stream_sink_ = cudakit::DeviceBuffer<unsigned>(stream, 1, cudakit::zeroed);
  greedy_choice_ = cudakit::DeviceBuffer<unsigned long long>(stream, Kernels::gemv_choice_words, cudakit::zeroed);
  heads_done_ = cudakit::DeviceBuffer<unsigned>(stream, static_cast<std::size_t>(c.heads), cudakit::zeroed);
  loop_tokens_ = cudakit::DeviceBuffer<int>(
      stream, static_cast<std::size_t>(limits.max_batch) * static_cast<std::size_t>(limits.max_loop_steps),
      cudakit::zeroed);
}

void Session::check_batch(int batch, const char* call) const {
  if (batch < 1 || batch > limits_.max_batch)
    throw cudakit::InvalidArgument(std::string("decoder session: ") + call + " with batch " + std::to_string(batch) +
                                   ", but the session holds 1 to " + std::to_string(limits_.max_batch) + " sequences");
}

cudakit::DeviceSpan<bf16> Session::layer_cache(cudakit::DeviceBuffer<bf16>& cache, int layer) {
  const std::size_t per_layer = cache.size() / static_cast<std::size_t>(model_.config().layers);
  return cache.subspan(per_layer * static_cast<std::size_t>(layer), per_layer);
}

void Session::prefill(std::span<const std::int32_t> prompts, int batch, int prompt_length) {
  check_batch(batch, "prefill");
  if (prompt_length < 1 || prompt_length > limits_.max_prompt)
    throw cudakit::InvalidArgument("decoder session: a prompt of " + std::to_string(prompt_length) +
                                   " tokens, but the session takes 1 to " + std::to_string(limits_.max_prompt));
  const std::size_t rows = static_cast<std::size_t>(batch) * static_cast<std::size_t>(prompt_length);
  if (prompts.size() != rows)
    throw cudakit::InvalidArgument("decoder session: prefill of " + std::to_string(batch) + " prompts of " +
                                   std::to_string(prompt_length) + " tokens needs " + std::to_string(rows) +
                                   " tokens, got " + std::to_string(prompts.size()));
  for (std::int32_t t : prompts)
    if (t < 0 || t >= model_.config().vocab)
      throw cudakit::InvalidArgument("decoder session: token " + std::to_string(t) + " is outside the vocabulary");
  cudakit::copy(stream_, std::span<const int>(prompts.data(), prompts.size()), prompt_tokens_.first(rows));
  position_.set(stream_, 0);
  enqueue_forward(stream_, batch, prompt_length);
  next_position_ = prompt_length;
}

void Session::check_step(int batch, const char* call) {
  check_batch(batch, call);
  if (next_position_ < 0)
    throw cudakit::InvalidArgument(std::string("decoder session: ") + call + " before a prompt (prefill)");
  if (next_position_ >= model_.config().max_positions)
    throw cudakit::InvalidArgument(std::string("decoder session: ") + call + ": the KV cache is full (" +
                                   std::to_string(model_.config().max_positions) + " positions)");
  ++next_position_;
}

void Session::step(int batch) {
  check_step(batch, "step");
  enqueue_step(stream_, batch);
}

cudakit::GraphCacheOutcome Session::step_cached(int batch) {
  check_step(batch, "step_cached");
  return cache_.run(stream_, batch, [this, batch](cudakit::StreamRef s) { enqueue_step(s, batch); });
}

void Session::enqueue_step(cudakit::StreamRef stream, int batch) { enqueue_forward(stream, batch, 1); }

void Session::enqueue_forward(cudakit::StreamRef stream, int batch, int length) {
  using cudakit::Epilogue;
  const Config& c = model_.config();
  const Kernels& k = model_.kernels();
  const bool prompt = length > 1;
  const int rows = batch * length;
  const auto d = static_cast<std::size_t>(c.d_model);
  const auto n = static_cast<std::size_t>(rows);
  const unsigned norm_threads = static_cast<unsigned>(c.d_model / 8);
  const std::int64_t m = rows, dm = c.d_model, ffn = c.ffn;

  auto x = x_.first(n * d);
  auto normed = normed_.first(n * d);
  auto qkv = qkv_.first(n * 3 * d);
  auto attention = attention_.first(n * d);
  auto ffn_values = ffn_.first(n * static_cast<std::size_t>(c.ffn));
  cudakit::DeviceSpan<const int> position = std::as_const(position_).span();
  cudakit::DeviceSpan<const int> input = prompt ? std::as_const(prompt_tokens_).first(n) : std::as_const(tokens_).first(n);

  // Decode steps of few sequences stream the weights through the GEMV kernels, with the
  // embedding, the layer norms and the greedy choice fused in (Kernels::takes_gemv).
  const bool gemv = !prompt && k.takes_gemv(rows, c.d_model, c.ffn);
  const bool fused_attention = gemv && k.takes_fused_attention(rows, c.d_model);
  const LayerWeights& first = model_.layer(0);
  if (!gemv)
    cudakit::launch(stream, k.embed_layer_norm, k.dependent({rows, norm_threads}), input, position, model_.embed(),
                    model_.position(), first.ln1_weight, first.ln1_bias, x, normed, prompt ? length : 1);
  const cudakit::LaunchConfig attention_shape =
      prompt ? cudakit::LaunchConfig{.grid = {c.heads, batch},
                                     .block = Kernels::attention_threads,
                                     .shared_memory_bytes = Kernels::prefill_shared_bytes(length),
                                     .allow_large_shared_memory = true}
             : cudakit::LaunchConfig{.grid = {c.heads, batch}, .block = Kernels::attention_threads};
  const auto& decode_attention = k.attention_kernel(c.heads, batch);
  const cudakit::DeviceSpan<const bf16> none{};
  auto small_gemm = [&](cudakit::DeviceSpan<const bf16> in, cudakit::DeviceSpan<const bf16> gamma,
                        cudakit::DeviceSpan<const bf16> beta, cudakit::DeviceSpan<const bf16> weight,
                        cudakit::DeviceSpan<const bf16> bias, cudakit::DeviceSpan<const bf16> residual,
                        cudakit::DeviceSpan<bf16> out, int n_out, int k_in, bool gelu) {
    const Kernels::GemvLaunch g = k.gemv_launch(rows, n_out, k_in);
    cudakit::launch(stream, rows > 16 ? k.gemv_bias_wide : k.gemv_bias, k.dependent(g.config), in, gamma, beta, weight,
                    bias, residual, out, rows, n_out, k_in, g.slice, g.groups, gelu ? 1 : 0);
  };
  const Kernels::GemvLaunch qkv_launch = k.qkv_launch(rows, c.d_model);
  for (int l = 0; l < c.layers; ++l) {
    const LayerWeights& w = model_.layer(l);
    auto keys = layer_cache(key_cache_, l), values = layer_cache(value_cache_, l);
    if (gemv) {
      // ln1 is fused into the QKV GEMV (layer 0's with the embedding, which it writes to
      // x), ln2 into the up-projection; the attention into the QKV GEMV where it takes it.
      const cudakit::DeviceSpan<const bf16> xs(x);
      const Kernels::GemvLaunch& g = qkv_launch;
      if (fused_attention && l == 0) {
        cudakit::launch(stream, k.gemv_embed_attend, k.dependent(g.config), input, position, model_.embed(),
                        model_.position(), w.ln1_weight, w.ln1_bias, w.qkv_weight, w.qkv_bias, x, qkv, rows,
                        3 * c.d_model, c.d_model, g.slice, g.groups, keys, values, attention, c.max_positions,
                        heads_done_.span());
      } else if (fused_attention) {
        cudakit::launch(stream, k.gemv_qkv_attend, k.dependent(g.config), xs, w.ln1_weight, w.ln1_bias, w.qkv_weight,
                        w.qkv_bias, qkv, rows, 3 * c.d_model, c.d_model, g.slice, g.groups, keys, values, position,
                        attention, c.max_positions, heads_done_.span());
      } else {
        if (l == 0)
          cudakit::launch(stream, rows > 16 ? k.gemv_embed_wide : k.gemv_embed, k.dependent(g.config), input, position,
                          model_.embed(), model_.position(), w.ln1_weight, w.ln1_bias, w.qkv_weight, w.qkv_bias, x,
                          qkv, rows, 3 * c.d_model, c.d_model, g.slice, g.groups);
        else
          small_gemm(xs, w.ln1_weight, w.ln1_bias, w.qkv_weight, w.qkv_bias, none, qkv, 3 * c.d_model, c.d_model,
                     false);
        cudakit::launch(stream, decode_attention, k.dependent(attention_shape), cudakit::DeviceSpan<const bf16>(qkv),
                        keys, values, position, attention, c.max_positions);
      }
      small_gemm(cudakit::DeviceSpan<const bf16>(attention), none, none, w.out_weight, w.out_bias, xs, x, c.d_model,
                 c.d_model, false);
      small_gemm(xs, w.ln2_weight, w.ln2_bias, w.up_weight, w.up_bias, none, ffn_values, c.ffn, c.d_model, true);
      small_gemm(cudakit::DeviceSpan<const bf16>(ffn_values), none, none, w.down_weight, w.down_bias, xs, x, c.d_model,
                 c.ffn, false);
      continue;
    }
    if (l > 0)
      cudakit::launch(stream, k.layer_norm, k.dependent({rows, norm_threads}), cudakit::DeviceSpan<const bf16>(x),
                      c.d_model, w.ln1_weight, w.ln1_bias, normed);
    lt_.matmul(normed, w.qkv_weight, w.qkv_bias, qkv, {.m = m, .n = 3 * dm, .k = dm, .transpose_b = true},
               Epilogue::bias);
    if (prompt)
      cudakit::launch(stream, k.prefill_attention, k.dependent(attention_shape), cudakit::DeviceSpan<const bf16>(qkv),
                      keys, values, attention, length, c.max_positions);
    else
      cudakit::launch(stream, decode_attention, k.dependent(attention_shape), cudakit::DeviceSpan<const bf16>(qkv), keys,
                      values, position, attention, c.max_positions);
    // The residual add rides in the epilogue: x = 1·(a·Woᵀ) + 1·x + b.
    lt_.matmul(attention, w.out_weight, w.out_bias, x,
               {.m = m, .n = dm, .k = dm, .transpose_b = true, .beta = 1.0}, Epilogue::bias);
    cudakit::launch(stream, k.layer_norm, k.dependent({rows, norm_threads}), cudakit::DeviceSpan<const bf16>(x),
                    c.d_model, w.ln2_weight, w.ln2_bias, normed);
    lt_.matmul(normed, w.up_weight, w.up_bias, ffn_values, {.m = m, .n = ffn, .k = dm, .transpose_b = true},
               Epilogue::gelu_bias);
    lt_.matmul(ffn_values, w.down_weight, w.down_bias, x,
               {.m = m, .n = dm, .k = ffn, .transpose_b = true, .beta = 1.0}, Epilogue::bias);
  }
  // The last token of each sequence: the final norm, the LM head, the greedy choice.
  const auto b = static_cast<std::size_t>(batch), stride = static_cast<std::size_t>(length) * d;
  cudakit::DeviceSpan<const bf16> last_rows =
      cudakit::DeviceSpan<const bf16>(x).subspan((static_cast<std::size_t>(length) - 1) * d, (b - 1) * stride + d);
  auto hidden = hidden_.first(b * d);
  auto logits = logits_.first(b * static_cast<std::size_t>(c.vocab));
  // fp32 logits (bf16 inputs, fp32 accumulation stored unrounded): bf16 logits would tie
  // the largest two on about one position in a hundred, and the greedy choice would then
  // hang on the last bit of the hidden state.
  if (gemv) {  // the final norm and the greedy choice fused into the LM head's GEMV (rows == batch, contiguous)
    const Kernels::GemvLaunch g = k.gemv_launch(batch, c.vocab, c.d_model);
    cudakit::launch(stream, batch > 16 ? k.gemv_logits_wide : k.gemv_logits, k.dependent(g.config), last_rows,
                    model_.final_norm_weight(), model_.final_norm_bias(), model_.lm_head(), logits, hidden, batch,
                    c.vocab, c.d_model, g.slice, g.groups, tokens_.first(b), position_.span(), greedy_choice_.span(),
                    length);
    return;
  }
  cudakit::launch(stream, k.layer_norm, k.dependent({batch, norm_threads}), last_rows, static_cast<int>(stride),
                  model_.final_norm_weight(), model_.final_norm_bias(), hidden);
  blas_.gemm(cudakit::DeviceSpan<const bf16>(hidden), model_.lm_head(), logits,
             {.m = batch, .n = c.vocab, .k = dm, .transpose_b = true});
  cudakit::launch(stream, k.argmax_tokens, k.dependent({batch, Kernels::argmax_threads}),
                  cudakit::DeviceSpan<const float>(logits), c.vocab, tokens_.first(b), position_.span(), length);
}

cudakit::GraphCacheOutcome Session::step_loop(int batch, int steps) {
  check_batch(batch, "step_loop");
  if (steps < 1 || steps > limits_.max_loop_steps)
    throw cudakit::InvalidArgument("decoder session: step_loop of " + std::to_string(steps) + " steps, but the session "
                                   "records 1 to " + std::to_string(limits_.max_loop_steps));
  if (next_position_ < 0) throw cudakit::InvalidArgument("decoder session: step_loop before a prompt (prefill)");
  if (next_position_ + steps > model_.config().max_positions)
    throw cudakit::InvalidArgument("decoder session: step_loop: " + std::to_string(steps) + " steps do not fit the KV "
                                   "cache (" + std::to_string(model_.config().max_positions) + " positions)");
  next_position_ += steps;
  loop_steps_done_.set(stream_, 0);
  const Kernels& k = model_.kernels();
  auto history = loop_tokens_.first(static_cast<std::size_t>(steps) * static_cast<std::size_t>(batch));
  return loop_cache_.run_loop(stream_, {batch, steps}, [&](cudakit::StreamRef s, cudakit::ConditionalHandle loop) {
    enqueue_step(s, batch);
    cudakit::launch(s, k.loop_control, k.dependent({1, 32}), loop.value, std::as_const(tokens_).first(batch), history,
                    loop_steps_done_.span(), steps, batch);
  });
}

void Session::read_loop_tokens(int batch, int steps, std::span<std::int32_t> out) {
  check_batch(batch, "read_loop_tokens");
  const std::size_t count = static_cast<std::size_t>(batch) * static_cast<std::size_t>(steps);
  if (steps < 1 || steps > limits_.max_loop_steps || out.size() != count)
    throw cudakit::InvalidArgument("decoder session: read_loop_tokens needs batch x steps elements");
  std::vector<int> values = cudakit::download(stream_, std::as_const(loop_tokens_).first(count));
  std::memcpy(out.data(), values.data(), count * sizeof(int));
}

double Session::measure_streaming_floor_us(int repeats) {
  const Kernels& k = model_.kernels();
  cudakit::DeviceSpan<const bf16> weights = model_.weights();
  const long long words = static_cast<long long>(weights.size_bytes() / 16);
  const int blocks = 132 * 8;
  const cudakit::Device device = cudakit::Device::get(stream_.device_ordinal());
  cudakit::Event start(device, cudakit::EventTiming::enabled), end(device, cudakit::EventTiming::enabled);
  cudakit::launch(stream_, k.stream_read, cudakit::LaunchConfig{blocks, 512}, weights, words, stream_sink_);
  start.record(stream_);
  for (int i = 0; i < repeats; ++i)
    cudakit::launch(stream_, k.stream_read, cudakit::LaunchConfig{blocks, 512}, weights, words,
                    stream_sink_);
  end.record(stream_);
  end.synchronize();
  return static_cast<double>(cudakit::elapsed_time(start, end).count()) * 1000.0 / repeats;
}

double Session::measure_kernel_chain_floor_us(int kernels, int repeats) {
  if (kernels < 1 || repeats < 1)
    throw cudakit::InvalidArgument("decoder session: the kernel-chain floor needs a kernel and a repeat");
  const Kernels& k = model_.kernels();
  cudakit::DeviceSpan<const bf16> weights = model_.weights();
  const std::size_t words = weights.size_bytes() / 16, per_link = (words + kernels - 1) / kernels;
  const std::size_t words_a_block = std::size_t{Kernels::chain_link_threads} * Kernels::chain_link_words_a_thread;
  const int width = model_.config().d_model;
  cudakit::DeviceBuffer<bf16> vectors(stream_, 2 * static_cast<std::size_t>(width), cudakit::zeroed);
  std::optional<cudakit::Graph> chain = cudakit::capture(stream_, [&] {
    for (int link = 0; link < kernels; ++link) {
      const std::size_t first = std::min(words, link * per_link), count = std::min(per_link, words - first);
      const auto blocks = static_cast<unsigned>(std::max<std::size_t>(1, (count + words_a_block - 1) / words_a_block));
      bf16* in = vectors.data() + (link % 2) * width;
      bf16* out = vectors.data() + ((link + 1) % 2) * width;
      cudakit::launch(stream_, k.chain_link, k.dependent({blocks, Kernels::chain_link_threads}),
                      weights.subspan(first * 8, count * 8), static_cast<long long>(count),
                      static_cast<const bf16*>(in), out, width, stream_sink_);
    }
  });
  if (!chain) throw cudakit::InvalidArgument("decoder session: the kernel-chain floor's capture was invalidated");
  cudakit::GraphExec exec = chain->instantiate();
  const cudakit::Device device = cudakit::Device::get(stream_.device_ordinal());
  cudakit::Event start(device, cudakit::EventTiming::enabled), end(device, cudakit::EventTiming::enabled);
  exec.launch(stream_);
  start.record(stream_);
  for (int i = 0; i < repeats; ++i) exec.launch(stream_);
  end.record(stream_);
  end.synchronize();
  return static_cast<double>(cudakit::elapsed_time(start, end).count()) * 1000.0 / repeats;
}

void Session::read_tokens(std::span<std::int32_t> out) {
  check_batch(static_cast<int>(out.size()), "read_tokens");
  std::span<int> staged(host_tokens_.data(), out.size());
  cudakit::download(stream_, std::as_const(tokens_).first(out.size()), staged);
  std::memcpy(out.data(), staged.data(), out.size_bytes());
}

void Session::write_tokens(std::span<const std::int32_t> tokens) {
  check_batch(static_cast<int>(tokens.size()), "write_tokens");
  // Pinned staging, so that the copy is asynchronous; the previous copy from it finished
  // (every step ends with read_tokens, which waits).
  std::span<int> staged(host_tokens_.data(), tokens.size());
  std::memcpy(staged.data(), tokens.data(), tokens.size_bytes());
  cudakit::copy(stream_, std::span<const int>(staged), tokens_.first(tokens.size()));
}

std::vector<std::uint16_t> Session::read_hidden(int batch) {
  check_batch(batch, "read_hidden");
  const std::size_t count = static_cast<std::size_t>(batch) * static_cast<std::size_t>(model_.config().d_model);
  std::vector<bf16> values = cudakit::download(stream_, std::as_const(hidden_).first(count));
  std::vector<std::uint16_t> bits(count);
  std::memcpy(bits.data(), values.data(), count * sizeof(bf16));
  return bits;
}

int Session::read_position() { return position_.read(stream_); }

}  // namespace decoder
