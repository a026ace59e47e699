// `cudakit bench --json`: escaping, the writer's commas and nesting, and the shape of
// the report. A small recursive-descent parser below checks that every document is
// valid JSON (RFC 8259) and lets the tests read values back.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/json_writer.hpp"
#include "bench/report.hpp"

namespace cudakit::tool::bench {
namespace {

// ---- a minimal JSON reader, for checking only ----

struct Json {
  enum Kind { null, boolean, number, string, array, object } kind = null;
  bool flag = false;
  double num = 0;
  std::string text;
  std::vector<Json> items;
  std::map<std::string, Json> members;
  const Json& operator[](const std::string& key) const {
    static const Json missing;
    auto it = members.find(key);
    return it == members.end() ? missing : it->second;
  }
};

class JsonReader {
 public:
  explicit JsonReader(const std::string& s) : s_(s) {}

  // Parses the whole text; `error` says where it went wrong.
  bool parse(Json& out, std::string& error) {
    ok_ = true;
    out = value();
    space();
    if (ok_ && i_ != s_.size()) fail("trailing characters");
    error = error_;
    return ok_;
  }

 private:
  void fail(const std::string& why) {
    if (ok_) error_ = why + " at offset " + std::to_string(i_);
    ok_ = false;
  }
  void space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  bool eat(char c) {
    space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool word(const char* w) {
    std::string t(w);
    if (s_.compare(i_, t.size(), t) != 0) return false;
    i_ += t.size();
    return true;
  }
  std::string string_body() {
    std::string out;
    ++i_;  // opening quote
    while (ok_) {
      if (i_ >= s_.size()) {
        fail("unterminated string");
        break;
      }
      char c = s_[i_++];
      if (c == '"') break;
      if (static_cast<unsigned char>(c) < 0x20) fail("raw control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      char e = i_ < s_.size() ? s_[i_++] : '\0';
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          if (i_ + 4 > s_.size()) return fail("short \\u escape"), out;
          unsigned code = std::stoul(s_.substr(i_, 4), nullptr, 16);
          i_ += 4;
          if (code < 0x80) out += static_cast<char>(code);
          else out += '?';  // enough for these tests
          break;
        }
        default: fail("bad escape");
      }
    }
    return out;
  }
  Json value() {
    Json v;
    space();
    if (i_ >= s_.size()) return fail("unexpected end"), v;
    char c = s_[i_];
    if (c == '{') {
      ++i_;
      v.kind = Json::object;
      if (eat('}')) return v;
      do {
        space();
        if (i_ >= s_.size() || s_[i_] != '"') return fail("expected a key"), v;
        std::string key = string_body();
        if (!eat(':')) return fail("expected ':'"), v;
        v.members[key] = value();
      } while (ok_ && eat(','));
      if (!eat('}')) fail("expected '}'");
    } else if (c == '[') {
      ++i_;
      v.kind = Json::array;
      if (eat(']')) return v;
      do v.items.push_back(value());
      while (ok_ && eat(','));
      if (!eat(']')) fail("expected ']'");
    } else if (c == '"') {
      v.kind = Json::string;
      v.text = string_body();
    } else if (word("true")) {
      v.kind = Json::boolean;
      v.flag = true;
    } else if (word("false")) {
      v.kind = Json::boolean;
    } else if (word("null")) {
      v.kind = Json::null;
    } else if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
      std::size_t start = i_;
      if (s_[i_] == '-') ++i_;
      auto digits = [&] {
        std::size_t d = i_;
        while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
        return i_ > d;
      };
      if (!digits()) return fail("bad number"), v;
      if (i_ < s_.size() && s_[i_] == '.' && (++i_, !digits())) return fail("bad fraction"), v;
      if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
        ++i_;
        if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
        if (!digits()) return fail("bad exponent"), v;
      }
      v.kind = Json::number;
      v.num = std::stod(s_.substr(start, i_ - start));
    } else {
      fail(std::string("unexpected '") + c + "'");
    }
    return v;
  }

  const std::string& s_;
  std::size_t i_ = 0;
  bool ok_ = true;
  std::string error_;
};

Json parsed(const std::string& text) {
  Json out;
  std::string error;
  EXPECT_TRUE(JsonReader(text).parse(out, error)) << error << "\n" << text;
  return out;
}

// ---- escaping and the writer ----

TEST(BenchJson, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(json_escaped("a\"b\\c"), "a\\\"b\\\\c");
  EXPECT_EQ(json_escaped("line\nnext\ttab\r"), "line\\nnext\\ttab\\r");
  EXPECT_EQ(json_escaped(std::string("\x01\x1f", 2)), "\\u0001\\u001f");
}

TEST(BenchJson, KeepsUtf8AsItIs) { EXPECT_EQ(json_escaped("µs ±2%"), "µs ±2%"); }

TEST(BenchJson, EscapedStringsReadBackUnchanged) {
  std::string nasty = "quote \" backslash \\ newline \n bell \x07 end";
  JsonWriter w;
  w.begin_object();
  w.key(nasty);
  w.value(nasty);
  w.end_object();
  Json doc = parsed(w.text());
  EXPECT_EQ(doc[nasty].text, nasty);
}

TEST(BenchJson, WriterPutsCommasBetweenMembersAndNests) {
  JsonWriter w;
  w.begin_object();
  w.key("a");
  w.value(1);
  w.key("list");
  w.begin_array(JsonWriter::Layout::one_line);
  w.value(1.5);
  w.value(true);
  w.value("x");
  w.null();
  w.end_array();
  w.key("empty");
  w.begin_object();
  w.end_object();
  w.key("empty_list");
  w.begin_array();
  w.end_array();
  w.end_object();
  Json doc = parsed(w.text());
  EXPECT_EQ(doc["a"].num, 1);
  ASSERT_EQ(doc["list"].items.size(), 4u);
  EXPECT_EQ(doc["list"].items[3].kind, Json::null);
  EXPECT_EQ(doc["empty"].kind, Json::object);
  EXPECT_EQ(doc["empty_list"].kind, Json::array);
  EXPECT_NE(w.text().find("[1.5, true, \"x\", null]"), std::string::npos) << w.text();
}

TEST(BenchJson, NonFiniteNumbersBecomeNull) {
  JsonWriter w;
  w.begin_array();
  w.value(std::nan(""));
  w.value(INFINITY);
  w.value(1e-7);
  w.end_array();
  Json doc = parsed(w.text());
  EXPECT_EQ(doc.items[0].kind, Json::null);
  EXPECT_EQ(doc.items[1].kind, Json::null);
  EXPECT_DOUBLE_EQ(doc.items[2].num, 1e-7);
}

// ---- the report ----

RunInfo sample_info() {
  RunInfo info;
  info.date_utc = "2026-12-02T10:11:12Z";
  info.cudakit_version = "0.1.0";
  info.driver_version = "13.0";
  info.gpu_name = "NVIDIA \"H200\"";
  info.compute_capability = "9.0";
  info.multiprocessors = 132;
  info.sm_clock_mhz = 1980;
  info.memory_clock_mhz = 3201;
  info.memory_bus_width_bits = 6144;
  info.filters = {"event"};
  return info;
}

std::vector<Result> sample_results() {
  Result met = cost_result("event record", "events", {{1.0e-7, 1.1e-7, 1.2e-7}, {1.0e-7, 1.1e-7, 1.2e-7}}, 1.05);
  Result missed = cost_result("record + wait", "events", {{6e-7, 6e-7}, {5e-7, 5e-7}}, 1.05);
  Result sweep = bandwidth_result("pinned H2D 1 MiB", "bandwidth", {{2e-5}, {2e-5}}, 1 << 20, 0.98, "pinned H2D", 1 << 20);
  return {met, missed, sweep, error_result("graph replay", "graphs", "cuGraphLaunch: \"boom\"")};
}

TEST(BenchReport, HasTheRunHeader) {
  Json doc = parsed(report_json(sample_info(), sample_results()));
  EXPECT_EQ(doc["schema"].text, report_schema);
  EXPECT_EQ(doc["date"].text, "2026-12-02T10:11:12Z");
  EXPECT_EQ(doc["driver_version"].text, "13.0");
  EXPECT_EQ(doc["gpu"]["name"].text, "NVIDIA \"H200\"");
  EXPECT_EQ(doc["gpu"]["sm_clock_mhz"].num, 1980);
  EXPECT_EQ(doc["gpu"]["memory_clock_mhz"].num, 3201);
  EXPECT_EQ(doc["filters"].items.at(0).text, "event");
  EXPECT_EQ(doc["quick"].kind, Json::boolean);
}

TEST(BenchReport, EveryResultCarriesSamplesSpreadsRatioTargetAndVerdict) {
  Json doc = parsed(report_json(sample_info(), sample_results()));
  const auto& results = doc["results"].items;
  ASSERT_EQ(results.size(), 4u);
  const Json& met = results[0];
  EXPECT_EQ(met["name"].text, "event record");
  EXPECT_EQ(met["unit"].text, "us");
  EXPECT_FALSE(met["higher_is_better"].flag);
  EXPECT_EQ(met["cudakit"]["samples"].items.size(), 3u);
  EXPECT_NEAR(met["cudakit"]["median"].num, 0.11, 1e-9);
  for (const char* field : {"p10", "p90", "min", "max"}) EXPECT_EQ(met["raw"][field].kind, Json::number) << field;
  EXPECT_NEAR(met["ratio"].num, 1.0, 1e-9);
  EXPECT_EQ(met["round_ratio"]["median"].kind, Json::number);
  EXPECT_DOUBLE_EQ(met["target_ratio"].num, 1.05);
  EXPECT_TRUE(met["passed"].flag);
  EXPECT_EQ(met["series"].kind, Json::null);  // only size sweeps have a series

  EXPECT_FALSE(results[1]["passed"].flag);
  EXPECT_EQ(results[1]["passed"].kind, Json::boolean);

  EXPECT_TRUE(results[2]["higher_is_better"].flag);
  EXPECT_EQ(results[2]["series"].text, "pinned H2D");
  EXPECT_EQ(results[2]["size_bytes"].num, 1 << 20);

  EXPECT_EQ(results[3]["error"].text, "cuGraphLaunch: \"boom\"");
  EXPECT_FALSE(results[3]["passed"].flag);
  EXPECT_EQ(results[3]["ratio"].kind, Json::null);
}

TEST(BenchReport, CountsMetAndMissedTargets) {
  Json doc = parsed(report_json(sample_info(), sample_results()));
  EXPECT_EQ(doc["targets_met"].num, 2);
  EXPECT_EQ(doc["targets_missed"].num, 2);  // the slow one and the error
  EXPECT_FALSE(doc["passed"].flag);
}

TEST(BenchReport, AnEmptyRunIsValidAndPasses) {
  Json doc = parsed(report_json(RunInfo{}, {}));
  EXPECT_TRUE(doc["results"].items.empty());
  EXPECT_TRUE(doc["passed"].flag);
}

TEST(BenchReport, DateIsUtcIso8601) {
  std::string date = utc_now_iso8601();
  ASSERT_EQ(date.size(), 20u) << date;
  EXPECT_EQ(date[4], '-');
  EXPECT_EQ(date[10], 'T');
  EXPECT_EQ(date.back(), 'Z');
}

}  // namespace
}  // namespace cudakit::tool::bench
