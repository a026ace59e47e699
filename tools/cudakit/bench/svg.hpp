// A minimal SVG document builder: enough shapes for the benchmark plots, with every
// text and attribute value escaped, so a benchmark name with '<' or '&' in it cannot
// break the file. Written by hand because the plot is a few dozen elements and a
// charting library would be the heaviest dependency of the whole project.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cudakit::tool::bench {

/// `text` with &, <, >, " and ' replaced by entities: safe in text and in attributes.
std::string xml_escaped(std::string_view text);

/// "12.5" rather than "12.500000": coordinates rounded to 0.1, trailing zeros dropped.
std::string svg_number(double value);

enum class TextAnchor { start, middle, end };

struct Stroke {
  std::string colour = "#222";
  double width = 1;
  std::string dash;  // "4 3" for a dashed line; empty for solid
};

class SvgDocument {
 public:
  SvgDocument(double width, double height);

  void rect(double x, double y, double width, double height, std::string_view fill);
  void line(double x1, double y1, double x2, double y2, const Stroke& stroke);
  void polyline(const std::vector<std::pair<double, double>>& points, const Stroke& stroke);
  void circle(double cx, double cy, double radius, std::string_view fill);
  void text(double x, double y, std::string_view content, TextAnchor anchor = TextAnchor::start, double size = 12,
            std::string_view fill = "#222", bool bold = false);

  /// The finished document (closes the root element).
  std::string finish() const;

 private:
  std::string body_;
  double width_, height_;
};

}  // namespace cudakit::tool::bench
