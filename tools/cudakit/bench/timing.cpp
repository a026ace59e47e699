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
