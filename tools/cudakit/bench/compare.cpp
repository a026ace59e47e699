#include "bench/compare.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <utility>

#include "bench/report.hpp"
#include "bench/result.hpp"
#include "bench/statistics.hpp"

namespace cudakit::tool::bench {

namespace {

using json = nlohmann::json;
constexpr double nan = std::numeric_limits<double>::quiet_NaN();
constexpr double significance_level = 0.05;

json parse_run(const std::string& text, const std::string& label) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) throw CompareInputError(label + " is not JSON");
  if (!doc.contains("schema") || doc["schema"] != report_schema)
    throw CompareInputError(label + " is not a cudakit bench run (its schema is not " + std::string(report_schema) +
                            ")");
  if (!doc.contains("results") || !doc["results"].is_array())
    throw CompareInputError(label + " has no results");
  return doc;
}

double number_or_nan(const json& value) { return value.is_number() ? value.get<double>() : nan; }

std::vector<double> samples_of(const json& side) {
  std::vector<double> out;
  if (!side.is_object() || !side.contains("samples") || !side["samples"].is_array()) return out;
  for (const json& s : side["samples"]) out.push_back(number_or_nan(s));
  return out;
}

// What one run says about one figure.
struct Figure {
  const json* result;
  double ratio;
  std::vector<double> per_round;  // empty when the file has no samples
};

Figure figure_of(const json& r) {
  Figure f{&r, r.contains("ratio") ? number_or_nan(r["ratio"]) : nan, {}};
  if (r.contains("cudakit") && r.contains("raw")) f.per_round = round_ratios(samples_of(r["cudakit"]), samples_of(r["raw"]));
  return f;
}

std::string error_of(const json& r) { return r.contains("error") && r["error"].is_string() ? r["error"].get<std::string>() : ""; }

FigureChange change_of(const Figure& base, const Figure& fresh) {
  const json& r = *fresh.result;
  FigureChange c;
  c.name = r.value("name", "");
  c.unit = r.value("unit", "");
  c.higher_is_better = r.value("higher_is_better", false);
  c.base_ratio = base.ratio;
  c.new_ratio = fresh.ratio;
  c.change = base.ratio > 0 && fresh.ratio > 0 ? fresh.ratio / base.ratio - 1 : nan;
  c.p_value = nan;
  std::string base_error = error_of(*base.result), new_error = error_of(r);
  if (!base_error.empty() || !new_error.empty()) {
    c.error = !new_error.empty() ? "failed in the new run: " + new_error : "failed in the base run: " + base_error;
    return c;
  }
  // One round on a side gives no spread to test against.
  if (base.per_round.size() < 2 || fresh.per_round.size() < 2 || !std::isfinite(c.change)) return c;
  c.p_value = mann_whitney_p(base.per_round, fresh.per_round);
  const double base_median = summarize(base.per_round).median, new_median = summarize(fresh.per_round).median;
  const bool moved_up = new_median > base_median && c.change > 0;
  const bool moved_down = new_median < base_median && c.change < 0;
  c.significance = Significance::unchanged;
  if (c.p_value < significance_level && (moved_up || moved_down))
    c.significance = moved_up == c.higher_is_better ? Significance::better : Significance::worse;
  return c;
}

bool has_samples(const json& doc) {
  for (const json& r : doc["results"])
    if (!figure_of(r).per_round.empty()) return true;
  return doc["results"].empty();
}

std::string ratio_text(double ratio) {
  if (!std::isfinite(ratio)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3fx", ratio);
  return buf;
}

std::string change_text(double change) {
  if (!std::isfinite(change)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", change * 100);
  return buf;
}

std::string p_text(double p) {
  if (!std::isfinite(p)) return "-";
  char buf[32];
  if (p < 0.001) std::snprintf(buf, sizeof buf, "<0.001");
  else std::snprintf(buf, sizeof buf, "%.3f", p);
  return buf;
}

}  // namespace

const char* significance_name(Significance significance) {
  switch (significance) {
    case Significance::better: return "better";
    case Significance::worse: return "worse";
    case Significance::unchanged: return "no significant change";
    case Significance::unknown: return "significance unknown";
  }
  return "?";
}

int Comparison::count(Significance significance) const {
  return static_cast<int>(std::count_if(figures.begin(), figures.end(), [&](const FigureChange& f) {
    return f.error.empty() && f.significance == significance;
  }));
}

Comparison compare_runs(const std::string& base_json, const std::string& new_json, const std::string& base_label,
                        const std::string& new_label) {
  json base = parse_run(base_json, base_label), fresh = parse_run(new_json, new_label);
  Comparison out;
  for (const auto& [doc, label] : {std::pair{&base, &base_label}, std::pair{&fresh, &new_label}})
    if (!has_samples(*doc))
      out.notes.push_back(*label + " has no per-round samples (an older or stripped file): its changes are shown "
                                   "without their significance");

  std::map<std::string, const json*> base_by_name;  // names are unique within a run
  for (const json& r : base["results"]) base_by_name[r.value("name", "")] = &r;
  std::map<std::string, bool> seen;
  for (const json& r : fresh["results"]) {
    const std::string name = r.value("name", "");
    auto hit = base_by_name.find(name);
    if (hit == base_by_name.end()) {
      out.only_in_new.push_back(name);
      continue;
    }
    seen[name] = true;
    out.figures.push_back(change_of(figure_of(*hit->second), figure_of(r)));
  }
  for (const json& r : base["results"])
    if (!seen.count(r.value("name", ""))) out.only_in_base.push_back(r.value("name", ""));
  return out;
}

std::string comparison_text(const Comparison& comparison, const std::string& base_label, const std::string& new_label) {
  std::size_t width = std::string("figure").size();
  for (const FigureChange& f : comparison.figures) width = std::max(width, f.name.size());
  const int w = static_cast<int>(width);
  std::string text;
  char line[512];
  std::snprintf(line, sizeof line, "cudakit bench --compare: %s (base) against %s (new); cudakit/raw ratios\n\n",
                base_label.c_str(), new_label.c_str());
  text += line;
  std::snprintf(line, sizeof line, "  %-*s  %-9s  %-9s  %-8s  %-7s  %s\n", w, "figure", "base", "new", "change", "p",
                "significance");
  text += line;
  for (const FigureChange& f : comparison.figures) {
    std::string verdict = f.error.empty() ? significance_name(f.significance) : "error: " + f.error;
    std::snprintf(line, sizeof line, "  %-*s  %-9s  %-9s  %-8s  %-7s  ", w, f.name.c_str(), ratio_text(f.base_ratio).c_str(),
                  ratio_text(f.new_ratio).c_str(), change_text(f.change).c_str(), p_text(f.p_value).c_str());
    text += line + verdict + (f.higher_is_better ? " (higher is better)" : "") + "\n";
  }
  if (!comparison.only_in_base.empty()) text += "\nonly in " + base_label + ": " + std::to_string(comparison.only_in_base.size()) + " figures\n";
  if (!comparison.only_in_new.empty()) text += "\nonly in " + new_label + ": " + std::to_string(comparison.only_in_new.size()) + " figures\n";
  for (const std::string& note : comparison.notes) text += "\nnote: " + note + "\n";
  std::snprintf(line, sizeof line,
                "\ncompare: %zu figures, %d better, %d worse, %d without a significant change (Mann-Whitney U on the "
                "per-round ratios, p < 0.05)\n",
                comparison.figures.size(), comparison.count(Significance::better),
                comparison.count(Significance::worse), comparison.count(Significance::unchanged));
  text += line;
  return text;
}

}  // namespace cudakit::tool::bench
