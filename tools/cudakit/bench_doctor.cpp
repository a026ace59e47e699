// The doctor's performance check: the quick run of every benchmark marked
// QuickRun::include (bench/registry.hpp), one PerfFigure per result. Benchmarks added
// later join it by registering with QuickRun::include; nothing here changes.
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/registry.hpp"
#include "command.hpp"

namespace cudakit::tool {
namespace {

std::vector<PerfFigure> quick_benchmarks(const Device& device) {
  std::vector<PerfFigure> figures;
  std::string failures;
  bench::Context context{device, /*quick=*/true};
  for (const bench::Benchmark& b : bench::select(bench::benchmarks(), {}, /*quick_only=*/true)) {
    for (const bench::Result& r : bench::run_guarded(b, context)) {
      if (!r.error.empty()) {
        failures += (failures.empty() ? "" : "; ") + r.name + ": " + r.error;
        continue;
      }
      bench::Verdict v = bench::judge(r);
      figures.push_back({r.name, r.unit, v.cudakit.median, v.raw.median, r.better == bench::Better::lower,
                         r.target_ratio});
    }
  }
  // A benchmark that failed is a failed check, not a figure: the doctor reports it.
  if (!failures.empty()) throw std::runtime_error("benchmark failed: " + failures);
  return figures;
}

CUDAKIT_DOCTOR_PERF(10, quick_benchmarks);

}  // namespace
}  // namespace cudakit::tool
