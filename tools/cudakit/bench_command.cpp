// `cudakit bench`: runs the registered benchmarks (bench/registry.hpp) on device 0,
// prints a table of cudakit against the raw driver, and writes the run as JSON
// (--json) and as an SVG picture (--plot). Exit 0 when every target was met, 1 when
// one was missed or a benchmark failed, 2 without a GPU (DriverUnavailable, mapped by
// main), 3 on a bad command line.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "bench/plot.hpp"
#include "bench/registry.hpp"
#include "bench/report.hpp"
#include "command.hpp"
#include "cudakit/cudakit.hpp"

namespace cudakit::tool {
namespace {

using bench::Result;
using bench::Verdict;

struct BenchOptions {
  std::string json_path;
  std::string plot_path;
  bool list = false;
  bool quick = false;
  std::vector<std::string> filters;
};

constexpr const char* bench_usage =
    "[--json FILE] [--plot FILE] [--list] [--filter TEXT...] [--quick]\n"
    "                    time each operation through cudakit and through the raw driver, interleaved\n"
    "                    in one process on device 0, and compare medians against each target;\n"
    "                    --filter runs the benchmarks whose name or group contains a TEXT,\n"
    "                    --quick the short set the doctor runs; exit 0 when every target is met,\n"
    "                    1 when one is missed or a benchmark fails, 2 without a GPU";

// Parses the options; a message (and nothing else) on a bad command line.
std::optional<BenchOptions> parse(const std::vector<std::string>& args, std::string& error) {
  BenchOptions o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto file_argument = [&](std::string& into) {
      if (i + 1 >= args.size() || args[i + 1].empty()) {
        error = a + " needs a file name";
        return false;
      }
      into = args[++i];
      return true;
    };
    if (a == "--json") {
      if (!file_argument(o.json_path)) return std::nullopt;
    } else if (a == "--plot") {
      if (!file_argument(o.plot_path)) return std::nullopt;
    } else if (a == "--list") {
      o.list = true;
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--filter") {
      std::size_t first = i + 1;
      while (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) o.filters.push_back(args[++i]);
      if (i + 1 == first) {
        error = "--filter needs at least one TEXT";
        return std::nullopt;
      }
    } else {
      error = "unknown option '" + a + "'";
      return std::nullopt;
    }
  }
  return o;
}

// "0.131", "12.50", "4250": enough digits to compare, no more.
std::string figure(double v) {
  if (!std::isfinite(v)) return "-";
  char buf[32];
  const char* pattern = v >= 1000 ? "%.0f" : v >= 100 ? "%.1f" : v >= 10 ? "%.2f" : "%.3f";
  std::snprintf(buf, sizeof buf, pattern, v);
  return buf;
}

std::string with_spread(const bench::Spread& s, const std::string& unit) {
  double half = s.relative_half_width();
  char spread[32];
  if (std::isfinite(half)) std::snprintf(spread, sizeof spread, "±%.1f%%", half * 100);
  else std::snprintf(spread, sizeof spread, "     ");
  return figure(s.median) + " " + unit + " " + spread;
}

// The table: one row per result. Rows begin with two spaces and carry "x raw", the
// header carries "ratio" and "target": scripts/device-suite.sh greps for them.
void print_header() {
  std::printf("  %-36s %-25s %-25s %-12s %-9s %s\n", "benchmark", "cudakit median ±spread",
              "raw median ±spread", "ratio", "target", "result");
}

void print_row(const Result& r, bool tty) {
  Verdict v = bench::judge(r);
  if (!r.error.empty()) {
    std::printf("  %-36s %s (no ratio): %s\n", r.name.c_str(), tty ? "\033[31mERROR\033[0m" : "ERROR",
                r.error.c_str());
    return;
  }
  char ratio[32], target[32];
  std::snprintf(ratio, sizeof ratio, "%.3fx raw", v.ratio);
  if (r.target_ratio > 0)
    std::snprintf(target, sizeof target, "%s %.2f", r.better == bench::Better::lower ? "<=" : ">=", r.target_ratio);
  else
    std::snprintf(target, sizeof target, "-");
  const char* verdict = !v.judged ? "reported" : v.met ? (tty ? "\033[32mpass\033[0m" : "pass")
                                                       : (tty ? "\033[31mMISS\033[0m" : "MISS");
  std::printf("  %-36s %-25s %-25s %-12s %-9s %s\n", r.name.c_str(), with_spread(v.cudakit, r.unit).c_str(),
              with_spread(v.raw, r.unit).c_str(), ratio, target, verdict);
}

bench::RunInfo describe_run(const Device& device, const BenchOptions& o) {
  bench::RunInfo info;
  info.date_utc = bench::utc_now_iso8601();
  info.cudakit_version = "0.1.0";
  info.driver_version = driver::version_string(driver::version());
  info.device_ordinal = device.ordinal();
  info.gpu_name = device.name();
  auto cc = device.compute_capability();
  info.compute_capability = std::to_string(cc.major) + "." + std::to_string(cc.minor);
  info.multiprocessors = device.multiprocessor_count();
  info.sm_clock_mhz = device.attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE) / 1000;
  info.memory_clock_mhz = device.attribute(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE) / 1000;
  info.memory_bus_width_bits = device.attribute(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
  info.quick = o.quick;
  info.filters = o.filters;
  return info;
}

int list(const std::vector<bench::Benchmark>& chosen) {
  for (const auto& b : chosen)
    std::printf("%-40s %-12s %s\n", b.name.c_str(), b.group.c_str(),
                b.quick_run == bench::QuickRun::include ? "quick" : "");
  return exit_ok;
}

// Whether `path` can be written, checked before a run of minutes rather than after it.
bool writable(const std::string& path) {
  std::ofstream probe(path, std::ios::binary | std::ios::app);
  return static_cast<bool>(probe);
}

bool write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  out.close();
  if (!out) std::fprintf(stderr, "cudakit bench: could not write %s\n", path.c_str());
  return static_cast<bool>(out);
}

int run_bench(const std::vector<std::string>& args) {
  std::string error;
  auto options = parse(args, error);
  if (!options) {
    std::fprintf(stderr, "cudakit bench: %s (see cudakit --help)\n", error.c_str());
    return exit_usage;
  }
  const BenchOptions& o = *options;
  auto chosen = bench::select(bench::benchmarks(), o.filters, o.quick);
  if (o.list) return list(chosen);
  if (chosen.empty()) {
    std::fprintf(stderr, "cudakit bench: no benchmark matches (see cudakit bench --list)\n");
    return exit_usage;
  }

  Device device = Device::get(0);  // DriverUnavailable without a GPU: main exits 2
  for (const std::string* path : {&o.json_path, &o.plot_path})
    if (!path->empty() && !writable(*path)) {
      std::fprintf(stderr, "cudakit bench: cannot write %s\n", path->c_str());
      return exit_usage;
    }
  bench::RunInfo info = describe_run(device, o);
  bench::Context context{device, o.quick};
  const bool tty = stdout_is_terminal();
  std::printf("cudakit bench: %s (%s), driver %s, %s%s\n", info.gpu_name.c_str(),
              device.compute_capability().arch().c_str(), info.driver_version.c_str(), info.date_utc.c_str(),
              o.quick ? ", quick run" : "");
  std::printf("spread: half the p10..p90 range of the per-batch samples; ratio: cudakit median / raw median\n\n");
  print_header();

  std::vector<Result> results;
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    if (tty) {
      std::printf("  [%zu/%zu] %s ...", i + 1, chosen.size(), chosen[i].name.c_str());
      std::fflush(stdout);
    }
    auto produced = bench::run_guarded(chosen[i], context);
    if (tty) std::printf("\r\033[K");
    for (const Result& r : produced) print_row(r, tty);
    std::fflush(stdout);
    results.insert(results.end(), produced.begin(), produced.end());
  }

  int met = 0, missed = 0, judged = 0;
  for (const Result& r : results) {
    Verdict v = bench::judge(r);
    judged += v.judged || !r.error.empty();
    met += v.met;
    missed += v.missed;
  }
  std::printf("\nbench: %d of %d targets met%s\n", met, judged, missed ? ", some missed" : "");

  bool written = true;
  if (!o.json_path.empty()) written &= write_file(o.json_path, bench::report_json(info, results));
  if (!o.plot_path.empty()) {
    std::string heading = info.gpu_name + ", driver " + info.driver_version + ", " + info.date_utc;
    written &= write_file(o.plot_path, bench::plot_svg(results, heading));
  }
  if (!written) return exit_internal;
  return missed ? exit_check_failed : exit_ok;
}

SubcommandRegistrar bench_command("bench", bench_usage, run_bench);

}  // namespace
}  // namespace cudakit::tool
