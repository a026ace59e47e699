#include "bench/svg.hpp"

#include <cmath>
#include <cstdio>

namespace cudakit::tool::bench {

std::string xml_escaped(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // XML 1.0 allows no control characters but tab, newline and carriage return.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') out += ' ';
        else out += c;
    }
  }
  return out;
}

std::string svg_number(double value) {
  if (!std::isfinite(value)) return "0";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", std::round(value * 10) / 10);
  std::string s = buf;
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  if (s == "-0") s = "0";
  return s;
}

namespace {
std::string stroke_attributes(const Stroke& stroke) {
  std::string s = " stroke=\"" + xml_escaped(stroke.colour) + "\" stroke-width=\"" + svg_number(stroke.width) + "\"";
  if (!stroke.dash.empty()) s += " stroke-dasharray=\"" + xml_escaped(stroke.dash) + "\"";
  return s;
}

const char* anchor_name(TextAnchor anchor) {
  switch (anchor) {
    case TextAnchor::middle: return "middle";
    case TextAnchor::end: return "end";
    case TextAnchor::start: break;
  }
  return "start";
}
}  // namespace

SvgDocument::SvgDocument(double width, double height) : width_(width), height_(height) {
  rect(0, 0, width, height, "#fff");
}

void SvgDocument::rect(double x, double y, double width, double height, std::string_view fill) {
  body_ += "  <rect x=\"" + svg_number(x) + "\" y=\"" + svg_number(y) + "\" width=\"" + svg_number(width) +
           "\" height=\"" + svg_number(height) + "\" fill=\"" + xml_escaped(fill) + "\"/>\n";
}

void SvgDocument::line(double x1, double y1, double x2, double y2, const Stroke& stroke) {
  body_ += "  <line x1=\"" + svg_number(x1) + "\" y1=\"" + svg_number(y1) + "\" x2=\"" + svg_number(x2) + "\" y2=\"" +
           svg_number(y2) + "\"" + stroke_attributes(stroke) + "/>\n";
}

void SvgDocument::polyline(const std::vector<std::pair<double, double>>& points, const Stroke& stroke) {
  std::string coordinates;
  for (const auto& [x, y] : points) {
    if (!coordinates.empty()) coordinates += ' ';
    coordinates += svg_number(x) + "," + svg_number(y);
  }
  body_ += "  <polyline points=\"" + coordinates + "\" fill=\"none\"" + stroke_attributes(stroke) + "/>\n";
}

void SvgDocument::circle(double cx, double cy, double radius, std::string_view fill) {
  body_ += "  <circle cx=\"" + svg_number(cx) + "\" cy=\"" + svg_number(cy) + "\" r=\"" + svg_number(radius) +
           "\" fill=\"" + xml_escaped(fill) + "\"/>\n";
}

void SvgDocument::text(double x, double y, std::string_view content, TextAnchor anchor, double size,
                       std::string_view fill, bool bold) {
  body_ += "  <text x=\"" + svg_number(x) + "\" y=\"" + svg_number(y) + "\" font-size=\"" + svg_number(size) +
           "\" text-anchor=\"" + anchor_name(anchor) + "\" fill=\"" + xml_escaped(fill) + "\"" +
           (bold ? " font-weight=\"bold\"" : "") + ">" + xml_escaped(content) + "</text>\n";
}

std::string SvgDocument::finish() const {
  std::string w = svg_number(width_), h = svg_number(height_);
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + w +
         "\" height=\"" + h + "\" viewBox=\"0 0 " + w + " " + h +
         "\" font-family=\"Helvetica, Arial, sans-serif\">\n" + body_ + "</svg>\n";
}

}  // namespace cudakit::tool::bench
