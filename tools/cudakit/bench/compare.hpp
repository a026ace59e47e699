// `cudakit bench --compare BASE.json NEW.json`: each figure of two runs side by side,
// its change, and whether the change is more than the runs' noise.
//
// A figure is the cudakit/raw ratio, so runs on different hosts or days compare: the
// raw side moves with the machine, the ratio moves with cudakit. Whether it moved is the
// Mann-Whitney U test on the two runs' per-round ratios (statistics.hpp): p < 0.05 and
// the per-round medians moving the same way as the ratio makes the change "better" or
// "worse"; anything else is "no significant change". A file without per-round samples
// (an older or a stripped one) still compares, without significance, and says so.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace cudakit::tool::bench {

/// A file that is not a `cudakit bench` run (no JSON, another schema, no results).
class CompareInputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Significance { better, worse, unchanged, unknown };

/// "better", "worse", "no significant change", "significance unknown".
const char* significance_name(Significance significance);

/// One figure present in both runs.
struct FigureChange {
  std::string name;
  std::string unit;
  bool higher_is_better = false;
  double base_ratio;  // ratio of medians; NaN when the run had none
  double new_ratio;
  double change;   // new_ratio / base_ratio - 1; NaN when either is missing
  double p_value;  // NaN without per-round samples on both sides
  Significance significance = Significance::unknown;
  std::string error;  // not empty when either run's benchmark failed
};

struct Comparison {
  std::vector<FigureChange> figures;  // in the new run's order
  std::vector<std::string> only_in_base;
  std::vector<std::string> only_in_new;
  std::vector<std::string> notes;  // what could not be judged, and why
  int count(Significance significance) const;
};

/// Compares two reports (report.hpp's JSON). `base_label` and `new_label` name them in
/// notes and errors (their file names). Throws CompareInputError on a document that is
/// no bench run.
Comparison compare_runs(const std::string& base_json, const std::string& new_json, const std::string& base_label,
                        const std::string& new_label);

/// The comparison as an aligned table, with the notes and a summary line.
std::string comparison_text(const Comparison& comparison, const std::string& base_label, const std::string& new_label);

}  // namespace cudakit::tool::bench
