// `cudakit doctor [--no-perf] [--json] [--device N]`: every registered check (the
// doctor_*.cpp files), first those that need no GPU, then the others on each device,
// then the short performance check beside the raw driver. Text is printed as the checks
// run; with --json one document is printed at the end instead.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "bench/result.hpp"
#include "command.hpp"
#include "cudakit/cudakit.hpp"

namespace cudakit::tool {
namespace {

struct DoctorOptions {
  bool no_perf = false;
  bool json = false;
  int device = -1;  // every device
};

// The run so far: printed line by line as text, or gathered into one JSON document.
class DoctorReport {
 public:
  explicit DoctorReport(bool json) : json_(json) {
    doc_ = {{"schema", "cudakit-doctor/1"}, {"cudakit_version", std::string(cudakit::version())},
            {"checks", nlohmann::ordered_json::array()}, {"devices", nlohmann::ordered_json::array()}};
    text("cudakit doctor\n\nwithout a GPU:\n");
  }

  void driver_found() {
    std::string version = driver::version_string(driver::version());
    doc_["driver"] = {{"version", version}, {"library", driver::library_path()}};
    text("\ndriver: CUDA " + version + " (" + driver::library_path() + ")\n");
  }

  void begin_device(const Device& d) {
    doc_["devices"].push_back({{"ordinal", d.ordinal()},
                               {"name", d.name()},
                               {"arch", d.compute_capability().arch()},
                               {"checks", nlohmann::ordered_json::array()},
                               {"performance", nlohmann::ordered_json::array()}});
    text("\n[" + std::to_string(d.ordinal()) + "] " + d.name() + " (" + d.compute_capability().arch() + ")\n");
  }

  // A check's line and JSON entry: "status" is "passed", "failed" or "skipped"; "passed"
  // is false for a skipped check too, which does not count as failed either.
  void check(const std::string& name, const CheckOutcome& outcome, double ms) {
    const bool failed = !outcome.failure.empty();
    const bool passed = !failed && !outcome.skipped;
    failed_ += failed ? 1 : 0;
    skipped_ += outcome.skipped ? 1 : 0;
    const char* status = failed ? "failed" : outcome.skipped ? "skipped" : "passed";
    nlohmann::ordered_json entry = {{"name", name}, {"status", status}, {"passed", passed}, {"ms", ms}};
    if (failed) entry["failure"] = outcome.failure;
    if (!outcome.detail.empty()) entry[outcome.skipped ? "reason" : "detail"] = outcome.detail;
    current_checks().push_back(entry);
    char line[64];
    std::snprintf(line, sizeof line, "  %-28s %7.1f ms", name.c_str(), ms);
    std::string said = failed ? outcome.failure + (outcome.detail.empty() ? "" : " (" + outcome.detail + ")") : outcome.detail;
    const std::string word = failed ? colored("FAIL", "31") : outcome.skipped ? colored("skip", "33") : colored("pass", "32");
    text("  " + word + line + (said.empty() ? "" : "  " + said) + "\n");
  }

  void performance_heading() { text("\n  performance (cudakit beside the raw driver, same run):\n"); }

  void figure(const PerfFigure& f, double ratio, const std::string& note) {
    doc_["devices"].back()["performance"].push_back({{"name", f.name},
                                                     {"unit", f.unit},
                                                     {"cudakit", f.cudakit},
                                                     {"raw", f.raw},
                                                     {"ratio", ratio},
                                                     {"target_ratio", f.target_ratio > 0 ? nlohmann::ordered_json(f.target_ratio) : nlohmann::ordered_json()},
                                                     {"note", note}});
    char line[256];
    std::snprintf(line, sizeof line, "    %-34s cudakit %10.3f %-6s raw %10.3f %-6s ratio %.3f%s%s\n", f.name.c_str(),
                  f.cudakit, f.unit.c_str(), f.raw, f.unit.c_str(), ratio, note.empty() ? "" : "  ", note.c_str());
    text(line);
  }

  void note(const std::string& line) { text(line); }
  int failed() const { return failed_; }

  // Ends the run; `error` (no driver, no GPU) is said in one line. Returns the exit code.
  int finish(const std::string& error = {}) {
    int code = failed_ > 0 ? exit_check_failed : !error.empty() ? exit_no_gpu : exit_ok;
    if (!error.empty()) {
      // Like every command without a driver: one line on stderr says why.
      doc_["error"] = error;
      text("\nno GPU checks\n");
      std::fprintf(stderr, "cudakit: %s\n", error.c_str());
    } else {
      text("\n" + std::string(failed_ ? "FAILED" : "passed") + ": " + std::to_string(failed_) + " check" +
           (failed_ == 1 ? "" : "s") + " failed" +
           (skipped_ > 0 ? ", " + std::to_string(skipped_) + " skipped" : std::string()) + "\n");
    }
    doc_["failed"] = failed_;
    doc_["skipped"] = skipped_;
    doc_["passed"] = code == exit_ok;
    doc_["exit_code"] = code;
    if (json_) std::printf("%s\n", doc_.dump(2).c_str());
    std::fflush(stdout);
    return code;
  }

 private:
  nlohmann::ordered_json& current_checks() { return doc_["devices"].empty() ? doc_["checks"] : doc_["devices"].back()["checks"]; }
  void text(const std::string& s) {
    if (json_) return;
    std::fputs(s.c_str(), stdout);
    std::fflush(stdout);
  }

  bool json_;
  int failed_ = 0;
  int skipped_ = 0;
  nlohmann::ordered_json doc_;
};

CheckOutcome run_check(const DoctorCheck& c, const Device* d) {
  try {
    return c.run(d);
  } catch (const CheckSkipped& e) {
    return CheckOutcome::skipped_because(e.what());
  } catch (const std::exception& e) {
    return CheckOutcome(e.what());
  } catch (...) {
    return CheckOutcome("an exception that is not a std::exception");
  }
}

void timed(DoctorReport& report, const DoctorCheck& c, const Device* d) {
  auto t0 = std::chrono::steady_clock::now();
  CheckOutcome outcome = run_check(c, d);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  report.check(c.name, outcome, ms);
}

void performance(DoctorReport& report, const Device& d) {
  auto perfs = doctor_perf_checks();
  std::stable_sort(perfs.begin(), perfs.end(), [](auto& a, auto& b) { return a.first < b.first; });
  if (perfs.empty()) return;
  report.performance_heading();
  int misses = 0;
  for (const auto& [order, fn] : perfs) {
    std::vector<PerfFigure> figures;
    try {
      figures = fn(d);
    } catch (const std::exception& e) {
      report.check("performance check", CheckOutcome(e.what()), 0);
      continue;
    }
    for (const auto& f : figures) {
      double ratio = f.raw > 0 ? f.cudakit / f.raw : 0;
      std::string note =
          bench::target_note(ratio, f.target_ratio, f.lower_is_better ? bench::Better::lower : bench::Better::higher);
      if (note.starts_with("MISS")) ++misses;
      report.figure(f, ratio, note);
    }
  }
  // A short run (7 rounds) is noisier than `cudakit bench` (41); a miss here is shown and
  // explained, and does not change the exit code.
  if (misses > 0)
    report.note("    " + std::to_string(misses) + " figure" + (misses == 1 ? "" : "s") + " missed " +
                (misses == 1 ? "its" : "their") +
                " target in this short run (not counted as a failed check; `cudakit bench` measures each fully)\n");
}

int run_doctor(const DoctorOptions& o) {
  auto checks = doctor_checks();
  std::stable_sort(checks.begin(), checks.end(), [](auto& a, auto& b) { return a.order < b.order; });
  DoctorReport report(o.json);
  for (const auto& c : checks)
    if (!c.needs_gpu) timed(report, c, nullptr);

  std::vector<Device> devices;
  try {
    if (o.device >= 0) devices.push_back(device_from_option(o.device));
    else devices = (driver::ensure_loaded(), Device::all());
  } catch (const DriverUnavailable& e) {
    return report.finish(e.what());
  }
  if (devices.empty()) return report.finish("the driver reports no CUDA device");
  report.driver_found();
  for (const Device& d : devices) {
    report.begin_device(d);
    for (const auto& c : checks)
      if (c.needs_gpu) timed(report, c, &d);
    for (const auto& p : drain_parked_errors()) report.check("parked error (" + p.origin + ")", CheckOutcome(p.message), 0);
    if (!o.no_perf && report.failed() == 0) performance(report, d);
  }
  return report.finish();
}

CommandRun setup_doctor(CLI::App& app, Invocation& invocation) {
  auto o = std::make_shared<DoctorOptions>();
  app.add_flag("--no-perf", o->no_perf, "skip the short performance check");
  app.add_flag("--json", o->json, "print one JSON document at the end instead of text");
  app.add_option("--device", o->device, "check only device N")->check(integer_at_least(0));
  app.footer(help_footer(
      "Runs a self-test of every capability on every GPU (or device N), then a short performance check beside\n"
      "the raw driver whose targets are reported, not counted.",
      {{exit_ok, "every check passed"}, {exit_check_failed, "a check failed"}, {exit_no_gpu, ""}, {exit_usage, ""},
       {exit_internal, ""}},
      {Environment::libcuda, Environment::libnvrtc, Environment::libcublas, Environment::libnccl,
       Environment::force_ptx_jit, Environment::no_color}));
  app.parse_complete_callback([o, &invocation] { invocation.json = o->json; });
  return [o] { return run_doctor(*o); };
}

CUDAKIT_SUBCOMMAND("doctor",
                   "a self-test of every capability on every GPU, then a short performance check beside the raw driver",
                   20, setup_doctor);

}  // namespace
}  // namespace cudakit::tool
