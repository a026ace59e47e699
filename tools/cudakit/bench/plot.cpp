#include "bench/plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "bench/svg.hpp"

namespace cudakit::tool::bench {

namespace {

constexpr double page_width = 960;
constexpr double label_right = 330;  // names end here, the ratio axis starts after
constexpr double plot_left = 340;
constexpr double plot_right = page_width - 150;
constexpr double row_height = 24;
constexpr const char* colour_met = "#2e7d32";
constexpr const char* colour_missed = "#c62828";
constexpr const char* colour_unjudged = "#9e9e9e";
constexpr const char* colour_within_noise = "#ef8f00";
constexpr const char* colour_target = "#1565c0";
constexpr const char* series_colours[] = {"#1565c0", "#ef6c00", "#6a1b9a", "#2e7d32", "#c62828", "#00838f", "#5d4037"};

std::string format(const char* pattern, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, pattern, value);
  return buf;
}

struct Axis {
  double lo, hi, left, right;
  double at(double v) const { return left + (v - lo) / (hi - lo) * (right - left); }
};

// The bar chart of ratios; returns the y where it ends. The axis spans the judged
// results; a reported one beyond it (a phase's cold cost, fresh pages against reused
// ones) is drawn to the axis's end, and its label gives the ratio.
double draw_ratio_chart(SvgDocument& svg, const std::vector<Result>& results, double top) {
  std::vector<Verdict> verdicts;
  double lo = 0.9, hi = 1.1;
  for (const Result& r : results) {
    verdicts.push_back(judge(r));
    const Verdict& v = verdicts.back();
    if (!v.judged) continue;
    for (double x : {v.ratio, v.round_ratio.p10, v.round_ratio.p90, r.target_ratio > 0 ? r.target_ratio : 1.0}) {
      if (!std::isfinite(x)) continue;
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
  }
  double pad = (hi - lo) * 0.05;
  double step = nice_tick_step(hi - lo + 2 * pad, 8);
  Axis axis{std::floor((lo - pad) / step) * step, std::ceil((hi + pad) / step) * step, plot_left, plot_right};

  svg.text(16, top + 16, "cudakit / raw, ratio of medians (lower is better for costs, higher for throughput)",
           TextAnchor::start, 14, "#222", true);
  double rows_top = top + 34;
  double rows_bottom = rows_top + row_height * static_cast<double>(results.size());

  for (double t = axis.lo; t <= axis.hi + step / 2; t += step) {
    double x = axis.at(t);
    svg.line(x, rows_top - 4, x, rows_bottom + 4, {"#e0e0e0", 1, ""});
    svg.text(x, rows_bottom + 18, format("%.2f", t), TextAnchor::middle, 11, "#555");
  }
  svg.line(axis.at(1.0), rows_top - 6, axis.at(1.0), rows_bottom + 6, {"#424242", 1.5, ""});

  for (std::size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    const Verdict& v = verdicts[i];
    double y = rows_top + row_height * static_cast<double>(i);
    double mid = y + row_height / 2;
    svg.text(label_right, mid + 4, r.name, TextAnchor::end, 12);
    if (!r.error.empty() || !std::isfinite(v.ratio)) {
      svg.text(plot_left + 4, mid + 4, r.error.empty() ? "no ratio" : "error: " + r.error, TextAnchor::start, 11,
               colour_missed);
      continue;
    }
    const char* fill = !v.judged ? colour_unjudged : v.met ? colour_met : v.within_noise ? colour_within_noise : colour_missed;
    double x0 = axis.at(1.0), x1 = axis.at(std::clamp(v.ratio, axis.lo, axis.hi));
    svg.rect(std::min(x0, x1), mid - 7, std::max(std::abs(x1 - x0), 1.0), 14, fill);
    if (std::isfinite(v.round_ratio.p10) && std::isfinite(v.round_ratio.p90)) {
      double p10 = axis.at(std::clamp(v.round_ratio.p10, axis.lo, axis.hi));
      double p90 = axis.at(std::clamp(v.round_ratio.p90, axis.lo, axis.hi));
      svg.line(p10, mid, p90, mid, {"#212121", 1, ""});
      svg.line(p10, mid - 4, p10, mid + 4, {"#212121", 1, ""});
      svg.line(p90, mid - 4, p90, mid + 4, {"#212121", 1, ""});
    }
    std::string label = format("%.3f", v.ratio);
    if (r.target_ratio > 0) {
      double xt = axis.at(r.target_ratio);
      svg.line(xt, y + 2, xt, y + row_height - 2, {colour_target, 2, "3 2"});
      label += (r.better == Better::lower ? "  (<= " : "  (>= ") + format("%.2f", r.target_ratio) + ")";
    }
    svg.text(plot_right + 10, mid + 4, label, TextAnchor::start, 11, fill);
  }

  double legend = rows_bottom + 40;
  svg.rect(plot_left, legend - 9, 12, 10, colour_met);
  svg.text(plot_left + 16, legend, "target met", TextAnchor::start, 11);
  svg.rect(plot_left + 100, legend - 9, 12, 10, colour_within_noise);
  svg.text(plot_left + 116, legend, "within noise", TextAnchor::start, 11);
  svg.rect(plot_left + 200, legend - 9, 12, 10, colour_missed);
  svg.text(plot_left + 216, legend, "target missed", TextAnchor::start, 11);
  svg.line(plot_left + 320, legend - 10, plot_left + 320, legend + 2, {colour_target, 2, "3 2"});
  svg.text(plot_left + 326, legend, "target", TextAnchor::start, 11);
  svg.line(plot_left + 390, legend - 4, plot_left + 410, legend - 4, {"#212121", 1, ""});
  svg.text(plot_left + 416, legend, "p10..p90 of per-round ratios", TextAnchor::start, 11);
  return legend + 20;
}

struct SeriesPoint {
  double size, cudakit, raw;
};

// The GB/s axis: linear from 0 when the rates stay within 20x of each other; else
// logarithmic (small copies run orders of magnitude slower than large ones, and a
// linear axis would flatten them onto zero), with ticks at 1, 2 and 5 per decade.
struct RateAxis {
  bool logarithmic;
  double lo, hi, bottom, top;
  double at(double rate) const {
    if (!logarithmic) return bottom + (rate - lo) / (hi - lo) * (top - bottom);
    double clamped = std::max(rate, lo);
    return bottom + (std::log10(clamped) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) * (top - bottom);
  }
  std::vector<double> ticks() const {
    std::vector<double> out;
    if (logarithmic) {
      // 1, 2 and 5 in each decade while that stays readable; over 3 decades, 1 only.
      bool fine = std::log10(hi / lo) <= 3.01;
      for (double decade = lo; decade <= hi * 1.0001; decade *= 10)
        for (double m : {1.0, 2.0, 5.0})
          if ((fine || m == 1.0) && decade * m <= hi * 1.0001) out.push_back(decade * m);
    } else {
      double step = nice_tick_step(hi - lo, 6);
      for (double r = lo; r <= hi + step / 2; r += step) out.push_back(r);
    }
    return out;
  }
};

RateAxis rate_axis(double min_rate, double max_rate, double bottom, double top) {
  if (!(max_rate > 0)) return {false, 0, 1, bottom, top};
  if (min_rate > 0 && max_rate / min_rate > 20)
    return {true, std::pow(10, std::floor(std::log10(min_rate))), std::pow(10, std::ceil(std::log10(max_rate))), bottom,
            top};
  double step = nice_tick_step(max_rate * 1.1, 6);
  return {false, 0, std::ceil(max_rate * 1.05 / step) * step, bottom, top};
}

// The bandwidth line chart; returns the y where it ends.
double draw_bandwidth_chart(SvgDocument& svg, const std::map<std::string, std::vector<SeriesPoint>>& series,
                            double top) {
  double min_size = INFINITY, max_size = 0, min_rate = INFINITY, max_rate = 0;
  for (const auto& [name, points] : series)
    for (const SeriesPoint& p : points) {
      min_size = std::min(min_size, p.size);
      max_size = std::max(max_size, p.size);
      for (double rate : {p.cudakit, p.raw}) {
        if (rate > 0) min_rate = std::min(min_rate, rate);
        max_rate = std::max(max_rate, rate);
      }
    }
  double lo_exp = std::floor(std::log2(min_size)), hi_exp = std::ceil(std::log2(max_size));
  if (hi_exp <= lo_exp) hi_exp = lo_exp + 1;

  double chart_top = top + 34, chart_bottom = chart_top + 260;
  Axis x{lo_exp, hi_exp, 90, plot_right - 60};
  RateAxis y = rate_axis(min_rate, max_rate, chart_bottom, chart_top);
  svg.text(16, top + 16,
           std::string("bandwidth: GB/s against transfer size (cudakit solid, raw dashed") +
               (y.logarithmic ? "; both axes logarithmic)" : ")"),
           TextAnchor::start, 14, "#222", true);

  for (double r : y.ticks()) {
    svg.line(x.left, y.at(r), x.right, y.at(r), {"#e0e0e0", 1, ""});
    svg.text(x.left - 6, y.at(r) + 4, format("%g", r), TextAnchor::end, 11, "#555");
  }
  double exp_step = std::max(1.0, std::ceil((hi_exp - lo_exp) / 10));
  for (double e = lo_exp; e <= hi_exp; e += exp_step)
    svg.text(x.at(e), chart_bottom + 16, size_label(std::exp2(e)), TextAnchor::middle, 11, "#555");
  svg.line(x.left, chart_bottom, x.right, chart_bottom, {"#424242", 1, ""});
  svg.line(x.left, chart_top, x.left, chart_bottom, {"#424242", 1, ""});
  svg.text(24, (chart_top + chart_bottom) / 2, "GB/s", TextAnchor::start, 11, "#555");

  std::size_t colour = 0;
  double legend_y = chart_top + 6;
  for (const auto& [name, points] : series) {
    const char* c = series_colours[colour++ % std::size(series_colours)];
    std::vector<std::pair<double, double>> ck, raw;
    for (const SeriesPoint& p : points) {
      ck.emplace_back(x.at(std::log2(p.size)), y.at(p.cudakit));
      raw.emplace_back(x.at(std::log2(p.size)), y.at(p.raw));
    }
    svg.polyline(ck, {c, 2, ""});
    svg.polyline(raw, {c, 1.5, "5 3"});
    for (const auto& [px, py] : ck) svg.circle(px, py, 2.5, c);
    svg.line(plot_right - 40, legend_y, plot_right - 20, legend_y, {c, 2, ""});
    svg.text(plot_right - 14, legend_y + 4, name, TextAnchor::start, 11);
    legend_y += 16;
  }
  return chart_bottom + 36;
}

}  // namespace

double nice_tick_step(double range, int max_ticks) {
  if (!(range > 0) || max_ticks < 1) return 1;
  double rough = range / max_ticks;
  double magnitude = std::pow(10, std::floor(std::log10(rough)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= rough) return m * magnitude;
  return 10 * magnitude;
}

std::string size_label(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return format(bytes == std::floor(bytes) ? "%.0f" : "%.1f", bytes) + " " + units[u];
}

std::string plot_svg(const std::vector<Result>& results, const std::string& heading) {
  // Size sweeps of the bandwidth group, by series, in size order.
  std::map<std::string, std::vector<SeriesPoint>> sweeps;
  for (const Result& r : results) {
    if (r.group != "bandwidth" || !(r.size_bytes > 0) || !r.error.empty()) continue;
    Verdict v = judge(r);
    if (!std::isfinite(v.cudakit.median) || !std::isfinite(v.raw.median)) continue;
    sweeps[r.series.empty() ? r.name : r.series].push_back({r.size_bytes, v.cudakit.median, v.raw.median});
  }
  for (auto& [name, points] : sweeps)
    std::sort(points.begin(), points.end(), [](const SeriesPoint& a, const SeriesPoint& b) { return a.size < b.size; });

  double ratio_height = 34 + row_height * static_cast<double>(results.size()) + 60;
  double height = 50 + ratio_height + (sweeps.empty() ? 0 : 340);
  SvgDocument svg(page_width, height);
  svg.text(16, 28, "cudakit bench" + (heading.empty() ? std::string() : ": " + heading), TextAnchor::start, 16, "#111",
           true);
  double y = draw_ratio_chart(svg, results, 44);
  if (!sweeps.empty()) draw_bandwidth_chart(svg, sweeps, y);
  return svg.finish();
}

}  // namespace cudakit::tool::bench
