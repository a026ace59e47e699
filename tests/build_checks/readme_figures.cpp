// Checks that the figures the README quotes are the committed release baseline's, so that
// a claim cannot drift from the measurements unseen.
//
//   cudakit_readme_figures README.md BASELINE.json
//
// The README marks the text whose figures come from the baseline:
//
//   <!-- figures: bench/results/0.1.0/baseline.json -->
//   ... text and tables ...
//   <!-- end figures -->
//
// Every number with a decimal point in a marked region (3.901, 0.690, 55.08) must equal,
// at the precision shown, a value in the baseline or in a file its "files" object names
// (bench.json, peers.json, decoder.json beside it): a value given under a key, not a
// per-round sample or a p10/p90/min/max. Numbers inside `code` spans and version numbers
// (a second decimal point, as in 0.1.0) are left out. The exit status is 0 when every
// figure was found and at least one region with a figure exists, 1 otherwise (each
// missing figure is named with its line).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

std::string read_all(const fs::path& path) {
  std::ifstream in(path);
  if (!in) {
    std::cerr << path.string() << ": cannot be read\n";
    std::exit(1);
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The values of `json` given under a key, but statistics of spread and samples.
std::vector<double> keyed_values(const std::string& json) {
  static const std::regex pair(R"re("([^"]+)"\s*:\s*(-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?))re");
  static const std::set<std::string> left_out = {"p10", "p90", "min", "max"};
  std::vector<double> values;
  for (auto it = std::sregex_iterator(json.begin(), json.end(), pair); it != std::sregex_iterator(); ++it) {
    if (left_out.count((*it)[1].str())) continue;
    values.push_back(std::stod((*it)[2].str()));
  }
  return values;
}

// The JSON files the baseline's "files" object names (relative to the baseline).
std::vector<fs::path> named_files(const std::string& baseline, const fs::path& folder) {
  std::vector<fs::path> files;
  std::smatch object;
  if (!std::regex_search(baseline, object, std::regex(R"re("files"\s*:\s*\{([^}]*)\})re"))) return files;
  const std::string body = object[1].str();
  static const std::regex name(R"re(:\s*"([^"]+\.json)")re");
  for (auto it = std::sregex_iterator(body.begin(), body.end(), name); it != std::sregex_iterator(); ++it) {
    files.push_back(folder / (*it)[1].str());
  }
  return files;
}

struct Figure {
  int line;
  std::string text;
};

// The figures of the marked regions: numbers with one decimal point, outside `code`.
std::vector<Figure> figures_of(const std::string& readme, int& regions) {
  std::vector<Figure> figures;
  std::istringstream in(readme);
  bool inside = false;
  int number = 0;
  static const std::regex code_span("`[^`]*`");
  static const std::regex figure(R"re((^|[^0-9.])([0-9]+\.[0-9]+)(?![0-9]*\.[0-9]))re");
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.find("<!-- figures:") != std::string::npos) {
      inside = true;
      ++regions;
      continue;
    }
    if (line.find("<!-- end figures -->") != std::string::npos) {
      inside = false;
      continue;
    }
    if (!inside) continue;
    const std::string text = std::regex_replace(line, code_span, " ");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), figure); it != std::sregex_iterator(); ++it) {
      figures.push_back({number, (*it)[2].str()});
    }
  }
  if (inside) {
    std::cerr << "a <!-- figures: ... --> region never ends (<!-- end figures -->)\n";
    std::exit(1);
  }
  return figures;
}

// Whether some value shows as `text` at its precision (0.6899 shows as 0.690).
bool shown_as(const std::vector<double>& values, const std::string& text) {
  const std::size_t decimals = text.size() - text.find('.') - 1;
  const double scale = std::pow(10.0, static_cast<double>(decimals));
  const long long wanted = std::llround(std::stod(text) * scale);
  for (double v : values) {
    if (std::llround(v * scale) == wanted) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: cudakit_readme_figures README.md BASELINE.json\n";
    return 2;
  }
  const fs::path baseline_path = argv[2];
  const std::string baseline = read_all(baseline_path);
  std::vector<double> values = keyed_values(baseline);
  for (const fs::path& file : named_files(baseline, baseline_path.parent_path())) {
    std::vector<double> more = keyed_values(read_all(file));
    values.insert(values.end(), more.begin(), more.end());
  }
  int regions = 0;
  const std::vector<Figure> figures = figures_of(read_all(argv[1]), regions);
  int missing = 0;
  for (const Figure& f : figures) {
    if (shown_as(values, f.text)) continue;
    std::cerr << argv[1] << ":" << f.line << ": " << f.text << " is not a value of " << baseline_path.string()
              << " or the files it names\n";
    ++missing;
  }
  std::cout << figures.size() << " figures in " << regions << " regions, " << missing << " not in the baseline\n";
  if (figures.empty()) {
    std::cerr << "no figure in a marked region (the check expects some)\n";
    return 1;
  }
  return missing == 0 ? 0 : 1;
}
