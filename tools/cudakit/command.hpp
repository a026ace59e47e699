// The cudakit command's shared pieces: exit codes, the registries that commands, doctor
// checks and the doctor's performance figures join from their own files, and small
// output helpers.
//
//   CUDAKIT_DOCTOR_CHECK("streams", 20, true, [](const Device* d) -> CheckOutcome { ... });
//   CUDAKIT_SUBCOMMAND(bench, "bench", "time cudakit beside the raw driver", 30, setup_bench);
//
// A subcommand declares its options on its CLI11 subcommand (cli.hpp) and returns what
// runs once they are parsed. Errors are exceptions: UsageError for a bad command line
// (exit 3), DriverUnavailable without a driver or GPU (exit 2), anything else exit 4;
// the command line (cli.cpp) prints them on stderr, and as a JSON object on stdout when
// the command was asked for JSON.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cudakit/device.hpp"

namespace CLI {
class App;
class Validator;
}

namespace cudakit::tool {

/// Exit codes, documented in `cudakit --help` and the README.
enum ExitCode : int {
  exit_ok = 0,           // every check passed
  exit_check_failed = 1, // at least one check or benchmark target failed
  exit_no_gpu = 2,       // no usable driver or GPU (the line printed says which)
  exit_usage = 3,        // bad command line
  exit_internal = 4,     // an unexpected error inside the command
};

/// A bad command line found after parsing (a device that does not exist, a filter that
/// matches nothing, a file that cannot be written): exit 3. The message ends with one
/// hint: `hint` when given ("see cudakit bench --list"), else "see cudakit COMMAND --help".
class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& message, std::string hint = {})
      : std::runtime_error(message), hint_(std::move(hint)) {}
  const std::string& hint() const { return hint_; }

 private:
  std::string hint_;
};

/// What one run of the command was asked for, as far as the error path needs it.
struct Invocation {
  std::string command;  // "bench"; empty before a subcommand was chosen
  bool json = false;    // a failure is also printed as a JSON object on stdout
};

/// What a doctor check found: `failure` is empty when it passed or was skipped; `detail`
/// says what it saw ("native sm_90") or why it could not run. A string converts to a
/// failure, so `return {};` passes and `return "why";` fails.
struct CheckOutcome {
  CheckOutcome() = default;
  CheckOutcome(std::string why) : failure(std::move(why)) {}
  CheckOutcome(const char* why) : failure(why) {}
  static CheckOutcome passed(std::string detail) {
    CheckOutcome o;
    o.detail = std::move(detail);
    return o;
  }
  /// The check cannot run on this machine (an optional library is missing): neither a
  /// pass nor a failure.
  static CheckOutcome skipped_because(std::string why) {
    CheckOutcome o = passed(std::move(why));
    o.skipped = true;
    return o;
  }
  std::string failure;
  std::string detail;
  bool skipped = false;
};

/// One self-test. `needs_gpu` checks run once per device; the others run once, before
/// any driver is needed (for example NVRTC). An exception is a failure with the
/// exception's message.
struct DoctorCheck {
  std::string name;
  int order;  // checks run in ascending order
  bool needs_gpu;
  std::function<CheckOutcome(const Device*)> run;
};

std::vector<DoctorCheck>& doctor_checks();

/// Thrown by a check that cannot run on this machine (a library that is not installed):
/// the doctor prints "skip" and the reason, and the check does not count as failed.
struct CheckSkipped : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct DoctorCheckRegistrar {
  DoctorCheckRegistrar(std::string name, int order, bool needs_gpu, std::function<CheckOutcome(const Device*)> run) {
    doctor_checks().push_back({std::move(name), order, needs_gpu, std::move(run)});
  }
};

#define CUDAKIT_DOCTOR_CONCAT2(a, b) a##b
#define CUDAKIT_DOCTOR_CONCAT(a, b) CUDAKIT_DOCTOR_CONCAT2(a, b)
/// CUDAKIT_DOCTOR_CHECK("streams", 20, true, [](const Device* d) -> CheckOutcome { ... });
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

/// What a subcommand runs once its options are parsed; returns the exit code.
using CommandRun = std::function<int()>;

/// A subcommand (info, doctor, bench, ...): `setup` declares its options on `app` (its
/// own CLI11 subcommand), may set `invocation.json` from them once parsed, and returns
/// what runs.
struct Subcommand {
  std::string name;
  std::string description;  // one line for `cudakit --help`
  int order;                // position in `cudakit --help`
  std::function<CommandRun(CLI::App& app, Invocation& invocation)> setup;
};
std::vector<Subcommand>& subcommands();
struct SubcommandRegistrar {
  SubcommandRegistrar(std::string name, std::string description, int order,
                      std::function<CommandRun(CLI::App&, Invocation&)> setup) {
    subcommands().push_back({std::move(name), std::move(description), order, std::move(setup)});
  }
};
#define CUDAKIT_SUBCOMMAND(name, description, order, setup) \
  static ::cudakit::tool::SubcommandRegistrar CUDAKIT_DOCTOR_CONCAT(subcommand_, __LINE__)(name, description, order, setup)

/// The check of an integer option (`--rounds`, `--device`): text that is no integer is
/// refused with "must be an integer", a number below `min` with "must be at least MIN".
CLI::Validator integer_at_least(int min);

/// An environment variable a command reads, for its help.
enum class Environment { libcuda, libnvrtc, libcublas, libnccl, force_ptx_jit, no_color };

/// An exit code a command can return, with what it means there (empty: the general
/// meaning, "bad command line" for 3).
struct ExitMeaning {
  ExitCode code;
  std::string meaning;
};

/// The end of a command's help: `about` (what it does), then the exit codes in `codes`
/// and the environment variables in `environment`, each with its meaning.
std::string help_footer(const std::string& about, const std::vector<ExitMeaning>& codes,
                        const std::vector<Environment>& environment);

/// Whether to colour output to a terminal (`is_terminal`) given NO_COLOR's value
/// (`no_color`, null when unset): only a terminal, and only while NO_COLOR is unset or
/// empty (no-color.org).
bool color_wanted(bool is_terminal, const char* no_color);
/// color_wanted for stdout and this process's NO_COLOR.
bool use_color();
/// `text` in ANSI colour `code` ("32" green, "31" red) when use_color(), else as it is.
std::string colored(const std::string& text, const char* code);

/// The device `ordinal` names (`--device N`): loads the driver (DriverUnavailable without
/// one) and throws UsageError naming the devices there are when it does not exist.
Device device_from_option(int ordinal);

}  // namespace cudakit::tool
