// The record of one `cudakit bench` run, as JSON: when and where it ran, and every
// result with its samples, medians, spreads, ratio, its 95% interval, target and
// verdict ("met", "within noise", "missed", "error", "reported"). These files are
// committed under bench/results/, so the shape is versioned ("schema").
#pragma once

#include <string>
#include <vector>

#include "bench/result.hpp"

namespace cudakit::tool::bench {

/// Where and how a run happened.
struct RunInfo {
  std::string date_utc;  // "2026-12-02T10:11:12Z"
  std::string cudakit_version;
  std::string driver_version;  // "13.0"
  int device_ordinal = 0;
  std::string gpu_name;
  std::string compute_capability;  // "9.0"
  int multiprocessors = 0;
  // Rated clocks from the device attributes (the driver reports no current clocks).
  int sm_clock_mhz = 0;
  int memory_clock_mhz = 0;
  int memory_bus_width_bits = 0;
  bool quick = false;
  int rounds = 0;  // timed rounds per benchmark; 0: each benchmark's default
  std::vector<std::string> filters;
};

inline constexpr const char* report_schema = "cudakit-bench/1";

/// How each result's "ratio_interval" is formed, recorded in the report.
inline constexpr const char* ratio_interval_method =
    "95% distribution-free interval (order statistics) of the median per-round cudakit/raw ratio";

/// The whole run as a JSON document.
std::string report_json(const RunInfo& info, const std::vector<Result>& results);

/// The current time, "2026-12-02T10:11:12Z".
std::string utc_now_iso8601();

}  // namespace cudakit::tool::bench
