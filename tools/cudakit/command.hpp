// The cudakit command's shared pieces: exit codes, the doctor's check registry, and
// small output helpers. Each capability's self-test lives in its own doctor_*.cpp file
// and registers itself with CUDAKIT_DOCTOR_CHECK.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cudakit/device.hpp"

namespace cudakit::tool {

/// Exit codes, documented in `cudakit --help` and the README.
enum ExitCode : int {
  exit_ok = 0,           // every check passed
  exit_check_failed = 1, // at least one check or benchmark target failed
  exit_no_gpu = 2,       // no usable driver or GPU (the line printed says which)
  exit_usage = 3,        // bad command line
  exit_internal = 4,     // an unexpected error inside the command
};

/// One self-test. `needs_gpu` checks run once per device; the others run once, before
/// any driver is needed (for example NVRTC compiling for sm_90). A check returns an
/// empty string when it passed, a short reason when it failed; an exception is a
/// failure with the exception's message.
struct DoctorCheck {
  std::string name;
  int order;  // checks run in ascending order
  bool needs_gpu;
  std::function<std::string(const Device*)> run;
};

std::vector<DoctorCheck>& doctor_checks();

/// Thrown by a check that cannot run on this machine (a library that is not installed):
/// the doctor prints "skip" and the reason, and the check does not count as failed.
struct CheckSkipped : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct DoctorCheckRegistrar {
  DoctorCheckRegistrar(std::string name, int order, bool needs_gpu, std::function<std::string(const Device*)> run) {
    doctor_checks().push_back({std::move(name), order, needs_gpu, std::move(run)});
  }
};

#define CUDAKIT_DOCTOR_CONCAT2(a, b) a##b
#define CUDAKIT_DOCTOR_CONCAT(a, b) CUDAKIT_DOCTOR_CONCAT2(a, b)
/// CUDAKIT_DOCTOR_CHECK("streams", 20, true, [](const Device* d) -> std::string { ... });
#define CUDAKIT_DOCTOR_CHECK(name, order, needs_gpu, ...) \
  static ::cudakit::tool::DoctorCheckRegistrar CUDAKIT_DOCTOR_CONCAT(doctor_check_, __LINE__)(name, order, needs_gpu, __VA_ARGS__)

/// The doctor's short performance check: a line per figure, cudakit beside raw.
struct PerfFigure {
  std::string name;
  std::string unit;
  double cudakit = 0;
  double raw = 0;
  bool lower_is_better = true;
  double target_ratio = 0;  // 0: reported only
};
using PerfCheck = std::function<std::vector<PerfFigure>(const Device&)>;
std::vector<std::pair<int, PerfCheck>>& doctor_perf_checks();
struct DoctorPerfRegistrar {
  DoctorPerfRegistrar(int order, PerfCheck fn) { doctor_perf_checks().emplace_back(order, std::move(fn)); }
};
#define CUDAKIT_DOCTOR_PERF(order, ...) \
  static ::cudakit::tool::DoctorPerfRegistrar CUDAKIT_DOCTOR_CONCAT(doctor_perf_, __LINE__)(order, __VA_ARGS__)

/// Subcommands other than info and doctor (bench, ...) register here.
struct Subcommand {
  std::string name;
  std::string usage;  // for --help
  std::function<int(const std::vector<std::string>& args)> run;
};
std::vector<Subcommand>& subcommands();
struct SubcommandRegistrar {
  SubcommandRegistrar(std::string name, std::string usage, std::function<int(const std::vector<std::string>&)> run) {
    subcommands().push_back({std::move(name), std::move(usage), std::move(run)});
  }
};

/// Whether stdout is a terminal (colour and progress only then).
bool stdout_is_terminal();
std::string json_escape(const std::string& s);

}  // namespace cudakit::tool
