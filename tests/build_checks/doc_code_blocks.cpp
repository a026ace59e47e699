// Compiles the C++ code blocks of a Markdown file (README.md, docs/*.md) against the public
// headers, so that the documentation cannot drift from the API unseen.
//
//   cudakit_doc_code_blocks WORK_DIR DOC.md... -- COMPILER FLAGS...
//
// Each ```cpp block becomes one translation unit in WORK_DIR, compiled with
// `COMPILER FLAGS... -c unit.cpp -o unit.o`. Compiler errors point at the Markdown file's
// own lines (#line directives). How a block is wrapped is said by an HTML comment on the
// line right before its fence, which Markdown viewers do not show:
//
//   (no comment)              a fragment: the block's lines are the body of a function,
//                             after `#include <cudakit/cudakit.hpp>`.
//   <!-- cpp program -->      a whole translation unit, compiled as written (a first
//                             program with its includes and main()).
//   <!-- cpp fragment         a fragment that uses names the text around it defines:
//   LINE...                   each LINE is either an #include, placed before the function,
//   -->                       or a declaration, placed in the function before the block.
//   <!-- cpp excerpt: WHY --> not compiled: an excerpt of code that lives elsewhere (a
//                             kernel's body, a signature), and WHY says why; an excerpt
//                             without a reason is an error.
//
// Every other block is compiled. The exit status is 0 when every block compiled and at
// least one block was found, 1 otherwise (each failure names the file and the block's line).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct Block {
  std::string doc;               // the Markdown file
  int first_line = 0;            // the line after the opening fence, 1-based
  bool program = false;          // compiled as written
  bool excerpt = false;          // not compiled (its marker says why)
  std::vector<std::string> includes;  // from the marker: before the function
  std::vector<std::string> given;     // from the marker: inside it, before the block
  std::vector<std::string> lines;
};

std::string trim(const std::string& s) {
  std::size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  std::size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// "<!-- cpp excerpt: REASON -->" with a reason of a few words.
bool valid_excerpt_marker(const std::string& head) {
  const std::string prefix = "<!-- cpp excerpt:", suffix = "-->";
  if (!starts_with(head, prefix) || head.size() < prefix.size() + suffix.size()) return false;
  if (head.compare(head.size() - suffix.size(), suffix.size(), suffix) != 0) return false;
  return trim(head.substr(prefix.size(), head.size() - prefix.size() - suffix.size())).size() >= 8;
}

// The marker that ends on line `end` (0-based, the line before a fence), if any: its first
// line's words and the lines between it and "-->".
bool read_marker(const std::vector<std::string>& lines, std::size_t end, std::string& head,
                 std::vector<std::string>& body) {
  if (trim(lines[end]) == "<!-- cpp program -->" || trim(lines[end]) == "<!-- cpp fragment -->" ||
      starts_with(trim(lines[end]), "<!-- cpp excerpt")) {
    head = trim(lines[end]);
    return true;
  }
  if (trim(lines[end]) != "-->") return false;
  for (std::size_t i = end; i-- > 0;) {
    std::string t = trim(lines[i]);
    if (starts_with(t, "<!-- cpp fragment")) {
      head = t;
      body.assign(lines.begin() + static_cast<std::ptrdiff_t>(i) + 1, lines.begin() + static_cast<std::ptrdiff_t>(end));
      return true;
    }
    if (starts_with(t, "<!--") || t == "-->" || t.empty()) return false;
  }
  return false;
}

std::vector<Block> blocks_of(const std::string& doc) {
  std::ifstream in(doc);
  if (!in) {
    std::cerr << doc << ": cannot be read\n";
    std::exit(1);
  }
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::vector<Block> blocks;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (trim(lines[i]) != "```cpp") continue;
    Block b;
    b.doc = doc;
    b.first_line = static_cast<int>(i) + 2;
    std::string head;
    std::vector<std::string> body;
    if (i > 0 && read_marker(lines, i - 1, head, body)) {
      b.program = head == "<!-- cpp program -->";
      b.excerpt = starts_with(head, "<!-- cpp excerpt");
      if (b.excerpt && !valid_excerpt_marker(head)) {
        std::cerr << doc << ":" << i << ": an excerpt's marker says why it is not compiled: "
                  << "<!-- cpp excerpt: REASON -->\n";
        std::exit(1);
      }
      for (const std::string& l : body) (starts_with(trim(l), "#include") ? b.includes : b.given).push_back(l);
    }
    std::size_t j = i + 1;
    for (; j < lines.size() && trim(lines[j]) != "```"; ++j) b.lines.push_back(lines[j]);
    if (j == lines.size()) {
      std::cerr << doc << ":" << i + 1 << ": a ```cpp block that never ends\n";
      std::exit(1);
    }
    blocks.push_back(std::move(b));
    i = j;
  }
  return blocks;
}

// The translation unit of a block, with #line directives back to the Markdown file.
std::string unit_of(const Block& b, int index) {
  std::ostringstream out;
  const std::string doc = fs::absolute(b.doc).string();
  if (!b.program) {
    out << "#include <cudakit/cudakit.hpp>\n";
    for (const std::string& l : b.includes) out << l << "\n";
    out << "void doc_block_" << index << "() {\n";
    for (const std::string& l : b.given) out << l << "\n";
  }
  out << "#line " << b.first_line << " \"" << doc << "\"\n";
  for (const std::string& l : b.lines) out << l << "\n";
  if (!b.program) out << "}\n";
  return out.str();
}

std::string shell_quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::size_t separator = 0;
  while (separator < args.size() && args[separator] != "--") ++separator;
  if (args.size() < 2 || separator < 2 || separator + 1 >= args.size()) {
    std::cerr << "usage: cudakit_doc_code_blocks WORK_DIR DOC.md... -- COMPILER FLAGS...\n";
    return 2;
  }
  const fs::path work = args[0];
  fs::create_directories(work);
  std::string command;
  for (std::size_t i = separator + 1; i < args.size(); ++i) command += shell_quoted(args[i]) + " ";

  int failed = 0, compiled = 0, excerpts = 0;
  for (std::size_t d = 1; d < separator; ++d) {
    std::vector<Block> blocks = blocks_of(args[d]);
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      const Block& b = blocks[i];
      if (b.excerpt) {
        ++excerpts;
        continue;
      }
      const fs::path unit = work / (fs::path(b.doc).stem().string() + "_" + std::to_string(b.first_line) + ".cpp");
      std::ofstream(unit) << unit_of(b, static_cast<int>(i));
      const std::string object = (work / unit.stem()).string() + ".o";
      const int status = std::system((command + "-c " + shell_quoted(unit.string()) + " -o " + shell_quoted(object)).c_str());
      ++compiled;
      if (status != 0) {
        std::cerr << b.doc << ":" << b.first_line - 1 << ": this ```cpp block does not compile (unit " << unit.string()
                  << ")\n";
        ++failed;
      }
    }
  }
  std::cout << compiled << " code blocks compiled, " << failed << " failed, " << excerpts << " excerpts left out\n";
  if (compiled == 0) {
    std::cerr << "no ```cpp block compiled (the check expects some)\n";
    return 1;
  }
  return failed == 0 ? 0 : 1;
}
