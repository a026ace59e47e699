// decoder: a transformer decoder (model.hpp) generating token by token on cudakit, timed
// beside PyTorch on the same weights by bench/decoder_compare.py.
//
//   decoder                                  self-check: 8 steps at batch 1 through the graph
//                                            cache must equal the same steps launched one by one
//   decoder write-inputs DIR                 DIR/weights.safetensors and DIR/inputs.safetensors
//   decoder run --weights F --inputs F --json OUT.json --check OUT.safetensors
//               [--batches 1,8,32] [--steps 255] [--rounds 3] [--sessions 4]
//
// `run` first writes the correctness check (the prompts of the first 32 sequences, then
// 32 teacher-forced steps: each step's final hidden state and greedy token), then times
// four arms at each batch size: one stream without graphs, the graph cache, the graph
// cache with the steps after the first in one device-side loop (graph_loop), and
// `--sessions` sessions on as many threads and streams through their own graph caches
// (each session's tokens compared with the same prompts run alone). Without a GPU every
// mode prints one line saying so and exits 2; a wrong result exits 1.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <new>
#include <numeric>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "../example_main.hpp"
#include "decoder.hpp"
#include "generation.hpp"

// Heap allocations counted per thread (the graph cache's hit path must make none).
namespace {
thread_local long heap_allocations = 0;
long heap_allocations_on_this_thread() { return heap_allocations; }
void* counted_allocation(std::size_t n) {
  ++heap_allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) { return counted_allocation(n); }
void* operator new[](std::size_t n) { return counted_allocation(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace {

using nlohmann::json;
using namespace decoder;

struct RunOptions {
  std::string weights, inputs, json_path, check_path;
  std::vector<int> batches{1, 8, 32};
  int steps = 255;
  int rounds = 3;
  int sessions = 4;
};

void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

json statistics_json(const cudakit::GraphCacheStatistics& s) {
  return {{"hits", s.hits},           {"updates", s.updates},       {"captures", s.captures},
          {"recaptures", s.recaptures}, {"eager_runs", s.eager_runs}, {"evictions", s.evictions}};
}

cudakit::GraphCacheStatistics minus(cudakit::GraphCacheStatistics a, const cudakit::GraphCacheStatistics& b) {
  a.hits -= b.hits, a.updates -= b.updates, a.captures -= b.captures, a.recaptures -= b.recaptures;
  a.eager_runs -= b.eager_runs, a.evictions -= b.evictions;
  return a;
}

double median(std::vector<double> v) { return percentile(std::move(v), 50); }

// The figures of one arm at one batch size over its rounds.
struct ArmFigures {
  std::vector<double> tokens_per_second;  // per round
  std::vector<double> step_us;            // every later step of every round (and session)
  std::vector<double> first_step_ms;      // per round (per session: the slowest)
  long heap_allocations = 0;
  long heap_steps = 0;

  json to_json(const std::string& arm, int batch) const {
    json j{{"arm", arm},
           {"batch", batch},
           {"tokens_per_s", median(tokens_per_second)},
           {"tokens_per_s_rounds", tokens_per_second},
           {"step_us_p50", percentile(step_us, 50)},
           {"step_us_p99", percentile(step_us, 99)},
           {"time_to_first_step_ms", first_step_ms.front()},
           {"time_to_first_step_warm_ms", first_step_ms.size() > 1 ? median({first_step_ms.begin() + 1, first_step_ms.end()}) : first_step_ms.front()}};
    if (heap_steps > 0) j["heap_allocations_per_step"] = static_cast<double>(heap_allocations) / heap_steps;
    return j;
  }
};

// One session alone, round after round.
ArmFigures single_session_arm(Session& session, const Inputs& inputs, int batch, int steps, int rounds, StepMode mode,
                              std::vector<std::int32_t>* first_tokens) {
  ArmFigures f;
  const std::vector<std::int32_t> prompts = batch_prompts(inputs, batch, 0);
  for (int r = 0; r < rounds; ++r) {
    Generation g = generate(session, prompts, batch, inputs.prompt_length, steps, mode,
                            mode == StepMode::cached ? &heap_allocations_on_this_thread : nullptr);
    f.tokens_per_second.push_back(tokens_per_second(g));
    f.step_us.insert(f.step_us.end(), g.step_us.begin(), g.step_us.end());
    f.first_step_ms.push_back(g.first_step_ms);
    if (mode == StepMode::cached) f.heap_allocations += g.heap_allocations, f.heap_steps += static_cast<long>(g.step_us.size());
    if (r == 0 && first_tokens) *first_tokens = g.tokens;
  }
  return f;
}

// The graph cache with a device-side loop: the prompts and the first step as the graph
// cache arm runs them, then the other steps - 1 steps in one launch (Session::step_loop),
// their tokens read once at the end. A step's time is the loop's time over its steps.
ArmFigures loop_arm(Session& session, const Inputs& inputs, int batch, int steps, int rounds,
                    std::vector<std::int32_t>* first_tokens) {
  using Clock = std::chrono::steady_clock;
  ArmFigures f;
  const std::vector<std::int32_t> prompts = batch_prompts(inputs, batch, 0);
  std::vector<std::int32_t> looped(static_cast<std::size_t>(batch) * static_cast<std::size_t>(steps - 1));
  for (int r = 0; r < rounds; ++r) {
    Generation g;
    g.steps = steps;
    generate_start(session, prompts, batch, inputs.prompt_length, StepMode::cached, g);
    const auto begin = Clock::now();
    session.step_loop(batch, steps - 1);
    session.read_loop_tokens(batch, steps - 1, looped);
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - begin).count();
    for (int s = 0; s < steps - 1; ++s) {
      f.step_us.push_back(us / (steps - 1));
      for (int b = 0; b < batch; ++b)
        g.tokens[static_cast<std::size_t>(b) * (steps + 1) + 2 + s] = looped[static_cast<std::size_t>(s) * batch + b];
    }
    f.tokens_per_second.push_back(batch * static_cast<double>(steps - 1) / (us * 1e-6));
    f.first_step_ms.push_back(g.first_step_ms);
    if (r == 0 && first_tokens) *first_tokens = g.tokens;
  }
  return f;
}

// `sessions.size()` sessions on their own threads: each runs its prompts and first step
// (captures included), all wait at a barrier, then all run the later steps at once. The
// throughput is every session's later tokens over the time from the barrier to the last
// session's end. Every session's tokens must equal `expected[i]` (its prompts run alone).
ArmFigures concurrent_sessions_arm(std::vector<std::unique_ptr<Session>>& sessions, const Inputs& inputs, int batch,
                                   int steps, int rounds, const std::vector<std::vector<std::int32_t>>& expected,
                                   bool& identical) {
  using Clock = std::chrono::steady_clock;
  ArmFigures f;
  const std::size_t n = sessions.size();
  identical = true;
  for (int r = 0; r < rounds; ++r) {
    std::vector<Generation> runs(n);
    std::vector<Clock::time_point> begin(n), end(n);
    std::vector<std::exception_ptr> errors(n);
    std::barrier sync(static_cast<std::ptrdiff_t>(n));
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < n; ++i)
      threads.emplace_back([&, i] {
        try {
          const std::vector<std::int32_t> prompts = batch_prompts(inputs, batch, static_cast<int>(i) * batch);
          runs[i].steps = steps;
          generate_start(*sessions[i], prompts, batch, inputs.prompt_length, StepMode::cached, runs[i]);
        } catch (...) {
          errors[i] = std::current_exception();
        }
        sync.arrive_and_wait();
        begin[i] = Clock::now();
        try {
          if (!errors[i]) generate_rest(*sessions[i], StepMode::cached, runs[i]);
        } catch (...) {
          errors[i] = std::current_exception();
        }
        end[i] = Clock::now();
      });
    for (auto& t : threads) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
    const double window_s =
        std::chrono::duration<double>(*std::max_element(end.begin(), end.end()) - *std::min_element(begin.begin(), begin.end())).count();
    double tokens = 0, slowest_first = 0;
    for (std::size_t i = 0; i < n; ++i) {
      tokens += static_cast<double>(batch) * static_cast<double>(runs[i].step_us.size());
      f.step_us.insert(f.step_us.end(), runs[i].step_us.begin(), runs[i].step_us.end());
      slowest_first = std::max(slowest_first, runs[i].first_step_ms);
      identical = identical && runs[i].tokens == expected[i];
    }
    f.tokens_per_second.push_back(tokens / window_s);
    f.first_step_ms.push_back(slowest_first);
  }
  return f;
}

// The correctness check at the largest batch: the prompts of the first sequences, then
// teacher-forced steps; each point's final hidden state and greedy tokens, for
// bench/decoder_torch.py to compare with its own.
void write_check(const Model& model, cudakit::StreamRef stream, const Inputs& inputs, int batch,
                 SafetensorsWriter& out) {
  Session session(model, stream, {batch, inputs.prompt_length});
  const int d = model.config().d_model, points = inputs.forced_steps + 1;
  std::vector<std::uint16_t> hidden;
  std::vector<std::int32_t> argmax, step_tokens(static_cast<std::size_t>(batch));
  auto keep = [&] {
    std::vector<std::uint16_t> h = session.read_hidden(batch);
    hidden.insert(hidden.end(), h.begin(), h.end());
    session.read_tokens(step_tokens);
    argmax.insert(argmax.end(), step_tokens.begin(), step_tokens.end());
  };
  session.prefill(batch_prompts(inputs, batch, 0), batch, inputs.prompt_length);
  keep();
  for (int s = 0; s < inputs.forced_steps; ++s) {
    for (int b = 0; b < batch; ++b) step_tokens[b] = inputs.forced[static_cast<std::size_t>(b) * inputs.forced_steps + s];
    session.write_tokens(step_tokens);
    session.step_cached(batch);
    keep();
  }
  out.add("hidden", Dtype::bf16, {points, batch, d}, std::as_bytes(std::span(hidden)));
  out.add("argmax", Dtype::i32, {points, batch}, std::as_bytes(std::span(argmax)));
  out.metadata("check", "check 0: after the prompts; check s: after teacher-forced step s (token forced[:, s - 1])");
  out.metadata("hidden", "the final layer norm's output, the LM head's input");
}

int run(const RunOptions& o) {
  cudakit::Device device = cudakit::Device::get(0);
  cudakit::Stream main_stream(device);
  say("decoder: loading " + o.weights);
  const HostWeights weights = read_weights(o.weights);
  const Inputs inputs = read_inputs(o.inputs);
  Model model(weights, main_stream);
  const Config& c = model.config();
  const int max_batch = *std::max_element(o.batches.begin(), o.batches.end());
  if (max_batch > inputs.sequences || o.steps < 2 || o.rounds < 1 || o.sessions < 1)
    throw cudakit::InvalidArgument("decoder run: batches up to " + std::to_string(inputs.sequences) +
                                   " sequences, at least 2 steps, 1 round and 1 session");

  SafetensorsWriter check;
  say("decoder: correctness check at batch " + std::to_string(inputs.sequences) + ", " +
      std::to_string(inputs.forced_steps) + " teacher-forced steps");
  write_check(model, main_stream, inputs, inputs.sequences, check);

  json result{{"schema", "cudakit-decoder/1"},
              {"side", "cudakit"},
              {"device", device.name()},
              {"config", {{"layers", c.layers}, {"d_model", c.d_model}, {"heads", c.heads}, {"head_dim", c.head_dim},
                          {"ffn", c.ffn}, {"vocab", c.vocab}, {"max_positions", c.max_positions}}},
              {"prompt_length", inputs.prompt_length},
              {"decode_steps", o.steps},
              {"generated_tokens", o.steps + 1},
              {"rounds", o.rounds},
              {"sessions", o.sessions},
              {"step_weight_bytes", model.step_weight_bytes()},
              {"arms", json::array()}};
  const SessionLimits limits{max_batch, inputs.prompt_length, std::max(o.steps, 1)};
  cudakit::Stream eager_stream(device), graph_stream(device);
  Session eager(model, eager_stream, limits), graph(model, graph_stream, limits);
  {
    // The memory roofline of a step: its weights read once by a plain streaming kernel.
    const double floor_us = graph.measure_streaming_floor_us();
    result["streaming_floor"] = {{"bytes", model.weights().size_bytes()}, {"us", floor_us}};
    // The floor of a step of as many kernels as the GEMV path's at one sequence (4 GEMVs
    // and the attention a layer, and the LM head): the same reads in a chain of dependent
    // kernels that do nothing else.
    const int chain_kernels = 5 * c.layers + 1;
    const double chain_us = graph.measure_kernel_chain_floor_us(chain_kernels);
    result["kernel_chain_floor"] = {{"kernels", chain_kernels}, {"us", chain_us}};
    result["programmatic_dependent_launch"] = model.kernels().programmatic;
    result["small_batch_gemv"] = model.kernels().small_batch_gemv;
    result["early_trigger"] = model.kernels().early_trigger;
    result["gemv_rows"] = model.kernels().gemv_rows;
    result["gemv_groups_cap"] = model.kernels().gemv_groups_cap;  // 0: by the rows
    result["fused_attention_threads"] = model.kernels().fused_attention_threads;  // 0: its own kernel
    say("decoder: streaming floor: " + std::to_string(model.weights().size_bytes() >> 20) + " MiB in " +
        std::to_string(floor_us) + " us; in a chain of " + std::to_string(chain_kernels) + " kernels " +
        std::to_string(chain_us) + " us");
  }
  std::vector<cudakit::Stream> streams;
  std::vector<std::unique_ptr<Session>> sessions;
  for (int i = 0; i < o.sessions; ++i) streams.emplace_back(device);
  for (int i = 0; i < o.sessions; ++i) sessions.push_back(std::make_unique<Session>(model, streams[i], limits));

  int failures = 0;
  for (int batch : o.batches) {
    const std::string b = std::to_string(batch);
    std::vector<std::int32_t> eager_tokens, graph_tokens;
    say("decoder: batch " + b + ": one stream, no graphs");
    ArmFigures stream_arm = single_session_arm(eager, inputs, batch, o.steps, o.rounds, StepMode::eager, &eager_tokens);
    say("decoder: batch " + b + ": graph cache");
    const auto before = graph.cache_statistics();
    ArmFigures graph_arm = single_session_arm(graph, inputs, batch, o.steps, o.rounds, StepMode::cached, &graph_tokens);
    const auto graph_statistics = minus(graph.cache_statistics(), before);
    say("decoder: batch " + b + ": graph cache with a device-side loop");
    std::vector<std::int32_t> loop_tokens;
    ArmFigures looped = loop_arm(graph, inputs, batch, o.steps, o.rounds, &loop_tokens);

    // Each concurrent session's prompts alone, through the graph cache, as its reference.
    std::vector<std::vector<std::int32_t>> expected;
    for (int i = 0; i < o.sessions; ++i)
      expected.push_back(generate(graph, batch_prompts(inputs, batch, i * batch), batch, inputs.prompt_length, o.steps,
                                  StepMode::cached).tokens);
    say("decoder: batch " + b + ": " + std::to_string(o.sessions) + " sessions on " + std::to_string(o.sessions) +
        " threads");
    std::vector<cudakit::GraphCacheStatistics> session_before;
    for (auto& s : sessions) session_before.push_back(s->cache_statistics());
    bool identical = false;
    ArmFigures sessions_arm = concurrent_sessions_arm(sessions, inputs, batch, o.steps, o.rounds, expected, identical);

    json e = stream_arm.to_json("stream", batch);
    e["graph_matches_stream_tokens"] = eager_tokens == graph_tokens;
    json g = graph_arm.to_json("graph_cache", batch);
    g["graph_cache"] = statistics_json(graph_statistics);
    json s = sessions_arm.to_json("sessions", batch);
    s["identical_to_single_session"] = identical;
    json per_session = json::array();
    for (std::size_t i = 0; i < sessions.size(); ++i)
      per_session.push_back(statistics_json(minus(sessions[i]->cache_statistics(), session_before[i])));
    s["graph_cache"] = per_session;
    json l = looped.to_json("graph_loop", batch);
    l["tokens_equal_graph_cache"] = loop_tokens == graph_tokens;
    result["arms"].push_back(e);
    result["arms"].push_back(g);
    result["arms"].push_back(l);
    result["arms"].push_back(s);
    check.add("generated.b" + b, Dtype::i32, {batch, o.steps + 1}, std::as_bytes(std::span(graph_tokens)));
    if (!identical) ++failures, say("decoder: FAILED: a concurrent session's tokens differ from its run alone");
    if (eager_tokens != graph_tokens) ++failures, say("decoder: FAILED: the graph cache's tokens differ from the stream's");
    if (loop_tokens != graph_tokens)
      ++failures, say("decoder: FAILED: the device-side loop's tokens differ from one step per launch");
    say("decoder: batch " + b + ": stream " + std::to_string(static_cast<long>(median(stream_arm.tokens_per_second))) +
        " tokens/s, graph cache " + std::to_string(static_cast<long>(median(graph_arm.tokens_per_second))) +
        " tokens/s, loop " + std::to_string(static_cast<long>(median(looped.tokens_per_second))) +
        " tokens/s, sessions " + std::to_string(static_cast<long>(median(sessions_arm.tokens_per_second))) +
        " tokens/s; graph step p50 " + std::to_string(percentile(graph_arm.step_us, 50)) + " us");
  }
  check.write(o.check_path);
  std::ofstream(o.json_path) << result.dump(2) << "\n";
  say(failures == 0 ? "ok: decoder run written to " + o.json_path : "decoder: FAILED: " + std::to_string(failures) + " check(s)");
  return failures == 0 ? 0 : 1;
}

// Without arguments: 8 steps at batch 1 through the graph cache against the same steps
// launched one by one, on random weights made in memory: tokens and hidden states equal.
int self_check() {
  cudakit::Device device = cudakit::Device::get(0);
  cudakit::Stream stream(device);
  const Config config;
  Model model(random_weights(config), stream);
  const Inputs inputs = random_inputs(config, 1, 32, 1);
  const int steps = 8;
  auto trace = [&](StepMode mode, std::vector<std::uint16_t>& hidden) {
    Session session(model, stream, {1, inputs.prompt_length});
    Generation g;
    g.steps = steps;
    generate_start(session, inputs.prompts, 1, inputs.prompt_length, mode, g);
    hidden = session.read_hidden(1);
    generate_rest(session, mode, g);
    const std::vector<std::uint16_t> last = session.read_hidden(1);
    hidden.insert(hidden.end(), last.begin(), last.end());
    return g.tokens;
  };
  std::vector<std::uint16_t> eager_hidden, graph_hidden;
  const std::vector<std::int32_t> eager = trace(StepMode::eager, eager_hidden);
  const std::vector<std::int32_t> graph = trace(StepMode::cached, graph_hidden);
  if (eager != graph || eager_hidden != graph_hidden) {
    std::printf("decoder: FAILED: %d steps through the graph cache differ from the same steps launched one by one\n",
                steps);
    return 1;
  }
  std::printf("ok: %d decode steps at batch 1 through the graph cache equal the eager steps (tokens and hidden states)\n",
              steps);
  return 0;
}

int write_inputs_to(const std::string& dir) {
  std::filesystem::create_directories(dir);
  const Config config;
  write_weights(random_weights(config), std::filesystem::path(dir) / "weights.safetensors");
  write_inputs(random_inputs(config), std::filesystem::path(dir) / "inputs.safetensors");
  std::printf("ok: wrote %s/weights.safetensors and %s/inputs.safetensors\n", dir.c_str(), dir.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"A transformer decoder on cudakit, timed beside PyTorch by bench/decoder_compare.py"};
  app.require_subcommand(0, 1);
  std::string dir;
  auto* write = app.add_subcommand("write-inputs", "write DIR/weights.safetensors and DIR/inputs.safetensors");
  write->add_option("DIR", dir, "the folder")->required();
  RunOptions o;
  auto* run_command = app.add_subcommand("run", "the correctness check and the benchmark arms");
  run_command->add_option("--weights", o.weights, "weights.safetensors")->required();
  run_command->add_option("--inputs", o.inputs, "inputs.safetensors")->required();
  run_command->add_option("--json", o.json_path, "where to write the figures")->required();
  run_command->add_option("--check", o.check_path, "where to write the check's hidden states and tokens")->required();
  run_command->add_option("--batches", o.batches, "batch sizes")->delimiter(',');
  run_command->add_option("--steps", o.steps, "decode steps after the prompt (tokens generated: steps + 1)");
  run_command->add_option("--rounds", o.rounds, "generations per arm and batch size");
  run_command->add_option("--sessions", o.sessions, "concurrent sessions");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 3;
  }
  if (write->parsed()) {
    try {
      return write_inputs_to(dir);
    } catch (const std::exception& e) {
      std::printf("decoder: FAILED: %s\n", e.what());
      return 1;
    }
  }
  if (run_command->parsed()) return example::run("decoder", [&] { return run(o); });
  return example::run("decoder", [] { return self_check(); });
}
