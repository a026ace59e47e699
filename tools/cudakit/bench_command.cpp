// `cudakit bench`: runs the registered benchmarks (bench/registry.hpp) on one device,
// prints a table of cudakit against the raw driver, and writes the run as JSON (--json
// FILE, or - for stdout, where the table then goes to stderr) and as an SVG picture
// (--plot). Each target is met, within noise or missed by its ratio's 95% interval
// (bench/result.hpp; a miss is measured again, bench/repeat.hpp). Exit 0 when none was
// missed, 1 when one was missed or a benchmark failed, 2 without a GPU, 3 on a bad
// command line. A file is written only when the run finished, through a temporary file
// renamed over it: a failed run leaves no file, and no half-written one. `--compare BASE
// NEW` compares two such files (bench/compare.hpp); `--list` lists the benchmarks, as
// text or (with --json) as JSON.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "bench/compare.hpp"
#include "bench/plot.hpp"
#include "bench/progress.hpp"
#include "bench/registry.hpp"
#include "bench/repeat.hpp"
#include "bench/report.hpp"
#include "command.hpp"
#include "cudakit/cudakit.hpp"

namespace cudakit::tool {
namespace {

using bench::Result;
using bench::Verdict;

struct BenchOptions {
  std::string json_path;  // "-": stdout
  std::string plot_path;
  bool list = false;
  bool quick = false;
  int rounds = 0;
  int device = 0;
  std::vector<std::string> filters;
  std::vector<std::string> compare;  // BASE NEW

  bool json_to_stdout() const { return json_path == "-"; }
};

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

// "0.990-1.041": the ratio's 95% interval, "-" without one.
std::string interval_text(const bench::Interval& i) {
  if (!std::isfinite(i.low) || !std::isfinite(i.high)) return "-";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3f-%.3f", i.low, i.high);
  return buf;
}

const char* outcome_word(bench::Outcome outcome, bool color) {
  switch (outcome) {
    case bench::Outcome::met: return color ? "\033[32mmet\033[0m" : "met";
    case bench::Outcome::within_noise: return color ? "\033[33mwithin noise\033[0m" : "within noise";
    case bench::Outcome::missed: return color ? "\033[31mMISSED\033[0m" : "MISSED";
    case bench::Outcome::error: return color ? "\033[31mERROR\033[0m" : "ERROR";
    case bench::Outcome::reported: return "reported";
  }
  return "";
}

// The table: one row per result. Rows begin with two spaces and carry "x raw", the
// header carries "ratio" and "target": scripts/device-suite.sh greps for them.
void print_header(std::FILE* out) {
  std::fprintf(out, "  %-36s %-25s %-25s %-12s %-13s %-9s %s\n", "benchmark", "cudakit median ±spread",
               "raw median ±spread", "ratio", "95% interval", "target", "result");
}

// One row; `outcome`, where given, stands for the row's own (a second measurement's row
// shows the verdict of both).
void print_row(std::FILE* out, const Result& r, bool color, std::optional<bench::Outcome> outcome = std::nullopt) {
  Verdict v = bench::judge(r);
  if (outcome) v.outcome = *outcome;
  if (!r.error.empty()) {
    std::fprintf(out, "  %-36s %s (no ratio): %s\n", r.name.c_str(), outcome_word(v.outcome, color), r.error.c_str());
    return;
  }
  char ratio[32], target[32];
  std::snprintf(ratio, sizeof ratio, "%.3fx raw", v.ratio);
  if (r.target_ratio > 0)
    std::snprintf(target, sizeof target, "%s %.2f", r.better == bench::Better::lower ? "<=" : ">=", r.target_ratio);
  else
    std::snprintf(target, sizeof target, "-");
  std::fprintf(out, "  %-36s %-25s %-25s %-12s %-13s %-9s %s\n", r.name.c_str(), with_spread(v.cudakit, r.unit).c_str(),
               with_spread(v.raw, r.unit).c_str(), ratio, interval_text(v.ratio_interval).c_str(), target,
               outcome_word(v.outcome, color));
}

// Each missed figure measured again (bench/repeat.hpp), with a row for each under a
// heading: its second measurement, and the verdict of both.
void measure_misses_again(std::vector<bench::Measured>& measured, const std::vector<bench::Benchmark>& chosen,
                          const bench::Context& context, bench::Progress& progress, std::FILE* table, bool color) {
  bool heading = false;
  bench::repeat_missed(measured, [&](std::size_t i) {
    if (!heading) std::fprintf(table, "\nmeasured again (a miss stands only when the second measurement misses too):\n");
    heading = true;
    progress.running(i, chosen.size(), chosen[i].name + " (again)");
    auto produced = bench::run_guarded(chosen[i], context);
    progress.clear();
    return produced;
  });
  for (const bench::Measured& m : measured)
    for (const Result& r : m.results) {
      if (r.repeat_cudakit.empty()) continue;
      Result second = r;
      second.cudakit = r.repeat_cudakit;
      second.raw = r.repeat_raw;
      second.repeat_cudakit.clear();
      second.repeat_raw.clear();
      print_row(table, second, color, bench::judge(r).outcome);
    }
  std::fflush(table);
}

bench::RunInfo describe_run(const Device& device, const BenchOptions& o) {
  bench::RunInfo info;
  info.date_utc = bench::utc_now_iso8601();
  info.cudakit_version = std::string(cudakit::version());
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
  info.rounds = o.rounds;
  info.filters = o.filters;
  return info;
}

// The benchmarks as aligned columns, or as a JSON array of {name, group, quick}.
std::string list_text(const std::vector<bench::Benchmark>& chosen) {
  std::size_t name_width = 4, group_width = 5;
  for (const auto& b : chosen) {
    name_width = std::max(name_width, b.name.size());
    group_width = std::max(group_width, b.group.size());
  }
  std::string text;
  auto row = [&](const std::string& name, const std::string& group, const char* quick) {
    std::string line = name + std::string(name_width - name.size() + 2, ' ') + group;
    if (quick[0] != '\0') line += std::string(group_width - group.size() + 2, ' ') + quick;
    text += line + "\n";
  };
  row("name", "group", "quick run");
  for (const auto& b : chosen) row(b.name, b.group, b.quick_run == bench::QuickRun::include ? "yes" : "");
  return text;
}

std::string list_json(const std::vector<bench::Benchmark>& chosen) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const auto& b : chosen)
    list.push_back({{"name", b.name}, {"group", b.group}, {"quick", b.quick_run == bench::QuickRun::include}});
  return list.dump(2) + "\n";
}

// Checked before a run of minutes rather than after it: the folder exists and a file can
// be created there (the probe is removed at once).
void check_writable(const std::string& path) {
  std::filesystem::path target(path);
  std::filesystem::path probe = target;
  probe += ".cudakit-probe";
  std::ofstream out(probe, std::ios::binary | std::ios::trunc);
  bool ok = static_cast<bool>(out);
  out.close();
  std::error_code ignored;
  std::filesystem::remove(probe, ignored);
  if (!ok || std::filesystem::is_directory(target)) throw UsageError("cannot write " + path);
}

// Writes `content` to a temporary file beside `path`, then renames it over `path`.
void write_file(const std::string& path, const std::string& content) {
  std::string temporary = path + ".cudakit-partial";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << content;
    out.close();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(temporary, ignored);
      throw std::runtime_error("could not write " + path);
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::filesystem::remove(temporary, error);
    throw std::runtime_error("could not write " + path + " (renaming " + temporary + " failed)");
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("cannot read " + path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Exit 1 when a figure became significantly worse, 0 otherwise.
int run_compare(const BenchOptions& o) {
  const std::string& base = o.compare.at(0);
  const std::string& fresh = o.compare.at(1);
  bench::Comparison comparison;
  try {
    comparison = bench::compare_runs(read_file(base), read_file(fresh), base, fresh);
  } catch (const bench::CompareInputError& e) {
    throw UsageError(e.what());
  }
  std::printf("%s", bench::comparison_text(comparison, base, fresh).c_str());
  return comparison.count(bench::Significance::worse) > 0 ? exit_check_failed : exit_ok;
}

int run_list(const BenchOptions& o, const std::vector<bench::Benchmark>& chosen) {
  if (o.json_to_stdout()) std::printf("%s", list_json(chosen).c_str());
  else if (!o.json_path.empty()) write_file(o.json_path, list_json(chosen));
  else std::printf("%s", list_text(chosen).c_str());
  return exit_ok;
}

int run_bench(const BenchOptions& o) {
  // Checked here rather than with CLI11's excludes, whose help lists them in no fixed order.
  if (!o.compare.empty() && (o.list || !o.json_path.empty() || !o.plot_path.empty()))
    throw UsageError("--compare takes no --list, --json or --plot");
  if (!o.compare.empty()) return run_compare(o);
  auto chosen = bench::select(bench::benchmarks(), o.filters, o.quick);
  if (o.list) return run_list(o, chosen);
  if (chosen.empty()) throw UsageError("no benchmark matches", "see cudakit bench --list");

  Device device = device_from_option(o.device);  // DriverUnavailable without a GPU: exit 2
  if (!o.json_path.empty() && !o.json_to_stdout()) check_writable(o.json_path);
  if (!o.plot_path.empty()) check_writable(o.plot_path);
  bench::RunInfo info = describe_run(device, o);
  bench::Context context{device, o.quick, o.rounds};
  // With the JSON on stdout, the table goes to stderr.
  std::FILE* table = o.json_to_stdout() ? stderr : stdout;
  const bool color = !o.json_to_stdout() && use_color();
  bench::Progress progress = bench::Progress::on_stderr();
  std::fprintf(table, "cudakit bench: %s (%s), driver %s, %s%s\n", info.gpu_name.c_str(),
               device.compute_capability().arch().c_str(), info.driver_version.c_str(), info.date_utc.c_str(),
               o.quick ? ", quick run" : "");
  std::fprintf(table,
               "spread: half the p10..p90 range of the per-batch samples; ratio: cudakit median / raw median;\n"
               "95%% interval: of the median per-round ratio; missed only when all of it is past the target,\n"
               "in this measurement and in a second one after the others\n\n");
  print_header(table);

  std::vector<bench::Measured> measured;
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    progress.running(i, chosen.size(), chosen[i].name);
    auto produced = bench::run_guarded(chosen[i], context);
    progress.clear();
    for (const Result& r : produced) print_row(table, r, color);
    std::fflush(table);
    measured.push_back({i, std::move(produced)});
  }
  measure_misses_again(measured, chosen, context, progress, table, color);
  std::vector<Result> results;
  for (bench::Measured& m : measured) std::move(m.results.begin(), m.results.end(), std::back_inserter(results));

  int met = 0, within_noise = 0, missed = 0, judged = 0;
  for (const Result& r : results) {
    Verdict v = bench::judge(r);
    judged += v.judged || !r.error.empty();
    met += v.met;
    within_noise += v.within_noise;
    missed += v.missed;
  }
  std::fprintf(table, "\nbench: %d targets: %d met, %d within noise, %d missed\n", judged, met, within_noise, missed);

  if (o.json_to_stdout()) std::printf("%s", bench::report_json(info, results).c_str());
  else if (!o.json_path.empty()) write_file(o.json_path, bench::report_json(info, results));
  if (!o.plot_path.empty()) {
    std::string heading = info.gpu_name + ", driver " + info.driver_version + ", " + info.date_utc;
    write_file(o.plot_path, bench::plot_svg(results, heading));
  }
  return missed ? exit_check_failed : exit_ok;
}

CommandRun setup_bench(CLI::App& app, Invocation& invocation) {
  auto o = std::make_shared<BenchOptions>();
  app.add_option("--json", o->json_path,
                 "write the run (or with --list, the list) as JSON to FILE (- for stdout; the table then goes to stderr)")
      ->type_name("FILE");
  app.add_option("--plot", o->plot_path, "write an SVG chart of the run to FILE")->type_name("FILE");
  app.add_flag("--list", o->list, "list the benchmarks (name, group, whether in the quick run) and exit");
  app.add_option("--filter", o->filters, "run the benchmarks whose name or group contains a TEXT (case-insensitive)")
      ->type_name("TEXT");
  app.add_flag("--quick", o->quick, "the short set the doctor runs, with fewer rounds");
  app.add_option("--rounds", o->rounds, "timed rounds per comparison (default 41; 7 with --quick)")
      ->check(integer_at_least(1));
  app.add_option("--device", o->device, "run on device N (default 0)")->check(integer_at_least(0));
  app.add_option("--compare", o->compare,
                 "compare two runs' JSON files: each figure's change and whether it is significant (alone)")
      ->expected(2)
      ->type_name("BASE NEW");
  app.footer(help_footer(
      "Times each operation through cudakit and through the raw driver, interleaved in one process. Each target\n"
      "is judged by the 95% interval of the median per-round ratio: met when all of it is on the target's good\n"
      "side, within noise when the target is inside it, missed when all of it is past the target. A missed\n"
      "figure is measured again after the others, and it stays missed only when the second interval is also\n"
      "all past the target. With --compare, exit 1 means a figure became significantly worse (Mann-Whitney U,\n"
      "p < 0.05).",
      {{exit_ok, "no target missed (within noise counts as not missed)"},
       {exit_check_failed, "a target missed or a benchmark failed (--compare: a figure significantly worse)"},
       {exit_no_gpu, ""},
       {exit_usage, "bad command line (an unreadable --compare file too)"},
       {exit_internal, ""}},
      {Environment::libcuda, Environment::libcublas, Environment::libnccl, Environment::force_ptx_jit,
       Environment::no_color}));
  app.parse_complete_callback([o, &invocation] { invocation.json = !o->json_path.empty(); });
  return [o] { return run_bench(*o); };
}

CUDAKIT_SUBCOMMAND("bench", "time cudakit beside the raw driver, interleaved in one run, against each target", 30,
                   setup_bench);

}  // namespace
}  // namespace cudakit::tool
