// The benchmark registry: every benchmark registers itself from its own file with
// CUDAKIT_BENCHMARK, and `cudakit bench` (and the doctor's short check) find it here.
//
//   CUDAKIT_BENCHMARK("event record", "events", bench::QuickRun::include,
//                     [](const bench::Context& c) -> std::vector<bench::Result> {
//                       ...
//                       return {bench::cost_result("event record", "events", samples, 1.05)};
//                     });
//
// A benchmark gets the device and whether this is a quick run; it sizes its timing with
// Context::interleave, which shrinks every plan in a quick run. Benchmarks marked
// QuickRun::include make up `cudakit bench --quick` and `cudakit doctor`'s performance
// check, which must stay well under 10 s in all: each such benchmark should take well
// under a second in a quick run.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/result.hpp"
#include "bench/timing.hpp"
#include "cudakit/device.hpp"

namespace cudakit::tool::bench {

/// Whether a benchmark is part of the quick run (`--quick` and the doctor).
enum class QuickRun { include, skip };

/// What a benchmark is given.
struct Context {
  Device device;
  bool quick = false;
  /// Timed rounds per comparison (`cudakit bench --rounds N`); 0 keeps the default.
  int rounds = 0;
  /// Unit tests on the fake driver: every path once or twice, the numbers meaningless
  /// (2 rounds after 1 warm-up round, one operation per batch).
  bool smoke = false;

  /// The repetition plan for batches of `ops_per_batch` operations: 41 rounds after 5
  /// warm-up rounds; a quick run does 7 rounds after 1, of a quarter of the operations.
  /// `rounds` overrides the number of timed rounds of either.
  Interleave interleave(int ops_per_batch) const;
};

struct Benchmark {
  std::string name;   // what --filter and --list see
  std::string group;  // "streams", "events", "launch", "graphs", "bandwidth", ...: no spaces
  QuickRun quick_run = QuickRun::skip;
  std::function<std::vector<Result>(const Context&)> run;
};

/// Every registered benchmark, in registration order.
std::vector<Benchmark>& benchmarks();

struct BenchmarkRegistrar {
  BenchmarkRegistrar(std::string name, std::string group, QuickRun quick_run,
                     std::function<std::vector<Result>(const Context&)> run);
};

/// The benchmarks to run, sorted by group (then in registration order): those whose
/// name or group contains one of `filters` (case-insensitive; a space in a filter also
/// matches the dash of a group name, "declared work" the group "declared-work"), every one when
/// `filters` is empty; with `quick_only`, only those in the quick run.
std::vector<Benchmark> select(const std::vector<Benchmark>& all, const std::vector<std::string>& filters,
                              bool quick_only);

/// Runs one benchmark. An exception (other than DriverUnavailable, which propagates: no
/// driver means no benchmark can run) becomes an error result named after the
/// benchmark, and so do errors parked while it ran (a failed destroy in its cleanup;
/// the parked errors are drained, so they are reported here and nowhere else).
std::vector<Result> run_guarded(const Benchmark& benchmark, const Context& context);

/// Case-insensitive substring test (ASCII).
bool contains_ignoring_case(std::string_view text, std::string_view part);

}  // namespace cudakit::tool::bench

#define CUDAKIT_BENCHMARK_CONCAT2(a, b) a##b
#define CUDAKIT_BENCHMARK_CONCAT(a, b) CUDAKIT_BENCHMARK_CONCAT2(a, b)
/// CUDAKIT_BENCHMARK(name, group, quick_run, run): registers a benchmark (see above).
#define CUDAKIT_BENCHMARK(name, group, quick_run, ...)                                              \
  static ::cudakit::tool::bench::BenchmarkRegistrar CUDAKIT_BENCHMARK_CONCAT(cudakit_benchmark_, \
                                                                             __LINE__)(name, group, quick_run, __VA_ARGS__)
