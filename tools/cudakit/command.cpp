#include "command.hpp"

#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>

#include "cudakit/driver.hpp"

namespace cudakit::tool {

std::vector<DoctorCheck>& doctor_checks() {
  static std::vector<DoctorCheck> v;
  return v;
}

std::vector<std::pair<int, PerfCheck>>& doctor_perf_checks() {
  static std::vector<std::pair<int, PerfCheck>> v;
  return v;
}

std::vector<Subcommand>& subcommands() {
  static std::vector<Subcommand> v;
  return v;
}

CLI::Validator integer_at_least(int min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        long long value = 0;
        std::size_t used = 0;
        try {
          value = std::stoll(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != text.size()) return "must be an integer, not '" + text + "'";
        if (value < min) return "must be at least " + std::to_string(min) + ", not " + text;
        if (value > std::numeric_limits<int>::max()) return "must be at most " + std::to_string(std::numeric_limits<int>::max());
        return {};
      },
      "INT >= " + std::to_string(min));
}

namespace {
const char* exit_code_meaning(ExitCode code) {
  switch (code) {
    case exit_ok: return "success";
    case exit_check_failed: return "a check failed";
    case exit_no_gpu: return "no usable CUDA driver or GPU on this machine (one line says why)";
    case exit_usage: return "bad command line";
    case exit_internal: return "unexpected internal error";
  }
  return "";
}

const char* environment_line(Environment variable) {
  switch (variable) {
    case Environment::libcuda: return "  CUDAKIT_LIBCUDA     load the driver from this file instead of libcuda.so.1\n";
    case Environment::libnvrtc: return "  CUDAKIT_LIBNVRTC    load NVRTC from this file\n";
    case Environment::libcublas:
      return "  CUDAKIT_LIBCUBLAS, CUDAKIT_LIBCUBLASLT\n"
             "                      load cuBLAS and cuBLASLt from these files instead of searching\n";
    case Environment::libnccl: return "  CUDAKIT_LIBNCCL     load NCCL from this file\n";
    case Environment::force_ptx_jit: return "  CUDA_FORCE_PTX_JIT  1: the driver JIT-compiles PTX even where machine code exists\n";
    case Environment::no_color: return "  NO_COLOR            set and not empty: no colour in the output\n";
  }
  return "";
}
}  // namespace

std::string help_footer(const std::string& about, const std::vector<ExitMeaning>& codes,
                        const std::vector<Environment>& environment) {
  std::string text = about.empty() ? "" : about + "\n\n";
  text += "exit codes:\n";
  for (const ExitMeaning& c : codes)
    text += "  " + std::to_string(static_cast<int>(c.code)) + "  " +
            (c.meaning.empty() ? std::string(exit_code_meaning(c.code)) : c.meaning) + "\n";
  if (!environment.empty()) {
    text += "\nenvironment:\n";
    for (Environment variable : environment) text += environment_line(variable);
    // A command that loads the driver runs the library, which reads this one as well.
    if (std::find(environment.begin(), environment.end(), Environment::libcuda) != environment.end())
      text += "  CUDAKIT_NVTX        0: no NVTX names or ranges, even with a profiler attached\n";
  }
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

bool color_wanted(bool is_terminal, const char* no_color) {
  return is_terminal && (no_color == nullptr || no_color[0] == '\0');
}

bool use_color() { return color_wanted(isatty(STDOUT_FILENO) != 0, std::getenv("NO_COLOR")); }

std::string colored(const std::string& text, const char* code) {
  return use_color() ? "\033[" + std::string(code) + "m" + text + "\033[0m" : text;
}

Device device_from_option(int ordinal) {
  driver::ensure_loaded();
  const int count = Device::count();
  if (ordinal < 0 || ordinal >= count)
    throw UsageError("there is no device " + std::to_string(ordinal) + ": the driver reports " +
                     std::to_string(count) + " device" + (count == 1 ? "" : "s") +
                     (count > 0 ? " (0 to " + std::to_string(count - 1) + ")" : ""));
  return Device::get(ordinal);
}

}  // namespace cudakit::tool
