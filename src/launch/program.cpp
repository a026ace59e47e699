#include "cudakit/program.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <system_error>

#include "driver/nvrtc.hpp"

namespace cudakit {

namespace {

// ---- architectures ----

struct Arch {
  int number = 0;
  std::string suffix;  // "a" for sm_90a, "f" for family targets
};

Arch parse_arch(const std::string& text) {
  std::string_view s = text;
  if (s.rfind("sm_", 0) == 0) s.remove_prefix(3);
  else if (s.rfind("compute_", 0) == 0) s.remove_prefix(8);
  else s = {};
  Arch a;
  std::size_t i = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') a.number = a.number * 10 + (s[i++] - '0');
  a.suffix = std::string(s.substr(i));
  bool suffix_ok = a.suffix.empty() || a.suffix == "a" || a.suffix == "f";
  if (a.number <= 0 || !suffix_ok)
    throw InvalidArgument("'" + text + "' is not a GPU architecture NVRTC takes (like sm_90 or compute_90)");
  return a;
}

std::string arch_for(const Arch& a, ProgramOutput output) {
  return (output == ProgramOutput::cubin ? "sm_" : "compute_") + std::to_string(a.number) + a.suffix;
}

std::string version_words(const nvrtc::Api& api) {
  return std::to_string(api.major) + "." + std::to_string(api.minor);
}

std::vector<int> supported_archs(const nvrtc::Api& api) {
  int n = 0;
  if (api.GetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0) return {};
  std::vector<int> archs(static_cast<std::size_t>(n));
  if (api.GetSupportedArchs(archs.data()) != NVRTC_SUCCESS) return {};
  return archs;
}

// ---- the on-disk cache ----

void append_field(std::string& key, std::string_view field) {
  key += std::to_string(field.size());
  key += ':';
  key += field;
}

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

constexpr char cache_magic[] = "CUDAKIT-NVRTC-CACHE-1\n";

void put_u64(std::string& out, std::uint64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }
void put_bytes(std::string& out, std::string_view s) {
  put_u64(out, s.size());
  out.append(s);
}

struct Reader {
  std::string_view data;
  bool ok = true;
  std::uint64_t u64() {
    std::uint64_t v = 0;
    if (data.size() < sizeof v) return ok = false, 0;
    std::memcpy(&v, data.data(), sizeof v);
    data.remove_prefix(sizeof v);
    return v;
  }
  std::string_view bytes() {
    std::uint64_t n = u64();
    if (!ok || n > data.size()) return ok = false, std::string_view{};
    std::string_view s = data.substr(0, n);
    data.remove_prefix(n);
    return s;
  }
};

std::filesystem::path cache_directory(const CompileOptions& o) {
  if (!o.use_cache) return {};
  if (!o.cache_directory.empty()) return o.cache_directory;
  const char* env = std::getenv("CUDAKIT_CACHE_DIR");
  return env != nullptr && env[0] != '\0' ? std::filesystem::path(env) : std::filesystem::path();
}

bool read_cache(const std::filesystem::path& file, const std::string& key, std::vector<unsigned char>& image, std::string& log,
                std::vector<std::pair<std::string, std::string>>& lowered) {
  // A cached entry is code the GPU will run: only a regular file of this user that no one
  // else may write is read, never one through a symbolic link (docs/security.md).
  const int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  struct stat st {};
  std::string content;
  bool safe = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() && (st.st_mode & 022) == 0;
  if (safe) {
    content.resize(static_cast<std::size_t>(st.st_size));
    std::size_t have = 0;
    while (have < content.size()) {
      ssize_t n = ::read(fd, content.data() + have, content.size() - have);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      have += static_cast<std::size_t>(n);
    }
    content.resize(have);
  }
  ::close(fd);
  if (!safe) return false;
  std::string_view v = content;
  if (v.substr(0, sizeof cache_magic - 1) != cache_magic) return false;
  Reader r{v.substr(sizeof cache_magic - 1)};
  if (r.bytes() != key || !r.ok) return false;  // another key with the same hash, or a torn file
  std::string_view cached_log = r.bytes();
  std::uint64_t names = r.u64();
  std::vector<std::pair<std::string, std::string>> cached_lowered;
  for (std::uint64_t i = 0; r.ok && i < names; ++i) {
    std::string_view expression = r.bytes();
    std::string_view name = r.bytes();
    cached_lowered.emplace_back(expression, name);
  }
  std::string_view cached_image = r.bytes();
  if (!r.ok || !r.data.empty()) return false;
  image.assign(cached_image.begin(), cached_image.end());
  log = cached_log;
  lowered = std::move(cached_lowered);
  return true;
}

// Best effort: a cache that cannot be written costs a compile next time, nothing more.
void write_cache(const std::filesystem::path& dir, const std::filesystem::path& file, const std::string& key,
                 const CompiledProgram& program) {
  static std::atomic<unsigned> counter{0};
  std::string content = cache_magic;
  put_bytes(content, key);
  put_bytes(content, program.log());
  put_u64(content, program.lowered_names().size());
  for (const auto& [expression, name] : program.lowered_names()) {
    put_bytes(content, expression);
    put_bytes(content, name);
  }
  auto image = program.image();
  put_bytes(content, std::string_view(reinterpret_cast<const char*>(image.data()), image.size()));

  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::filesystem::path tmp = file;
  tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1)) + "." +
         std::to_string(std::random_device{}());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return;
  std::size_t written = 0;
  while (written < content.size()) {
    ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n <= 0) break;
    written += static_cast<std::size_t>(n);
  }
  bool ok = written == content.size() && ::fsync(fd) == 0;
  ok = ::close(fd) == 0 && ok;
  if (ok) std::filesystem::rename(tmp, file, ec);  // atomic: readers see the old file or the new one
  if (!ok || ec) std::filesystem::remove(tmp, ec);
}

// ---- NVRTC calls ----

struct ProgramHandle {
  const nvrtc::Api& api;
  nvrtcProgram program = nullptr;
  ~ProgramHandle() {
    if (program != nullptr) api.DestroyProgram(&program);
  }
};

[[noreturn]] void fail(const std::string& what, nvrtcResult r) {
  throw CompileError(what + ": " + nvrtc::result_words(r), "");
}

std::string program_log(const nvrtc::Api& api, nvrtcProgram program) {
  std::size_t size = 0;
  if (api.GetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) return {};
  std::string log(size, '\0');
  if (api.GetProgramLog(program, log.data()) != NVRTC_SUCCESS) return {};
  log.resize(strnlen(log.data(), log.size()));
  while (!log.empty() && (log.back() == '\n' || log.back() == '\r')) log.pop_back();
  return log;
}

using NamePairs = std::vector<std::pair<std::string, std::string>>;

// ---- one compile, step by step ----

// The architecture NVRTC is asked for ("sm_90" for a cubin, "compute_90" for PTX), refused
// with the list NVRTC has when this NVRTC cannot compile for it.
std::string checked_target(const nvrtc::Api& api, const std::string& arch_text, ProgramOutput output) {
  Arch arch = parse_arch(arch_text);
  std::string target = arch_for(arch, output);
  std::vector<int> supported = supported_archs(api);
  if (!supported.empty() && std::find(supported.begin(), supported.end(), arch.number) == supported.end()) {
    std::string list;
    for (int a : supported) list += (list.empty() ? "" : ", ") + std::to_string(a);
    throw InvalidArgument("NVRTC " + version_words(api) + " (" + api.path + ") cannot compile for " + target +
                          "; it compiles for " + list);
  }
  return target;
}

std::vector<std::string> nvrtc_options(const CompileOptions& o, const std::string& target) {
  std::vector<std::string> options;
  options.push_back("--gpu-architecture=" + target);
  if (!o.standard.empty()) options.push_back("-std=" + o.standard);
  for (const auto& d : o.defines) options.push_back("-D" + d);
  for (const auto& i : o.include_paths) options.push_back("-I" + i);
  for (const auto& f : o.flags) options.push_back(f);
  return options;
}

// The cache key: everything that decides the output.
std::string cache_key(const nvrtc::Api& api, ProgramOutput output, const std::string& name, const std::string& source,
                      const NamePairs& headers, const std::vector<std::string>& options,
                      const std::vector<std::string>& name_expressions) {
  std::string key = "nvrtc " + version_words(api) + (output == ProgramOutput::cubin ? " cubin\n" : " ptx\n");
  append_field(key, name);
  append_field(key, source);
  key += std::to_string(headers.size()) + " headers\n";
  for (const auto& [n, c] : headers) {
    append_field(key, n);
    append_field(key, c);
  }
  key += std::to_string(options.size()) + " options\n";
  for (const auto& opt : options) append_field(key, opt);
  key += std::to_string(name_expressions.size()) + " names\n";
  for (const auto& e : name_expressions) append_field(key, e);
  return key;
}

std::filesystem::path cache_file(const std::filesystem::path& dir, const std::string& key) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(key)));
  return dir / (std::string(hex) + ".nvrtc");
}

// nvrtcCreateProgram with the headers, then the name expressions whose lowered names are
// wanted. `what` says which compile failed.
void create_program(ProgramHandle& handle, const std::string& source, const std::string& name, const NamePairs& headers,
                    const std::vector<std::string>& name_expressions, const std::string& what) {
  std::vector<const char*> header_names, header_sources;
  for (const auto& [n, c] : headers) {
    header_names.push_back(n.c_str());
    header_sources.push_back(c.c_str());
  }
  nvrtcResult r = handle.api.CreateProgram(&handle.program, source.c_str(), name.c_str(),
                                           static_cast<int>(headers.size()), header_sources.data(), header_names.data());
  if (r != NVRTC_SUCCESS) fail(what + ": nvrtcCreateProgram failed", r);
  for (const auto& e : name_expressions) {
    r = handle.api.AddNameExpression(handle.program, e.c_str());
    if (r != NVRTC_SUCCESS) fail(what + ": nvrtcAddNameExpression(\"" + e + "\") failed", r);
  }
}

// The NVRTC call itself: its log, or a CompileError that carries the log and the options.
std::string compile_program(ProgramHandle& handle, const std::vector<std::string>& options, const std::string& what) {
  std::vector<const char*> option_pointers;
  for (const auto& opt : options) option_pointers.push_back(opt.c_str());
  nvrtcResult r = handle.api.CompileProgram(handle.program, static_cast<int>(option_pointers.size()), option_pointers.data());
  std::string log = program_log(handle.api, handle.program);
  if (r != NVRTC_SUCCESS) {
    std::string options_words;
    for (const auto& opt : options) options_words += " " + opt;
    throw CompileError(what + " failed (" + nvrtc::result_words(r) + "; options:" + options_words + ")" +
                           (log.empty() ? std::string() : "; NVRTC's log:\n" + log),
                       log);
  }
  return log;
}

// The compiled image: a cubin, or PTX with its terminating NUL.
std::vector<unsigned char> program_image(const ProgramHandle& handle, ProgramOutput output, const std::string& what) {
  const nvrtc::Api& api = handle.api;
  const bool cubin = output == ProgramOutput::cubin;
  std::size_t size = 0;
  nvrtcResult r = cubin ? api.GetCUBINSize(handle.program, &size) : api.GetPTXSize(handle.program, &size);
  if (r != NVRTC_SUCCESS) fail(what + (cubin ? ": nvrtcGetCUBINSize failed" : ": nvrtcGetPTXSize failed"), r);
  std::vector<unsigned char> image(size);
  char* data = reinterpret_cast<char*>(image.data());
  r = cubin ? api.GetCUBIN(handle.program, data) : api.GetPTX(handle.program, data);
  if (r != NVRTC_SUCCESS) fail(what + (cubin ? ": nvrtcGetCUBIN failed" : ": nvrtcGetPTX failed"), r);
  return image;
}

NamePairs lowered_names(const ProgramHandle& handle, const std::vector<std::string>& name_expressions,
                        const std::string& what) {
  NamePairs lowered;
  for (const auto& e : name_expressions) {
    const char* name = nullptr;
    nvrtcResult r = handle.api.GetLoweredName(handle.program, e.c_str(), &name);
    if (r != NVRTC_SUCCESS || name == nullptr) fail(what + ": nvrtcGetLoweredName(\"" + e + "\") failed", r);
    lowered.emplace_back(e, name);
  }
  return lowered;
}

}  // namespace

const std::string& CompiledProgram::lowered_name(std::string_view expression) const {
  for (const auto& [e, name] : lowered_)
    if (e == expression) return name;
  std::string known;
  for (const auto& [e, name] : lowered_) known += (known.empty() ? "" : ", ") + e;
  throw InvalidArgument("program '" + name_ + "' has no name expression '" + std::string(expression) + "'; " +
                        (known.empty() ? std::string("none was added (Program::name_expression)")
                                       : "it has: " + known));
}

Program::Program(std::string source, std::string name) : source_(std::move(source)), name_(std::move(name)) {}

Program& Program::header(std::string include_name, std::string contents) {
  headers_.emplace_back(std::move(include_name), std::move(contents));
  return *this;
}

Program& Program::name_expression(std::string expression) {
  name_expressions_.push_back(std::move(expression));
  return *this;
}

CompiledProgram Program::compile(const Device& device, CompileOptions options) const {
  if (options.arch.empty()) options.arch = device.compute_capability().arch();
  return compile(options);
}

CompiledProgram Program::compile(const CompileOptions& o) const {
  if (o.arch.empty())
    throw InvalidArgument("compiling program '" + name_ +
                          "': CompileOptions::arch is empty; name an architecture (\"sm_90\") or compile for a Device");
  const nvrtc::Api& api = nvrtc::api();
  const std::string target = checked_target(api, o.arch, o.output);
  const std::vector<std::string> options = nvrtc_options(o, target);
  const std::string key = cache_key(api, o.output, name_, source_, headers_, options, name_expressions_);

  CompiledProgram out;
  out.name_ = name_;
  out.output_ = o.output;
  out.arch_ = target;

  const std::filesystem::path dir = cache_directory(o);
  const std::filesystem::path file = dir.empty() ? std::filesystem::path() : cache_file(dir, key);
  if (!dir.empty() && read_cache(file, key, out.image_, out.log_, out.lowered_)) {
    out.from_cache_ = true;
    return out;
  }

  const std::string what = "NVRTC " + version_words(api) + " compiling program '" + name_ + "' for " + target;
  ProgramHandle handle{api};
  create_program(handle, source_, name_, headers_, name_expressions_, what);
  out.log_ = compile_program(handle, options, what);
  out.image_ = program_image(handle, o.output, what);
  out.lowered_ = lowered_names(handle, name_expressions_, what);
  if (!dir.empty()) write_cache(dir, file, key, out);
  return out;
}

NvrtcVersion nvrtc_version() {
  const nvrtc::Api& api = nvrtc::api();
  return {api.major, api.minor};
}

std::vector<int> nvrtc_architectures() { return supported_archs(nvrtc::api()); }

}  // namespace cudakit
