// A small JSON writer: objects and arrays with commas and indentation handled, strings
// escaped, and numbers that JSON can hold (NaN and infinities become null, since JSON
// has no spelling for them and a reader should see "no value", not a parse error).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cudakit::tool::bench {

/// `text` as the inside of a JSON string: quotes, backslashes and control characters
/// escaped; other bytes (UTF-8 included) kept as they are.
std::string json_escaped(std::string_view text);

class JsonWriter {
 public:
  /// Arrays of numbers are easier to read on one line; objects one member a line.
  enum class Layout { multiline, one_line };

  void begin_object(Layout layout = Layout::multiline);
  void end_object();
  void begin_array(Layout layout = Layout::multiline);
  void end_array();
  /// The next member's name (inside an object, before its value).
  void key(std::string_view name);

  void value(std::string_view text);
  void value(const char* text) { value(std::string_view(text)); }
  void value(double number);
  void value(int number) { value(static_cast<double>(number)); }
  void value(bool flag);
  void null();

  /// The document so far.
  const std::string& text() const { return out_; }

 private:
  struct Level {
    Layout layout;
    bool empty = true;
  };
  void before_value();
  void begin(char bracket, Layout layout);
  void end(char bracket);
  void newline();

  std::string out_;
  std::vector<Level> levels_;
  bool after_key_ = false;
};

}  // namespace cudakit::tool::bench
