// Every public declaration in include/cudakit has a reference comment.
//
// The rule, checked by a simple scan of each public header: a declaration in the public
// part (namespace scope outside `detail`, the public members of a class) must have a
// comment line in its paragraph, the lines right above it up to a blank line, an opening
// brace or an access label. So a group of overloads under one comment passes, and a
// declaration after a blank line with no comment fails. Exempt, because they say nothing
// a reader needs: copy and move members, destructors, `= default` / `= delete` members,
// data members (their struct says what they are), forward declarations, using-
// declarations of base constructors and out-of-class definitions of declared members.
//
// The scan reads braces and semicolons outside parentheses, string literals and
// comments; it is not a C++ parser, so the first tests pin down what it sees.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

std::string trim(const std::string& s) {
  std::size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  std::size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// Whitespace runs (newlines included) become one space, so the patterns below see one line.
std::string collapse(const std::string& s) {
  std::string out;
  for (char c : s) {
    bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r';
    if (space) {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  return trim(out);
}

// Patterns are compiled once each (std::regex construction dominates the scan's cost).
bool matches(const std::string& text, const char* pattern) {
  static std::map<const char*, std::regex> compiled;
  auto it = compiled.find(pattern);
  if (it == compiled.end()) it = compiled.emplace(pattern, std::regex(pattern)).first;
  return std::regex_search(text, it->second);
}

// A copy or move constructor or assignment: one parameter of the class's own type.
bool is_copy_or_move(const std::string& head) {
  static const std::regex one_own_parameter(
      R"((?:^|\s|&)(?:explicit\s+)?(operator=|\w+)\s*\(\s*(?:const\s+)?(\w+)(?:<[^()]*>)?\s*&&?\s*\w*\s*\))");
  std::smatch m;
  if (!std::regex_search(head, m, one_own_parameter)) return false;
  if (m[1] == m[2]) return true;
  return m[1] == "operator=" && matches(head, R"(^\w+(<[^()]*>)?&\s+operator=)");
}

struct Finding {
  int line;
  std::string declaration;
};

// The public declarations of one header that lack a comment in their paragraph.
std::vector<Finding> undocumented_declarations(const std::string& text) {
  std::vector<std::string> lines;
  {
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  auto documented = [&](int i) {
    for (int j = i - 1; j >= 0; --j) {
      std::string t = trim(lines[j]);
      if (t.empty() || t.back() == '{' || t == "public:" || t == "private:" || t == "protected:") return false;
      if (t.rfind("//", 0) == 0) return true;
    }
    return false;
  };

  enum class Kind { file, ns, cls, enm, body, init };
  struct Scope {
    Kind kind;
    bool visible;           // ns: not detail; cls: in a public section now
    std::string saved;      // init: the statement the braces interrupted
    int saved_start = 0;
  };
  std::vector<Scope> stack{{Kind::file, true}};
  auto public_here = [&] {
    for (const Scope& s : stack) {
      if (s.kind == Kind::ns && !s.visible) return false;
      if (s.kind == Kind::body || s.kind == Kind::init) return false;
    }
    const Scope& top = stack.back();
    return (top.kind == Kind::ns) || (top.kind == Kind::cls && top.visible);
  };

  std::vector<Finding> out;
  std::string stmt;
  int stmt_start = 0, paren = 0;
  bool macro = false;
  for (int i = 0; i < static_cast<int>(lines.size()); ++i) {
    static const std::regex string_literal(R"("(?:[^"\\]|\\.)*")");
    std::string code = lines[i].find('"') == std::string::npos ? lines[i]
                                                               : std::regex_replace(lines[i], string_literal, "\"\"");
    if (std::size_t c = code.find("//"); c != std::string::npos) code.resize(c);
    std::string t = trim(code);
    // Preprocessor lines, with their continuations (the X-macro tables).
    bool continues = !t.empty() && t.back() == '\\';
    if (macro || (!t.empty() && t[0] == '#')) {
      macro = continues;
      continue;
    }
    if (t == "public:" || t == "private:" || t == "protected:") {
      if (stack.back().kind == Kind::cls) stack.back().visible = t == "public:";
      continue;
    }
    for (char ch : code) {
      if (stmt.empty() && (ch == ' ' || ch == '\t')) continue;
      if (stmt.empty()) stmt_start = i;
      stmt += ch;
      if (ch == '(' || ch == '[') ++paren;
      if (ch == ')' || ch == ']') --paren;
      if (paren != 0 || (ch != ';' && ch != '{' && ch != '}')) continue;
      if (ch == '}') {
        Scope top = stack.size() > 1 ? stack.back() : Scope{Kind::file, true};
        if (stack.size() > 1) stack.pop_back();
        if (top.kind == Kind::init) {
          stmt = top.saved + " {...}";
          stmt_start = top.saved_start;
        } else {
          stmt.clear();
        }
        continue;
      }
      const std::string s = collapse(stmt);
      const std::string head = trim(s.substr(0, s.size() - 1));
      if (public_here()) {
        const std::string before_paren = head.substr(0, head.find('('));
        bool exempt =
            head.empty() || matches(head, R"(^(namespace\b|static_assert\b|friend class\b|using namespace\b|extern ""))") ||
            matches(head, R"(=\s*(delete|default)\s*$)") || head[0] == '~' ||
            (ch == ';' && matches(head, R"(^(template\s*<[^;]*>\s*)?(class|struct)\s+\w+$)")) || is_copy_or_move(head) ||
            matches(before_paren + "(", R"(\b[A-Z]\w*(<[^<>]*>)?::~?\w+\s*\($)") ||
            (stack.back().kind == Kind::cls && head.find('(') == std::string::npos &&
             !matches(head, R"(^(template|using|typedef|enum|class|struct|union|friend|static constexpr)\b)") &&
             matches(head, R"(^[\w:<>,\s\*&]+(=.*|\{.*)?$)")) ||
            matches(head, R"(^using\s+[\w:]+::\w+$)");
        if (!exempt && !documented(stmt_start)) out.push_back({stmt_start + 1, head.substr(0, 100)});
      }
      if (ch == '{') {
        if (matches(s, R"(^namespace\b)")) {
          stack.push_back({Kind::ns, s.find("detail") == std::string::npos});
        } else if (matches(s, R"(^(template\s*<.*>\s*)?(class|struct|union)\b)") &&
                   s.substr(0, s.find(':')).find('(') == std::string::npos) {
          stack.push_back({Kind::cls, !matches(s, R"(^(template\s*<.*>\s*)?class\b)")});
        } else if (matches(s, R"(^enum\b)")) {
          stack.push_back({Kind::enm, false});
        } else if (matches(s, R"(^extern\b)")) {
          stack.push_back({Kind::ns, true});
        } else if (matches(s, R"(\brequires\s*(\([^()]*\))?\s*\{$)") ||
                   (s.find("operator") == std::string::npos &&
                    (s.substr(0, s.find('(')).find('=') != std::string::npos || matches(s, R"(=\s*\[)")))) {
          // A requires-expression, a lambda or a braced initializer: the statement goes on.
          stack.push_back({Kind::init, false, stmt.substr(0, stmt.size() - 1), stmt_start});
          stmt.clear();
          continue;
        } else {
          stack.push_back({Kind::body, false});
        }
      }
      stmt.clear();
    }
    if (trim(stmt).empty()) stmt.clear();
    else stmt += '\n';
  }
  return out;
}

std::vector<fs::path> public_headers() {
  std::vector<fs::path> out;
  for (const char* dir : {"include/cudakit", "include/cudakit/interop"})
    for (const auto& e : fs::directory_iterator(fs::path(CUDAKIT_SOURCE_DIR) / dir))
      if (e.is_regular_file() && e.path().extension() == ".hpp") out.push_back(e.path());
  return out;
}

// ---- what the scan sees ----

TEST(HeaderComments, ScanFlagsAnUndocumentedFunctionAndClass) {
  auto found = undocumented_declarations(
      "namespace cudakit {\n"
      "\n"
      "/// Documented.\n"
      "int documented();\n"
      "\n"
      "int bare();\n"
      "\n"
      "class Thing {\n"
      " public:\n"
      "  /// Documented member.\n"
      "  void ok() const;\n"
      "\n"
      "  void missing() const { if (x) { y(); } }\n"
      " private:\n"
      "  void hidden();\n"
      "};\n"
      "}  // namespace cudakit\n");
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0].line, 6);
  EXPECT_EQ(found[0].declaration, "int bare()");
  EXPECT_EQ(found[1].line, 8);
  EXPECT_EQ(found[1].declaration, "class Thing");
  EXPECT_EQ(found[2].line, 13);
}

TEST(HeaderComments, ScanAcceptsGroupsAndExemptions) {
  auto found = undocumented_declarations(
      "namespace cudakit {\n"
      "namespace detail {\n"
      "int internal();\n"
      "}  // namespace detail\n"
      "class Forward;\n"
      "/// A value.\n"
      "struct Value {\n"
      "  int field = 0;\n"
      "  /// One comment for a group of overloads.\n"
      "  void f(int);\n"
      "  void f(double);\n"
      "  Value(const Value&) = default;\n"
      "  Value& operator=(Value&& other) noexcept { return *this; }\n"
      "  ~Value() {}\n"
      "};\n"
      "/// A constant built by a lambda.\n"
      "inline constexpr bool flag = [] { return true; }();\n"
      "/// A constrained template.\n"
      "template <class T>\n"
      "  requires requires(T t) { t.f(); }\n"
      "void g(T t) { t.f(); }\n"
      "}  // namespace cudakit\n");
  for (const Finding& f : found) ADD_FAILURE() << "line " << f.line << ": " << f.declaration;
}

// ---- the headers ----

TEST(HeaderComments, EveryPublicDeclarationHasAReferenceComment) {
  auto headers = public_headers();
  ASSERT_GT(headers.size(), 20u);
  for (const fs::path& path : headers) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    for (const Finding& f : undocumented_declarations(text.str()))
      ADD_FAILURE() << fs::relative(path, CUDAKIT_SOURCE_DIR).string() << ":" << f.line
                    << ": public declaration without a comment above it: " << f.declaration;
  }
}

}  // namespace
