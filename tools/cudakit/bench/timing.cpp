#include "bench/timing.hpp"

#include <chrono>
#include <utility>

#include "cudakit/event.hpp"

namespace cudakit::tool::bench {

namespace {

enum class Side { cudakit, raw };

// Runs warm-up and timed rounds, alternating which side goes first; `time_batch`
// returns the seconds one batch took.
template <class TimeBatch>
PairedSamples interleave(const Interleave& plan, TimeBatch&& time_batch) {
  PairedSamples samples;
  samples.cudakit.reserve(plan.rounds);
  samples.raw.reserve(plan.rounds);
  const int ops = plan.ops_per_batch > 0 ? plan.ops_per_batch : 1;
  for (int round = -plan.warmup_rounds; round < plan.rounds; ++round) {
    const bool cudakit_first = (round & 1) == 0;
    for (Side side : {cudakit_first ? Side::cudakit : Side::raw, cudakit_first ? Side::raw : Side::cudakit}) {
      double seconds = time_batch(side, ops);
      if (plan.between_batches) plan.between_batches();
      if (round < 0) continue;  // warm-up
      (side == Side::cudakit ? samples.cudakit : samples.raw).push_back(seconds / ops);
    }
  }
  return samples;
}

}  // namespace

PairedSamples time_host(const Interleave& plan, const Batch& cudakit, const Batch& raw) {
  return interleave(plan, [&](Side side, int ops) {
    const Batch& batch = side == Side::cudakit ? cudakit : raw;
    auto start = std::chrono::steady_clock::now();
    batch(ops);
    auto end = std::chrono::steady_clock::now();
    return std::chrono::duration<double>(end - start).count();
  });
}

std::vector<std::vector<double>> time_host_arms(const Interleave& plan, const std::vector<Batch>& arms) {
  const std::size_t n = arms.size();
  std::vector<std::vector<double>> samples(n);
  for (auto& s : samples) s.reserve(plan.rounds);
  const int ops = plan.ops_per_batch > 0 ? plan.ops_per_batch : 1;
  for (int round = -plan.warmup_rounds; round < plan.rounds; ++round) {
    const std::size_t first = static_cast<std::size_t>(round + plan.warmup_rounds) % (n > 0 ? n : 1);
    for (std::size_t turn = 0; turn < n; ++turn) {
      const std::size_t arm = (first + turn) % n;
      auto start = std::chrono::steady_clock::now();
      arms[arm](ops);
      auto end = std::chrono::steady_clock::now();
      if (plan.between_batches) plan.between_batches();
      if (round >= 0) samples[arm].push_back(std::chrono::duration<double>(end - start).count() / ops);
    }
  }
  return samples;
}

PairedSamples time_device(const Interleave& plan, StreamRef stream, const Batch& cudakit, const Batch& raw) {
  stream.require_handle("time_device");
  const Device device = Device::get(stream.device_ordinal());
  Event start(device, EventTiming::enabled);
  Event end(device, EventTiming::enabled);
  return interleave(plan, [&](Side side, int ops) {
    const Batch& batch = side == Side::cudakit ? cudakit : raw;
    start.record(stream);
    batch(ops);
    end.record(stream);
    end.synchronize();
    return std::chrono::duration<double>(elapsed_time(start, end)).count();
  });
}

}  // namespace cudakit::tool::bench
