// Timing a comparison: the cudakit side and the raw-driver side, interleaved.
//
// Both sides run in the same process, in alternating batches: round r runs a cudakit
// batch then a raw batch, round r+1 the raw batch first. Whatever drifts during a run
// (clock boost, a neighbour's load, the driver's internal caches warming) then falls
// on both sides alike, and the order inside a round cannot favour one side. Warm-up
// rounds run first and are discarded (first-touch costs, lazy driver resolution).
//
// A batch is `ops` back-to-back operations; a sample is the batch's time divided by
// `ops`, so a per-operation cost far below the clock's resolution is still measured.
//   time_host:   the steady clock around the batch: the CPU cost of submitting.
//   time_device: timing events recorded on a stream around the batch: GPU work.
#pragma once

#include <functional>
#include <vector>

#include "cudakit/stream.hpp"

namespace cudakit::tool::bench {

/// Runs one side's operation `ops` times in a row.
using Batch = std::function<void(int ops)>;

/// How a comparison is repeated.
struct Interleave {
  int rounds = 41;
  int warmup_rounds = 5;
  int ops_per_batch = 1000;
  /// Runs after every batch, untimed: for example drains a stream so that each batch
  /// starts from the same state. May be empty.
  std::function<void()> between_batches;
};

/// Seconds per operation, one sample per timed round for each side (same index, same round).
struct PairedSamples {
  std::vector<double> cudakit;
  std::vector<double> raw;
};

/// CPU time per operation, by the steady clock.
PairedSamples time_host(const Interleave& plan, const Batch& cudakit, const Batch& raw);

/// CPU time per operation of any number of arms, interleaved the same way: round r runs
/// the arms in turn starting with arm r mod n, so that no arm always goes first or last.
/// One series per arm, in `arms` order; sample i of each series came from round i.
std::vector<std::vector<double>> time_host_arms(const Interleave& plan, const std::vector<Batch>& arms);

/// GPU time per operation: timing events recorded on `stream` before and after each
/// batch; the batches must submit their work to `stream`. Each batch is waited for
/// before the next starts, so the sides never overlap on the GPU.
PairedSamples time_device(const Interleave& plan, StreamRef stream, const Batch& cudakit, const Batch& raw);

}  // namespace cudakit::tool::bench
