// The cudakit command: info, doctor, and the subcommands other files register (bench).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/result.hpp"
#include "command.hpp"
#include "cudakit/cudakit.hpp"

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

bool stdout_is_terminal() { return isatty(STDOUT_FILENO) != 0; }

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

namespace {

void print_help() {
  std::printf(
      "usage: cudakit <command> [options]\n"
      "\n"
      "commands:\n"
      "  info [--json]     the driver and every GPU's key properties\n"
      "  doctor [--no-perf] a self-test of every capability on every GPU, then a short performance\n"
      "                    check beside the raw driver (skipped with --no-perf)\n");
  for (const auto& s : subcommands()) std::printf("  %-17s %s\n", s.name.c_str(), s.usage.c_str());
  std::printf(
      "  --help            this text\n"
      "\n"
      "exit codes:\n"
      "  0  success: every check passed\n"
      "  1  a check (or a benchmark target) failed\n"
      "  2  no usable CUDA driver or GPU on this machine (one line says why)\n"
      "  3  bad command line\n"
      "  4  unexpected internal error\n"
      "\n"
      "environment:\n"
      "  CUDAKIT_LIBCUDA   load the driver from this file instead of libcuda.so.1\n"
      "  CUDAKIT_LIBCUBLAS, CUDAKIT_LIBCUBLASLT\n"
      "                    load cuBLAS and cuBLASLt from these files instead of searching\n");
}

std::string mib(std::size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

int info(bool json) {
  driver::ensure_loaded();
  auto devices = Device::all();
  if (json) {
    std::printf("{\n  \"driver_version\": \"%s\",\n  \"driver_library\": \"%s\",\n  \"devices\": [",
                driver::version_string(driver::version()).c_str(), json_escape(driver::library_path()).c_str());
    for (std::size_t i = 0; i < devices.size(); ++i) {
      const Device& d = devices[i];
      auto mem = d.memory_info();
      std::printf(
          "%s\n    {\"ordinal\": %d, \"name\": \"%s\", \"uuid\": \"%s\", \"pci_bus_id\": \"%s\", "
          "\"compute_capability\": \"%d.%d\", \"multiprocessors\": %d, \"total_memory_bytes\": %zu, "
          "\"free_memory_bytes\": %zu, \"l2_cache_bytes\": %d, \"max_threads_per_block\": %d, "
          "\"max_shared_memory_per_block_optin\": %d, \"clock_khz\": %d, \"memory_clock_khz\": %d, "
          "\"memory_bus_width_bits\": %d, \"memory_pools\": %s, \"cluster_launch\": %s, \"cooperative_launch\": %s}",
          i ? "," : "", d.ordinal(), json_escape(d.name()).c_str(), d.uuid_string().c_str(), d.pci_bus_id().c_str(),
          d.compute_capability().major, d.compute_capability().minor, d.multiprocessor_count(), mem.total_bytes,
          mem.free_bytes, d.l2_cache_bytes(), d.max_threads_per_block(), d.max_shared_memory_per_block_optin(),
          d.attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE), d.attribute(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE),
          d.attribute(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH), d.supports_memory_pools() ? "true" : "false",
          d.supports_clusters() ? "true" : "false", d.supports_cooperative_launch() ? "true" : "false");
    }
    std::printf("\n  ]\n}\n");
    return exit_ok;
  }
  std::printf("cudakit %s\n", "0.1.0");
  std::printf("driver: CUDA %s (%s)\n", driver::version_string(driver::version()).c_str(),
              driver::library_path().c_str());
  std::printf("devices: %zu\n", devices.size());
  for (const Device& d : devices) {
    auto mem = d.memory_info();
    auto cc = d.compute_capability();
    std::printf("\n[%d] %s\n", d.ordinal(), d.name().c_str());
    std::printf("    compute capability  %d.%d (%s)\n", cc.major, cc.minor, cc.arch().c_str());
    std::printf("    multiprocessors     %d\n", d.multiprocessor_count());
    std::printf("    memory              %s total, %s free\n", mib(mem.total_bytes).c_str(),
                mib(mem.free_bytes).c_str());
    std::printf("    L2 cache            %d KiB\n", d.l2_cache_bytes() / 1024);
    std::printf("    shared memory       %d KiB per block (%d KiB opt-in)\n", d.max_shared_memory_per_block() / 1024,
                d.max_shared_memory_per_block_optin() / 1024);
    std::printf("    clocks              SM %d MHz, memory %d MHz, bus %d bits\n",
                d.attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE) / 1000,
                d.attribute(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE) / 1000,
                d.attribute(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH));
    std::printf("    features            memory pools %s, clusters %s, cooperative launch %s\n",
                d.supports_memory_pools() ? "yes" : "no", d.supports_clusters() ? "yes" : "no",
                d.supports_cooperative_launch() ? "yes" : "no");
    std::printf("    uuid                %s\n", d.uuid_string().c_str());
    std::printf("    pci bus id          %s\n", d.pci_bus_id().c_str());
  }
  return exit_ok;
}

// The reason a check failed (empty: it passed); `skipped` is set when it could not run here.
std::string run_check(const DoctorCheck& c, const Device* d, bool& skipped) {
  try {
    return c.run(d);
  } catch (const CheckSkipped& e) {
    skipped = true;
    return e.what();
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

int doctor(bool perf) {
  auto checks = doctor_checks();
  std::stable_sort(checks.begin(), checks.end(), [](auto& a, auto& b) { return a.order < b.order; });
  int failed = 0;
  bool tty = stdout_is_terminal();
  auto report = [&](const std::string& name, const std::string& why, double ms, bool skipped = false) {
    const char* mark = skipped        ? (tty ? "\033[33mskip\033[0m" : "skip")
                       : why.empty() ? (tty ? "\033[32mpass\033[0m" : "pass")
                                     : (tty ? "\033[31mFAIL\033[0m" : "FAIL");
    std::printf("  %s  %-28s %7.1f ms%s%s\n", mark, name.c_str(), ms, why.empty() ? "" : "  ", why.c_str());
    if (!why.empty() && !skipped) ++failed;
    std::fflush(stdout);
  };
  auto timed = [&](const DoctorCheck& c, const Device* d) {
    auto t0 = std::chrono::steady_clock::now();
    bool skipped = false;
    std::string why = run_check(c, d, skipped);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    report(c.name, why, ms, skipped);
  };

  std::printf("cudakit doctor\n\nwithout a GPU:\n");
  for (const auto& c : checks)
    if (!c.needs_gpu) timed(c, nullptr);

  std::vector<Device> devices;
  try {
    driver::ensure_loaded();
    devices = Device::all();
  } catch (const DriverUnavailable& e) {
    std::printf("\nno GPU checks: %s\n", e.what());
    return failed ? exit_check_failed : exit_no_gpu;
  }
  if (devices.empty()) {
    std::printf("\nno GPU checks: the driver reports no CUDA device\n");
    return failed ? exit_check_failed : exit_no_gpu;
  }
  std::printf("\ndriver: CUDA %s (%s)\n", driver::version_string(driver::version()).c_str(),
              driver::library_path().c_str());
  for (const Device& d : devices) {
    std::printf("\n[%d] %s (%s)\n", d.ordinal(), d.name().c_str(), d.compute_capability().arch().c_str());
    for (const auto& c : checks)
      if (c.needs_gpu) timed(c, &d);
    auto parked = drain_parked_errors();
    for (const auto& p : parked) report("parked error (" + p.origin + ")", p.message, 0);
    if (perf && failed == 0) {
      auto perfs = doctor_perf_checks();
      std::stable_sort(perfs.begin(), perfs.end(), [](auto& a, auto& b) { return a.first < b.first; });
      if (!perfs.empty()) std::printf("\n  performance (cudakit beside the raw driver, same run):\n");
      int perf_misses = 0;
      for (const auto& [order, fn] : perfs) {
        std::vector<PerfFigure> figures;
        try {
          figures = fn(d);
        } catch (const std::exception& e) {
          report("performance check", e.what(), 0);
          continue;
        }
        for (const auto& f : figures) {
          double ratio = f.raw > 0 ? f.cudakit / f.raw : 0;
          std::string note = bench::target_note(ratio, f.target_ratio,
                                                f.lower_is_better ? bench::Better::lower : bench::Better::higher);
          if (note.starts_with("MISS")) ++perf_misses;
          std::printf("    %-34s cudakit %10.3f %-6s raw %10.3f %-6s ratio %.3f%s%s\n", f.name.c_str(), f.cudakit,
                      f.unit.c_str(), f.raw, f.unit.c_str(), ratio, note.empty() ? "" : "  ", note.c_str());
        }
      }
      // A short run (7 rounds) is noisier than `cudakit bench` (41); a miss here is
      // shown and explained, and does not change the exit code.
      if (perf_misses > 0)
        std::printf("    %d figure%s missed %s target in this short run (not counted as a failed check; "
                    "`cudakit bench` measures each fully)\n",
                    perf_misses, perf_misses == 1 ? "" : "s", perf_misses == 1 ? "its" : "their");
    }
  }
  std::printf("\n%s: %d check%s failed\n", failed ? "FAILED" : "passed", failed, failed == 1 ? "" : "s");
  return failed ? exit_check_failed : exit_ok;
}

}  // namespace
}  // namespace cudakit::tool

int main(int argc, char** argv) {
  using namespace cudakit::tool;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_help();
    return args.empty() ? exit_usage : exit_ok;
  }
  std::string command = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  try {
    if (command == "info") {
      bool json = false;
      for (const auto& a : rest) {
        if (a == "--json") json = true;
        else {
          std::fprintf(stderr, "cudakit info: unknown option '%s' (see cudakit --help)\n", a.c_str());
          return exit_usage;
        }
      }
      return info(json);
    }
    if (command == "doctor") {
      bool perf = true;
      for (const auto& a : rest) {
        if (a == "--no-perf") perf = false;
        else {
          std::fprintf(stderr, "cudakit doctor: unknown option '%s' (see cudakit --help)\n", a.c_str());
          return exit_usage;
        }
      }
      return doctor(perf);
    }
    for (const auto& s : subcommands())
      if (s.name == command) return s.run(rest);
    std::fprintf(stderr, "cudakit: unknown command '%s' (see cudakit --help)\n", command.c_str());
    return exit_usage;
  } catch (const cudakit::DriverUnavailable& e) {
    std::printf("cudakit: %s\n", e.what());
    return exit_no_gpu;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cudakit %s: %s\n", command.c_str(), e.what());
    return exit_internal;
  }
}
