// `cudakit bench --plot`: the SVG must be well-formed XML whatever the benchmark names
// hold, show a bar and a target per result, and add the bandwidth chart only when a
// size sweep exists.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "bench/plot.hpp"
#include "bench/svg.hpp"

namespace cudakit::tool::bench {
namespace {

// Checks XML well-formedness as far as these documents need: one root, every element
// closed in order, attribute values quoted, no raw '<' or stray '&' in text or values.
// Returns an empty string when well-formed, else the first problem.
std::string xml_problem(const std::string& doc) {
  std::vector<std::string> open;
  std::size_t i = 0;
  int roots = 0;
  auto entity_ok = [&](std::size_t at) {
    for (const char* e : {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"})
      if (doc.compare(at, std::string(e).size(), e) == 0) return true;
    return false;
  };
  if (doc.rfind("<?xml", 0) == 0) i = doc.find("?>") + 2;
  while (i < doc.size()) {
    if (doc[i] == '&' && !entity_ok(i)) return "stray & at " + std::to_string(i);
    if (doc[i] != '<') {
      if (open.empty() && !std::isspace(static_cast<unsigned char>(doc[i]))) return "text outside the root";
      ++i;
      continue;
    }
    std::size_t end = i + 1;
    char quote = 0;
    for (; end < doc.size(); ++end) {
      char c = doc[end];
      if (quote) {
        if (c == quote) quote = 0;
        else if (c == '<') return "raw < inside an attribute at " + std::to_string(end);
        else if (c == '&' && !entity_ok(end)) return "stray & inside an attribute at " + std::to_string(end);
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '<') {
        return "raw < inside a tag at " + std::to_string(end);
      } else if (c == '>') {
        break;
      }
    }
    if (end >= doc.size()) return "unterminated tag";
    std::string tag = doc.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.empty()) return "empty tag";
    if (tag[0] == '/') {
      std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) return "</" + name + "> closes nothing open";
      open.pop_back();
      continue;
    }
    std::string name = tag.substr(0, tag.find_first_of(" \t\n/"));
    if (open.empty() && ++roots > 1) return "more than one root element";
    if (tag.back() != '/') open.push_back(name);
  }
  if (!open.empty()) return "<" + open.back() + "> never closed";
  if (roots != 1) return "no root element";
  return {};
}

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

Result cost(const std::string& name, double cudakit_us, double raw_us) {
  return cost_result(name, "events", {{cudakit_us * 1e-6, cudakit_us * 1e-6}, {raw_us * 1e-6, raw_us * 1e-6}}, 1.05);
}

TEST(BenchSvg, TheCheckerRejectsBrokenXml) {
  EXPECT_NE(xml_problem("<svg><text>a < b</text></svg>"), "");
  EXPECT_NE(xml_problem("<svg><g></svg>"), "");
  EXPECT_NE(xml_problem("<svg a=\"&\"/>"), "");
  EXPECT_EQ(xml_problem("<?xml version=\"1.0\"?>\n<svg><g a=\"1\"/><text>a &lt; b</text></svg>\n"), "");
}

TEST(BenchSvg, EscapesMarkupInTextAndAttributes) {
  EXPECT_EQ(xml_escaped("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
  SvgDocument svg(100, 50);
  svg.text(1, 2, "<script>&");
  svg.rect(0, 0, 10, 10, "\"red\"");
  std::string doc = svg.finish();
  EXPECT_EQ(xml_problem(doc), "") << doc;
  EXPECT_EQ(doc.find("<script>"), std::string::npos);
}

TEST(BenchSvg, NumbersAreShortAndFinite) {
  EXPECT_EQ(svg_number(12.5), "12.5");
  EXPECT_EQ(svg_number(12.0), "12");
  EXPECT_EQ(svg_number(-0.01), "0");
  EXPECT_EQ(svg_number(NAN), "0");
}

TEST(BenchPlot, IsWellFormedWithABarAndATargetPerResult) {
  std::vector<Result> results = {cost("event record", 0.131, 0.13), cost("stream <create> & destroy", 6.0, 5.0),
                                 error_result("graph replay", "graphs", "cuGraphLaunch failed <here>")};
  std::string doc = plot_svg(results, "NVIDIA H200 & friends");
  EXPECT_EQ(xml_problem(doc), "") << doc;
  EXPECT_NE(doc.find("stream &lt;create&gt; &amp; destroy"), std::string::npos);
  EXPECT_NE(doc.find("error: cuGraphLaunch failed &lt;here&gt;"), std::string::npos);
  EXPECT_NE(doc.find("1.008"), std::string::npos);  // event record's ratio
  EXPECT_NE(doc.find("1.200"), std::string::npos);  // the missed one's ratio
  EXPECT_EQ(count(doc, "stroke-dasharray=\"3 2\""), 2u + 1u);  // a target tick per judged result, one in the legend
  EXPECT_EQ(doc.find("bandwidth:"), std::string::npos);       // no size sweep, no line chart
}

TEST(BenchPlot, EachVerdictHasItsColourAndTheLegendNamesThem) {
  Result noisy = cost_result("noisy", "events", {{0.95e-6, 1.1e-6, 1.0e-6}, {1e-6, 1e-6, 1e-6}}, 1.05);  // 0.95..1.10
  std::string met_only = plot_svg({cost("event record", 0.131, 0.13)}, "H200");
  std::string with_noise = plot_svg({cost("event record", 0.131, 0.13), noisy}, "H200");
  std::string with_miss = plot_svg({cost("slow", 1.3, 1.0)}, "H200");
  const std::string met = "#2e7d32", within_noise = "#ef8f00", missed = "#c62828";
  EXPECT_EQ(xml_problem(with_noise), "") << with_noise;
  // Each colour appears once in the legend; a bar or label of that verdict adds more.
  EXPECT_EQ(count(met_only, within_noise), 1u);
  EXPECT_GT(count(with_noise, within_noise), 1u) << "the within-noise bar is amber";
  EXPECT_GT(count(with_miss, missed), 1u);
  EXPECT_EQ(count(with_miss, met), 1u) << "a miss is not drawn as met";
  EXPECT_NE(met_only.find(">within noise<"), std::string::npos);
  EXPECT_NE(met_only.find(">target missed<"), std::string::npos);
}

TEST(BenchPlot, AReportedRatioFarOffDoesNotStretchTheAxis) {
  Result far = cost("first request, cold", 900.0, 18.0);  // 50x
  far.target_ratio = 0;
  std::string doc = plot_svg({cost("event record", 0.131, 0.13), far}, "H200");
  EXPECT_EQ(xml_problem(doc), "") << doc;
  EXPECT_NE(doc.find("50.000"), std::string::npos) << "its label gives the ratio";
  EXPECT_EQ(doc.find(">50.00<"), std::string::npos) << "no axis tick out there";
  EXPECT_NE(doc.find(">1.00<"), std::string::npos);
}

TEST(BenchPlot, BandwidthSweepGetsALineChartPerSeriesAndSide) {
  std::vector<Result> results;
  for (double size : {4096.0, 65536.0, 1048576.0}) {
    double seconds = size / 50e9;
    results.push_back(bandwidth_result("pinned H2D " + size_label(size), "bandwidth", {{seconds}, {seconds}}, size,
                                       0.98, "pinned H2D", size));
    results.push_back(bandwidth_result("pinned D2H " + size_label(size), "bandwidth", {{seconds}, {seconds * 1.1}},
                                       size, 0.98, "pinned D2H", size));
  }
  std::string doc = plot_svg(results, "");
  EXPECT_EQ(xml_problem(doc), "") << doc;
  EXPECT_NE(doc.find("bandwidth: GB/s against transfer size"), std::string::npos);
  EXPECT_EQ(count(doc, "<polyline"), 4u);  // two series, cudakit and raw each
  EXPECT_NE(doc.find(">4 KiB<"), std::string::npos);
  EXPECT_NE(doc.find(">1 MiB<"), std::string::npos);
}

TEST(BenchPlot, AnEmptyRunIsStillAWellFormedPicture) { EXPECT_EQ(xml_problem(plot_svg({}, "nothing ran")), ""); }

TEST(BenchPlot, TickStepsAreOneTwoOrFiveTimesAPowerOfTen) {
  EXPECT_DOUBLE_EQ(nice_tick_step(0.22, 8), 0.05);
  EXPECT_DOUBLE_EQ(nice_tick_step(10, 10), 1);
  EXPECT_DOUBLE_EQ(nice_tick_step(130, 6), 50);
  EXPECT_DOUBLE_EQ(nice_tick_step(0, 6), 1);
}

TEST(BenchPlot, SizeLabelsUseBinaryUnits) {
  EXPECT_EQ(size_label(512), "512 B");
  EXPECT_EQ(size_label(4096), "4 KiB");
  EXPECT_EQ(size_label(1536), "1.5 KiB");
  EXPECT_EQ(size_label(1 << 30), "1 GiB");
}

}  // namespace
}  // namespace cudakit::tool::bench
