#include "command.hpp"

#include <unistd.h>

#include <cstdlib>

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
