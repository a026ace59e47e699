// Architecture rules, checked on the sources (DESIGN 2 and invariant 1):
// - layers: each folder of src/ is a layer and each public header belongs to one; no file
//   includes a header of a layer above its own;
// - no cu* driver call outside the driver layer (calls go through driver::cu.Name), and
//   none named by a string literal that repeats its entry's name;
// - no legacy stream: no CU_STREAM_LEGACY / CU_STREAM_PER_THREAD use, no synchronous
//   copy or memset entry in the driver table, no stream created without
//   CU_STREAM_NON_BLOCKING;
// - no trace of how the product was made: no work-item numbers anywhere, no design-note
//   numbers in messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
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

// ---- layers ----

// The layers, bottom to top: the folders of src/, then the short path (Gpu, the umbrella
// header, interop). A file may include headers of its own layer and of the layers below.
const std::vector<std::string> layer_order = {"driver", "device", "stream",    "memory",
                                              "launch", "graph",  "libraries", "facade"};

// The layer of each public header (include/cudakit/, relative to it).
const std::map<std::string, std::string> public_header_layer = {
    {"driver.hpp", "driver"},
    {"export.hpp", "driver"},
    {"detail/driver_entries.hpp", "driver"},
    {"error.hpp", "driver"},
    {"device.hpp", "device"},
    {"context.hpp", "device"},
    {"peer_access.hpp", "device"},
    {"topology.hpp", "device"},
    {"detail/capture_counts.hpp", "device"},
    {"stream.hpp", "stream"},
    {"event.hpp", "stream"},
    {"detail/stream_state.hpp", "stream"},
    {"detail/stream_marks.hpp", "stream"},
    {"detail/ref.hpp", "stream"},
    {"detail/capture_guard.hpp", "stream"},
    {"tracking.hpp", "memory"},
    {"memory_init.hpp", "memory"},
    {"device_span.hpp", "memory"},
    {"buffer_views.hpp", "memory"},
    {"device_buffer.hpp", "memory"},
    {"pinned_buffer.hpp", "memory"},
    {"host_registration.hpp", "memory"},
    {"memory_pool.hpp", "memory"},
    {"memory_resource.hpp", "memory"},
    {"pool_resource.hpp", "memory"},
    {"copy.hpp", "memory"},
    {"device_value.hpp", "memory"},
    {"growable_buffer.hpp", "memory"},
    {"managed_buffer.hpp", "memory"},
    {"batched_copy.hpp", "memory"},
    {"staging.hpp", "memory"},
    {"detail/allocation.hpp", "memory"},
    {"ipc_error.hpp", "memory"},
    {"ipc_descriptor.hpp", "memory"},
    {"ipc_channel.hpp", "memory"},
    {"imported_buffer.hpp", "memory"},
    {"shared_event.hpp", "memory"},
    {"shareable_pool.hpp", "memory"},
    {"shareable_memory.hpp", "memory"},
    {"module_image.hpp", "launch"},
    {"module.hpp", "launch"},
    {"library.hpp", "launch"},
    {"program.hpp", "launch"},
    {"device_headers.hpp", "launch"},
    {"device/programmatic_launch.cuh", "launch"},
    {"device/graph_condition.cuh", "graph"},
    {"kernel.hpp", "launch"},
    {"kernel_args.hpp", "launch"},
    {"launch_config.hpp", "launch"},
    {"launch.hpp", "launch"},
    {"occupancy.hpp", "launch"},
    {"declared_work.hpp", "launch"},
    {"borrowed_kernel.hpp", "launch"},
    {"detail/function_state.hpp", "launch"},
    {"detail/kernel_binding.hpp", "launch"},
    {"detail/launch_in_capture.hpp", "launch"},
    {"graph.hpp", "graph"},
    {"graph_exec.hpp", "graph"},
    {"graph_cache.hpp", "graph"},
    {"capture.hpp", "graph"},
    {"detail/node_arguments.hpp", "graph"},
    {"nccl_error.hpp", "libraries"},
    {"nccl_communicator.hpp", "libraries"},
    {"nccl_collectives.hpp", "libraries"},
    {"nccl_registration.hpp", "libraries"},
    {"nccl_mpi.hpp", "libraries"},
    {"bootstrap.hpp", "libraries"},
    {"nccl.hpp", "libraries"},
    {"blas_library.hpp", "libraries"},
    {"blas.hpp", "libraries"},
    {"blas_lt.hpp", "libraries"},
    {"gpu.hpp", "facade"},
    {"cudakit.hpp", "facade"},
    {"interop/runtime.hpp", "facade"},
    {"interop/cccl.hpp", "facade"},
    {"interop/cccl_memory_resource.hpp", "facade"},
    {"interop/runtime_kernel.hpp", "facade"},
    {"interop/cub.hpp", "facade"},
    {"interop/thrust.hpp", "facade"},
};

// Upward includes tolerated while one is taken out: {including file, included header}.
// Empty: no layer includes a higher one. An entry that no longer occurs fails the test.
const std::set<std::pair<std::string, std::string>> allowed_upward_includes = {};

// Public headers that CMake generates into the build folder (configure_file).
const std::map<std::string, std::string> generated_header_layer = {
    {"version.hpp", "driver"},
};

int rank_of(const std::string& layer) {
  auto it = std::find(layer_order.begin(), layer_order.end(), layer);
  return it == layer_order.end() ? -1 : static_cast<int>(it - layer_order.begin());
}

// The layer of a file under src/ or include/ (relative to the source dir), or "" when it
// has none.
std::string layer_of_file(const std::string& path) {
  const std::string src = "src/", inc = "include/cudakit/";
  if (path.rfind(src, 0) == 0) return path.substr(src.size(), path.find('/', src.size()) - src.size());
  if (path.rfind(inc, 0) == 0) {
    std::string name = path.substr(inc.size());
    auto it = public_header_layer.find(name);
    if (it != public_header_layer.end()) return it->second;
    auto generated = generated_header_layer.find(name);
    return generated == generated_header_layer.end() ? "" : generated->second;
  }
  return "";
}

// The file an #include "..." names, relative to the source dir: public headers as
// "cudakit/x.hpp", private ones as "layer/x.hpp" (src/ is on the private include path),
// files beside the includer by their bare name.
std::string resolve_include(const std::string& includer, const std::string& name) {
  if (name.rfind("cudakit/", 0) == 0) return "include/" + name;
  if (name.find('/') == std::string::npos) return (fs::path(includer).parent_path() / name).string();
  return "src/" + name;
}

struct Include {
  std::string file;    // the including file
  std::string header;  // the included file, resolved
};

std::vector<Include> library_includes() {
  std::vector<Include> out;
  std::regex include(R"(^\s*#\s*include\s*[<"]([^>"]+)[>"])");
  for (const char* dir : {"src", "include"}) {
    for (const auto& e : fs::recursive_directory_iterator(fs::path(CUDAKIT_SOURCE_DIR) / dir)) {
      if (!e.is_regular_file()) continue;
      std::string file = fs::relative(e.path(), CUDAKIT_SOURCE_DIR).string();
      std::ifstream in(e.path());
      for (std::string line; std::getline(in, line);) {
        std::smatch m;
        if (!std::regex_search(line, m, include)) continue;
        std::string name = m[1];
        bool ours = name.rfind("cudakit/", 0) == 0 || fs::exists(fs::path(CUDAKIT_SOURCE_DIR) / resolve_include(file, name));
        if (ours) out.push_back({file, resolve_include(file, name)});
      }
    }
  }
  return out;
}

TEST(SourceScan, EveryFolderUnderSrcIsALayer) {
  for (const auto& e : fs::directory_iterator(fs::path(CUDAKIT_SOURCE_DIR) / "src")) {
    if (e.is_directory()) EXPECT_GE(rank_of(e.path().filename().string()), 0) << "src/" << e.path().filename().string()
                                                                                << " is not in layer_order";
    else ADD_FAILURE() << fs::relative(e.path(), CUDAKIT_SOURCE_DIR).string() << " is outside every layer's folder";
  }
}

TEST(SourceScan, EveryPublicHeaderBelongsToALayer) {
  fs::path root = fs::path(CUDAKIT_SOURCE_DIR) / "include/cudakit";
  int headers = 0;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file()) continue;
    ++headers;
    std::string name = fs::relative(e.path(), root).string();
    EXPECT_TRUE(public_header_layer.count(name)) << "include/cudakit/" << name << " has no layer in public_header_layer";
  }
  EXPECT_GT(headers, 20);
  for (const auto& [name, layer] : public_header_layer) {
    EXPECT_TRUE(fs::exists(root / name)) << name << " is in public_header_layer but not in include/cudakit";
    EXPECT_GE(rank_of(layer), 0) << name;
  }
}

// A public header with a source file of the same name belongs to that file's folder.
TEST(SourceScan, APublicHeaderIsInTheLayerOfItsSourceFile) {
  int checked = 0;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(CUDAKIT_SOURCE_DIR) / "src")) {
    if (!e.is_regular_file() || e.path().extension() != ".cpp") continue;
    std::string layer = e.path().parent_path().filename().string();
    std::string stem = e.path().stem().string();
    for (const std::string& name : {stem + ".hpp", "detail/" + stem + ".hpp"}) {
      auto it = public_header_layer.find(name);
      if (it == public_header_layer.end()) continue;
      ++checked;
      EXPECT_EQ(it->second, layer) << "include/cudakit/" << name << " is implemented in src/" << layer;
    }
  }
  EXPECT_GT(checked, 20);
}

TEST(SourceScan, NoLayerIncludesAHigherOne) {
  std::set<std::pair<std::string, std::string>> upward;
  int checked = 0;
  for (const Include& i : library_includes()) {
    std::string from = layer_of_file(i.file), to = layer_of_file(i.header);
    ASSERT_FALSE(from.empty()) << i.file << " has no layer";
    ASSERT_FALSE(to.empty()) << i.header << " (included by " << i.file << ") has no layer";
    ++checked;
    if (rank_of(to) <= rank_of(from)) continue;
    upward.insert({i.file, i.header});
    if (!allowed_upward_includes.count({i.file, i.header}))
      ADD_FAILURE() << i.file << " (" << from << ") includes " << i.header << " (" << to << "), a higher layer";
  }
  EXPECT_GT(checked, 100);
  for (const auto& entry : allowed_upward_includes)
    EXPECT_TRUE(upward.count(entry)) << entry.first << " no longer includes " << entry.second
                                     << ": remove it from allowed_upward_includes";
}

// The functions a private header declares at namespace scope (not inline, not templates).
std::vector<std::string> declared_functions(const std::string& text) {
  static const std::regex declaration(
      R"(^[A-Za-z_][\w:<>,\s\*&]*?[\s\*&](\w+)\s*\([^;{}=]*\)\s*(const\s*)?(noexcept\s*)?;$)");
  static const std::regex not_a_function(
      R"(^(inline|template|return|using|static|constexpr|extern|struct|class|namespace|friend|typedef|enum)\b)");
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string statement;
  for (std::string line; std::getline(in, line);) {
    if (statement.empty() && (line.empty() || !(std::isalpha(static_cast<unsigned char>(line[0])) || line[0] == '_')))
      continue;
    statement += (statement.empty() ? "" : " ") + line;
    if (line.find(';') == std::string::npos && line.find('{') == std::string::npos) continue;
    std::smatch m;
    if (!std::regex_search(statement, not_a_function) && std::regex_search(statement, m, declaration))
      out.push_back(m[1]);
    statement.clear();
  }
  return out;
}

// Whether `text` defines a function called `name`: a line that starts at column 0 names it,
// and its statement reaches an opening brace before a semicolon.
bool defines_function(const std::string& text, const std::string& name) {
  for (std::size_t at = text.find(name + "("); at != std::string::npos; at = text.find(name + "(", at + 1)) {
    if (at > 0 && (std::isalnum(static_cast<unsigned char>(text[at - 1])) || text[at - 1] == '_')) continue;
    std::size_t line_start = text.rfind('\n', at);
    line_start = line_start == std::string::npos ? 0 : line_start + 1;
    char first = text[line_start];
    if (first == ' ' || first == '/' || first == '#' || first == '\n') continue;
    std::size_t end = text.find_first_of(";{", at);
    if (end != std::string::npos && text[end] == '{') return true;
  }
  return false;
}

// Private headers tolerated in one folder while their implementation is in another, until
// one is moved: "header: function". Empty: every private header sits beside its
// implementation. An entry that no longer occurs fails the test.
const std::set<std::string> allowed_headers_away_from_their_implementation = {};

TEST(SourceScan, EachPrivateHeaderSitsBesideTheFileThatImplementsIt) {
  std::map<std::string, std::string> sources;  // path -> text, every .cpp under src/
  for (const auto& e : fs::recursive_directory_iterator(fs::path(CUDAKIT_SOURCE_DIR) / "src"))
    if (e.is_regular_file() && e.path().extension() == ".cpp") {
      std::ifstream in(e.path());
      std::stringstream text;
      text << in.rdbuf();
      sources[fs::relative(e.path(), CUDAKIT_SOURCE_DIR).string()] = text.str();
    }
  std::set<std::string> away;
  int checked = 0;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(CUDAKIT_SOURCE_DIR) / "src")) {
    if (!e.is_regular_file() || e.path().extension() != ".hpp") continue;
    std::string header = fs::relative(e.path(), CUDAKIT_SOURCE_DIR).string();
    std::string folder = fs::path(header).parent_path().string();
    std::ifstream in(e.path());
    std::stringstream text;
    text << in.rdbuf();
    for (const std::string& function : declared_functions(text.str())) {
      std::vector<std::string> defined_in;
      for (const auto& [path, source] : sources)
        if (defines_function(source, function)) defined_in.push_back(path);
      if (defined_in.empty()) continue;  // defined in the tests (a hook the tests provide), or inline
      ++checked;
      bool beside = std::any_of(defined_in.begin(), defined_in.end(), [&](const std::string& path) {
        return fs::path(path).parent_path().string() == folder;
      });
      if (beside) continue;
      std::string entry = header + ": " + function;
      away.insert(entry);
      if (!allowed_headers_away_from_their_implementation.count(entry))
        ADD_FAILURE() << header << " declares " << function << ", which " << defined_in.front()
                      << " implements: a private header sits beside the file that implements it";
    }
  }
  EXPECT_GT(checked, 30);
  for (const auto& entry : allowed_headers_away_from_their_implementation)
    EXPECT_TRUE(away.count(entry)) << entry << " is beside its implementation now: remove it from the list";
}

// ---- a product with no traces of how it was made ----

// Files that still carry such traces, known and being cleaned: an entry that no longer
// needs its place fails the test.
const std::set<std::string> allowed_traces = {};

// No reference to the work items the code was built under, in code, docs or scripts, and
// no design-note number in a message a user sees (comments may cite the invariants).
TEST(SourceScan, NoTraceOfHowTheProductWasMade) {
  // Spelled in pieces, so that this file does not match itself.
  const std::regex work_item(std::string("\\b(") + "iss" + "ues? [0-9]|poi" + "nts? [0-9])\\b", std::regex::icase);
  // The front pages speak of the product, not of the sittings it was built in (the
  // decoder example's sessions are its own: a generation on a stream).
  const std::regex sitting(std::string("\\b") + "ses" + "sions?\\b", std::regex::icase);
  const std::regex design_in_message(R"("[^"\n]*\(DESIGN [0-9][^"\n]*")");
  std::set<std::string> with_traces;
  int files = 0;
  for (const char* top : {"include", "src", "tests", "tools", "examples", "docs", "scripts", "cmake", "bench", "kernels",
                          "README.md", "CHANGELOG.md", "CMakeLists.txt"}) {
    fs::path root = fs::path(CUDAKIT_SOURCE_DIR) / top;
    std::vector<fs::path> paths;
    if (fs::is_regular_file(root)) paths.push_back(root);
    else
      for (const auto& e : fs::recursive_directory_iterator(root))
        if (e.is_regular_file()) paths.push_back(e.path());
    for (const fs::path& path : paths) {
      std::string ext = path.extension().string();
      if (ext != ".cpp" && ext != ".hpp" && ext != ".cu" && ext != ".cuh" && ext != ".inc" && ext != ".md" &&
          ext != ".sh" && ext != ".cmake" && ext != ".txt" && ext != ".py")
        continue;
      std::string file = fs::relative(path, CUDAKIT_SOURCE_DIR).string();
      std::ifstream in(path);
      int line_number = 0;
      ++files;
      for (std::string line; std::getline(in, line);) {
        ++line_number;
        bool front_page = file == "README.md" || file == "CHANGELOG.md";
        bool trace = std::regex_search(line, work_item) || (front_page && std::regex_search(line, sitting)) ||
                     (file.rfind("src/", 0) == 0 && std::regex_search(line, design_in_message));
        if (!trace) continue;
        with_traces.insert(file);
        if (!allowed_traces.count(file)) ADD_FAILURE() << file << ":" << line_number << ": " << line;
      }
    }
  }
  EXPECT_GT(files, 100);
  for (const auto& e : fs::recursive_directory_iterator(fs::path(CUDAKIT_SOURCE_DIR) / "bench" / "results"))
    EXPECT_FALSE(std::regex_search(e.path().filename().string(), sitting)) << e.path();
  for (const auto& file : allowed_traces)
    EXPECT_TRUE(with_traces.count(file)) << file << " has no trace left: remove it from allowed_traces";
}

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


// A driver call is named by its table entry (cu.Name.name(), checked_call in
// src/driver/checked_call.hpp), never by a string literal that repeats it.
TEST(SourceScan, NoDriverCallIsNamedByAStringLiteral) {
  std::set<std::string> entries;
  for (const auto& e : cudakit::driver::entry_infos) entries.insert(e.name);
  const std::regex literal(R"re("(cu[A-Z][A-Za-z0-9_]*)")re");
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(CUDAKIT_SOURCE_DIR) / "src")) {
    std::string ext = e.path().extension().string();
    if (!e.is_regular_file() || (ext != ".cpp" && ext != ".hpp")) continue;
    std::string file = fs::relative(e.path(), CUDAKIT_SOURCE_DIR).string();
    if (in_driver_layer(file)) continue;
    ++files;
    std::ifstream in(e.path());
    int line_number = 0;
    for (std::string line; std::getline(in, line);) {
      ++line_number;
      for (std::sregex_iterator it(line.begin(), line.end(), literal), end; it != end; ++it) {
        if (!entries.count((*it)[1].str())) continue;
        ADD_FAILURE() << file << ":" << line_number << ": " << (*it)[0].str() << " repeats the entry's name";
      }
    }
  }
  EXPECT_GT(files, 50);
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

// Shared machines: NVLink multicast can take a host's GPUs out of service, so cudakit never
// makes a multicast object (docs/multi-gpu.md), and NCCL is kept from using it
// (NCCL_NVLS_ENABLE=0, nccl_communicator_test.cpp).
TEST(SourceScan, NoMulticastObjectIsEverMade) {
  for (const auto& info : cudakit::driver::entry_infos)
    EXPECT_EQ(std::string(info.name).find("Multicast"), std::string::npos) << info.name << " is in the driver table";
  for (const auto& f : library_sources()) EXPECT_EQ(f.text.find("MulticastCreate"), std::string::npos) << f.path;
}
