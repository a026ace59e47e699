// Internal: NVRTC, opened at run time like the driver (DESIGN 2), so that cudakit links
// nothing of the toolkit and a program that never compiles never needs libnvrtc.
//
// The library is looked for, in order: the path in CUDAKIT_LIBNVRTC (only that, when set);
// libnvrtc.so.13 and libnvrtc.so.12 on the loader's path; the same two in
// /usr/local/cuda/lib64. A failed search is remembered and reported as CompilerUnavailable,
// naming every place tried. Only this folder calls nvrtc* functions.
#pragma once

#include <nvrtc.h>

#include <string>

namespace cudakit::nvrtc {

// X(Name): one entry, the C symbol nvrtcName in the field Name.
#define CUDAKIT_NVRTC_ENTRIES(X)                                                                          \
  X(GetErrorString) X(Version) X(GetNumSupportedArchs) X(GetSupportedArchs) X(CreateProgram) X(DestroyProgram) \
  X(CompileProgram) X(GetPTXSize) X(GetPTX) X(GetCUBINSize) X(GetCUBIN) X(GetProgramLogSize) X(GetProgramLog)   \
  X(AddNameExpression) X(GetLoweredName)

/// The NVRTC entries cudakit calls, resolved with dlsym.
struct Api {
#define CUDAKIT_X(name) decltype(&::nvrtc##name) name = nullptr;
  CUDAKIT_NVRTC_ENTRIES(CUDAKIT_X)
#undef CUDAKIT_X
  int major = 0, minor = 0;  // nvrtcVersion, read at load
  std::string path;          // the file loaded
};

/// Loads NVRTC on first use (thread-safe) and returns its entries. Throws
/// CompilerUnavailable (error.hpp) when it cannot be found or lacks an entry.
const Api& api();

/// "NVRTC_ERROR_COMPILATION" style text for a result.
std::string result_words(nvrtcResult result);

/// Unit tests: forget the loaded library (it stays mapped) or a remembered failure, so the
/// next api() searches again (e.g. after changing CUDAKIT_LIBNVRTC).
void reset_for_testing();

}  // namespace cudakit::nvrtc
