// Architecture rules, checked on the sources (DESIGN 2 and invariant 1):
// - no cu* driver call outside the driver layer (calls go through driver::cu.Name);
// - no legacy stream: no CU_STREAM_LEGACY / CU_STREAM_PER_THREAD use, no synchronous
//   copy or memset entry in the driver table, no stream created without
//   CU_STREAM_NON_BLOCKING.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cudakit/driver.hpp"

namespace {

namespace fs = std::filesystem;

struct SourceFile {
  std::string path;
  std::string text;
};

// Library sources and public headers, comments and string literals stripped (both may
// name a call without making it).
std::vector<SourceFile> library_sources() {
  std::vector<SourceFile> out;
  for (const char* dir : {"src", "include"}) {
    for (const auto& e : fs::recursive_directory_iterator(fs::path(CUDAKIT_SOURCE_DIR) / dir)) {
      if (!e.is_regular_file()) continue;
      auto ext = e.path().extension().string();
      if (ext != ".cpp" && ext != ".hpp" && ext != ".inc") continue;
      std::ifstream in(e.path());
      std::stringstream ss;
      ss << in.rdbuf();
      std::string text = std::regex_replace(ss.str(), std::regex(R"(//[^\n]*)"), "");
      text = std::regex_replace(text, std::regex(R"(/\*[\s\S]*?\*/)"), "");
      text = std::regex_replace(text, std::regex(R"("(?:[^"\\\n]|\\.)*")"), "\"\"");  // string literals name calls
      out.push_back({fs::relative(e.path(), CUDAKIT_SOURCE_DIR).string(), text});
    }
  }
  return out;
}

bool in_driver_layer(const std::string& path) {
  return path.rfind("src/driver/", 0) == 0 || path == "include/cudakit/driver.hpp" ||
         path == "include/cudakit/detail/driver_entries.hpp";
}

TEST(SourceScan, FindsTheSources) { EXPECT_GT(library_sources().size(), 10u); }

TEST(SourceScan, NoDriverCallOutsideTheDriverLayer) {
  std::regex direct_call(R"((^|[^A-Za-z0-9_.:>])cu[A-Z][A-Za-z0-9_]*\s*\()");
  for (const auto& f : library_sources()) {
    if (in_driver_layer(f.path)) continue;
    std::smatch m;
    std::string::const_iterator begin = f.text.begin();
    while (std::regex_search(begin, f.text.cend(), m, direct_call)) {
      std::string hit = m.str();
      ADD_FAILURE() << f.path << ": direct driver call '" << hit << "'";
      begin = m.suffix().first;
    }
  }
}

TEST(SourceScan, NoLegacyStreamAnywhereInTheLibrary) {
  for (const auto& f : library_sources()) {
    // These name the default streams only to refuse them.
    if (f.path == "src/stream/stream.cpp" || f.path == "include/cudakit/interop/runtime.hpp") continue;
    EXPECT_EQ(f.text.find("CU_STREAM_LEGACY"), std::string::npos) << f.path;
    EXPECT_EQ(f.text.find("CU_STREAM_PER_THREAD"), std::string::npos) << f.path;
  }
}

TEST(SourceScan, EveryStreamIsCreatedNonBlocking) {
  std::regex create(R"(StreamCreateWithPriority\(([^;]*);)");
  int found = 0;
  for (const auto& f : library_sources()) {
    if (in_driver_layer(f.path)) continue;
    for (std::sregex_iterator it(f.text.begin(), f.text.end(), create), end; it != end; ++it) {
      ++found;
      EXPECT_NE(it->str().find("CU_STREAM_NON_BLOCKING"), std::string::npos) << f.path << ": " << it->str();
    }
  }
  EXPECT_GE(found, 1);
}

TEST(SourceScan, DriverTableHasNoSynchronousCopiesOrMemsets) {
  for (const auto& e : cudakit::driver::entry_infos) {
    std::string n = e.name;
    bool copy_or_set = n.rfind("cuMemcpy", 0) == 0 || n.rfind("cuMemset", 0) == 0;
    if (copy_or_set) EXPECT_NE(n.find("Async"), std::string::npos) << n << " is synchronous (legacy stream)";
    EXPECT_NE(n, "cuStreamCreate") << "cuStreamCreate makes blocking streams by default";
  }
}

}  // namespace
