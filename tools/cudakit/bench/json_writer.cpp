#include "bench/json_writer.hpp"

#include <cmath>
#include <cstdio>

namespace cudakit::tool::bench {

std::string json_escaped(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

void JsonWriter::newline() {
  out_ += '\n';
  out_.append(2 * levels_.size(), ' ');
}

void JsonWriter::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (levels_.empty()) return;
  Level& level = levels_.back();
  if (!level.empty) out_ += level.layout == Layout::one_line ? ", " : ",";
  if (level.layout == Layout::multiline) newline();
  level.empty = false;
}

void JsonWriter::begin(char bracket, Layout layout) {
  before_value();
  out_ += bracket;
  levels_.push_back({layout});
}

void JsonWriter::end(char bracket) {
  Level level = levels_.back();
  levels_.pop_back();
  if (level.layout == Layout::multiline && !level.empty) newline();
  out_ += bracket;
  if (levels_.empty()) out_ += '\n';
}

void JsonWriter::begin_object(Layout layout) { begin('{', layout); }
void JsonWriter::end_object() { end('}'); }
void JsonWriter::begin_array(Layout layout) { begin('[', layout); }
void JsonWriter::end_array() { end(']'); }

void JsonWriter::key(std::string_view name) {
  before_value();
  out_ += '"';
  out_ += json_escaped(name);
  out_ += "\": ";
  after_key_ = true;
}

void JsonWriter::value(std::string_view text) {
  before_value();
  out_ += '"';
  out_ += json_escaped(text);
  out_ += '"';
}

void JsonWriter::value(double number) {
  if (!std::isfinite(number)) return null();
  before_value();
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", number);
  out_ += buf;
}

void JsonWriter::value(bool flag) {
  before_value();
  out_ += flag ? "true" : "false";
}

void JsonWriter::null() {
  before_value();
  out_ += "null";
}

}  // namespace cudakit::tool::bench
