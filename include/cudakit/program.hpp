// Programs: CUDA C++ compiled at run time with NVRTC.
//
//   Program program(source, "saxpy.cu");
//   program.header("common.cuh", common_source).name_expression("fill_value<float>");
//   CompiledProgram out = program.compile(device);                  // cubin for the device's arch
//   CompiledProgram ptx = program.compile({.arch = "compute_90", .output = ProgramOutput::ptx});
//   Module m = Module::load(device, out);
//   auto fill = m.kernel<void(float*, float, int)>("fill_value<float>");
//
// NVRTC is opened at run time, like the driver (libnvrtc.so.13, then .so.12; the path in
// CUDAKIT_LIBNVRTC overrides both): a program that never compiles never needs it, and one
// that does gets CompilerUnavailable, naming every place looked, when it is missing.
//
// Options: the target architecture (from a Device, or "sm_90" / "compute_90"), the language
// standard, defines, include paths and extra NVRTC flags. Name expressions ("fill_value<int>",
// "ns::kernel") let C++ kernels be looked up by their C++ names (nvrtcAddNameExpression,
// nvrtcGetLoweredName). Output is a cubin unless PTX is asked for. A failed compile throws
// CompileError whose log() is NVRTC's complete log (warnings of a successful one are in log()).
//
// An on-disk cache (CompileOptions::cache_directory, else the CUDAKIT_CACHE_DIR environment
// variable; none when neither is set) keys each output by the source, the named headers,
// the options, the architecture, the name expressions and NVRTC's version. Entries are
// written atomically (a temporary file renamed into place) and compared in full on reading,
// so a hash collision or a torn file is a miss, never a wrong program. Files included from
// include paths are not part of the key: name them as headers, or clear the cache.
//
// Thread safety: a Program is a value; compile() may run on several threads at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cudakit/export.hpp"
#include "cudakit/device.hpp"
#include "cudakit/error.hpp"

namespace cudakit {

/// What NVRTC produces.
enum class ProgramOutput : std::uint8_t {
  cubin,  ///< machine code for one architecture (sm_XY); loads without a JIT
  ptx,    ///< PTX for a virtual architecture (compute_XY); the driver JIT-compiles it at load
};

/// How a Program compiles.
struct CUDAKIT_API CompileOptions {
  /// "sm_90" (or "compute_90"; the prefix follows the output: cubin needs sm_, PTX compute_).
  /// Empty: the device's, with compile(device); compile(options) then requires it.
  std::string arch = {};
  ProgramOutput output = ProgramOutput::cubin;
  /// The language standard, as -std takes it.
  std::string standard = "c++17";
  /// "NAME" or "NAME=VALUE".
  std::vector<std::string> defines = {};
  std::vector<std::string> include_paths = {};
  /// Passed to NVRTC as they are ("-use_fast_math", "-lineinfo", "--extra-device-vectorization").
  std::vector<std::string> flags = {};
  /// Where to cache outputs; empty: CUDAKIT_CACHE_DIR when set, else no cache.
  std::filesystem::path cache_directory = {};
  /// False: neither read nor write the cache.
  bool use_cache = true;
};

/// NVRTC's output: a cubin or PTX, its log, and the lowered names of its name expressions.
class CUDAKIT_API CompiledProgram {
 public:
  /// The program's name ("saxpy.cu").
  const std::string& name() const noexcept { return name_; }
  /// Cubin or PTX.
  ProgramOutput output() const noexcept { return output_; }
  /// "sm_90" for a cubin, "compute_90" for PTX.
  const std::string& arch() const noexcept { return arch_; }
  /// The cubin, or the PTX text with its terminating NUL.
  std::span<const unsigned char> image() const noexcept { return image_; }
  /// NVRTC's log (warnings); empty when it had nothing to say.
  const std::string& log() const noexcept { return log_; }
  /// Each name expression with the name the driver knows it by.
  const std::vector<std::pair<std::string, std::string>>& lowered_names() const noexcept { return lowered_; }
  /// The lowered (mangled) name of one name expression; InvalidArgument lists those added.
  const std::string& lowered_name(std::string_view expression) const;
  /// Whether this came from the on-disk cache rather than from NVRTC.
  bool from_cache() const noexcept { return from_cache_; }

 private:
  friend class Program;
  std::string name_;
  ProgramOutput output_ = ProgramOutput::cubin;
  std::string arch_;
  std::vector<unsigned char> image_;
  std::string log_;
  std::vector<std::pair<std::string, std::string>> lowered_;
  bool from_cache_ = false;
};

/// CUDA C++ source to compile at run time with NVRTC (loaded on first use). Building one
/// calls nothing; compile() may be called several times, from several threads.
class CUDAKIT_API Program {
 public:
  /// The source text and the name messages and logs use for it.
  explicit Program(std::string source, std::string name = "program.cu");

  /// A header the source may #include by `include_name`, given as text.
  Program& header(std::string include_name, std::string contents);
  /// A C++ name to resolve after compiling ("fill_value<float>", "&ns::kernel").
  Program& name_expression(std::string expression);

  /// Compiles for `options.arch` (required). Throws CompileError with NVRTC's log,
  /// InvalidArgument for an architecture NVRTC does not support, CompilerUnavailable.
  CompiledProgram compile(const CompileOptions& options) const;
  /// Compiles for `device`'s architecture unless `options.arch` says otherwise.
  CompiledProgram compile(const Device& device, CompileOptions options = {}) const;

  /// The program's name and source, as given.
  const std::string& name() const noexcept { return name_; }
  const std::string& source() const noexcept { return source_; }

 private:
  std::string source_;
  std::string name_;
  std::vector<std::pair<std::string, std::string>> headers_;
  std::vector<std::string> name_expressions_;
};

/// An NVRTC version, e.g. {13, 0}.
struct CUDAKIT_API NvrtcVersion {
  int major = 0;
  int minor = 0;
};

/// The version of the NVRTC cudakit loads (throws CompilerUnavailable without one).
CUDAKIT_API NvrtcVersion nvrtc_version();
/// The architectures that NVRTC compiles for, as numbers (75, 80, ..., 90, ...).
CUDAKIT_API std::vector<int> nvrtc_architectures();

}  // namespace cudakit
