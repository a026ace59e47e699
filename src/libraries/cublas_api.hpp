// Internal: cuBLAS and cuBLASLt, opened at run time like the driver and NVRTC (DESIGN 2),
// so that cudakit links nothing of them and a program that never multiplies a matrix never
// needs them. Only src/libraries/ calls cublas* functions, through this table.
//
// Where the libraries are looked for, in order (the first pair that opens wins):
//   1. CUDAKIT_LIBCUBLAS (and CUDAKIT_LIBCUBLASLT) when set: only those files. Without
//      CUDAKIT_LIBCUBLASLT, cuBLASLt is taken from the directory of CUDAKIT_LIBCUBLAS.
//   2. For CUDA 13, then 12 (13 only on a driver for CUDA 13 or newer):
//      libcublasLt.so.N and libcublas.so.N on the dynamic loader's path; the same in
//      /usr/local/cuda/lib64; the same in the nvidia-cublas pip wheels of every Python
//      environment found (site-packages/nvidia/cu13/lib for CUDA 13's wheel,
//      site-packages/nvidia/cublas/lib for CUDA 12's), the environments being those of
//      VIRTUAL_ENV, CONDA_PREFIX, each python3 on PATH, PYTHONPATH and ~/.local.
// cuBLASLt is opened first, from the same place: libcublas needs it, and the copy already
// loaded is the one the dynamic loader then gives libcublas.
//
// A failed search is remembered and reported as FeatureUnavailable naming every file tried.
#pragma once

#include <cublasLt.h>
#include <cublas_api.h>

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace cudakit::cublas {

// cublasGemmEx and cublasGemmStridedBatchedEx are overloaded in C++ (cublas_api.h adds
// inline forms taking the old cudaDataType compute type): their pointer types are spelled
// out, and checked against the library's declarations below.
using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
using GemmStridedBatchedExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                                  const void*, const void*, cudaDataType, int, long long, const void*,
                                                  cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                                                  long long, int, cublasComputeType_t, cublasGemmAlgo_t);
static_assert(std::is_same_v<decltype(static_cast<GemmExFn>(&::cublasGemmEx)), GemmExFn>);
static_assert(std::is_same_v<decltype(static_cast<GemmStridedBatchedExFn>(&::cublasGemmStridedBatchedEx)),
                             GemmStridedBatchedExFn>);

// X(Name, Symbol, Type): one entry; the field is Name, the C symbol Symbol, of type Type.
#define CUDAKIT_CUBLAS_ENTRIES(X) \
  X(Create, cublasCreate_v2, decltype(&::cublasCreate_v2)) \
  X(Destroy, cublasDestroy_v2, decltype(&::cublasDestroy_v2)) \
  X(SetStream, cublasSetStream_v2, decltype(&::cublasSetStream_v2)) \
  X(SetWorkspace, cublasSetWorkspace_v2, decltype(&::cublasSetWorkspace_v2)) \
  X(GemmEx, cublasGemmEx, GemmExFn) \
  X(GemmStridedBatchedEx, cublasGemmStridedBatchedEx, GemmStridedBatchedExFn) \
  X(LtCreate, cublasLtCreate, decltype(&::cublasLtCreate)) \
  X(LtDestroy, cublasLtDestroy, decltype(&::cublasLtDestroy)) \
  X(LtGetVersion, cublasLtGetVersion, decltype(&::cublasLtGetVersion)) \
  X(LtMatmulDescCreate, cublasLtMatmulDescCreate, decltype(&::cublasLtMatmulDescCreate)) \
  X(LtMatmulDescDestroy, cublasLtMatmulDescDestroy, decltype(&::cublasLtMatmulDescDestroy)) \
  X(LtMatmulDescSetAttribute, cublasLtMatmulDescSetAttribute, decltype(&::cublasLtMatmulDescSetAttribute)) \
  X(LtMatrixLayoutCreate, cublasLtMatrixLayoutCreate, decltype(&::cublasLtMatrixLayoutCreate)) \
  X(LtMatrixLayoutDestroy, cublasLtMatrixLayoutDestroy, decltype(&::cublasLtMatrixLayoutDestroy)) \
  X(LtMatmulPreferenceCreate, cublasLtMatmulPreferenceCreate, decltype(&::cublasLtMatmulPreferenceCreate)) \
  X(LtMatmulPreferenceDestroy, cublasLtMatmulPreferenceDestroy, decltype(&::cublasLtMatmulPreferenceDestroy)) \
  X(LtMatmulPreferenceSetAttribute, cublasLtMatmulPreferenceSetAttribute, decltype(&::cublasLtMatmulPreferenceSetAttribute)) \
  X(LtMatmulAlgoGetHeuristic, cublasLtMatmulAlgoGetHeuristic, decltype(&::cublasLtMatmulAlgoGetHeuristic)) \
  X(LtMatmul, cublasLtMatmul, decltype(&::cublasLtMatmul))

/// Identifies one entry (the fake's fault injection and call log use it).
enum class Entry : std::size_t {
#define CUDAKIT_X(name, symbol, type) name,
  CUDAKIT_CUBLAS_ENTRIES(CUDAKIT_X)
#undef CUDAKIT_X
  count_
};

/// How many entries the table has.
inline constexpr std::size_t entry_count = static_cast<std::size_t>(Entry::count_);

/// The C symbol of each entry, by Entry.
inline constexpr const char* entry_names[] = {
#define CUDAKIT_X(name, symbol, type) #symbol,
    CUDAKIT_CUBLAS_ENTRIES(CUDAKIT_X)
#undef CUDAKIT_X
};

/// "cublasGemmEx".
constexpr const char* name_of(Entry e) { return entry_names[static_cast<std::size_t>(e)]; }

/// Whether the entry is in libcublasLt (the others are in libcublas).
constexpr bool in_lt(Entry e) { return name_of(e)[6] == 'L' && name_of(e)[7] == 't'; }

/// The entries cudakit calls, resolved with dlsym.
struct Api {
#define CUDAKIT_X(name, symbol, type) type name = nullptr;
  CUDAKIT_CUBLAS_ENTRIES(CUDAKIT_X)
#undef CUDAKIT_X
  std::string path;     // the libcublas file loaded
  std::string lt_path;  // the libcublasLt file loaded
  std::size_t version = 0;  // cublasLtGetVersion(): 130100 for 13.1.0
  void* blas_library = nullptr;  // dlopen's handles (null for an installed table)
  void* lt_library = nullptr;
};

/// The field of Api that holds an entry: `(api.*ApiField<Entry::Create>::pointer)(&handle)`
/// calls cublasCreate.
template <Entry E>
struct ApiField;
#define CUDAKIT_X(name, symbol, type)                 \
  template <>                                         \
  struct ApiField<Entry::name> {                      \
    static constexpr type Api::*pointer = &Api::name; \
  };
CUDAKIT_CUBLAS_ENTRIES(CUDAKIT_X)
#undef CUDAKIT_X

/// Loads both libraries on first use (thread-safe) and returns their entries. Throws
/// FeatureUnavailable naming every file tried when they cannot be found, or the entries
/// missing from the files found.
const Api& api();

/// Whether the libraries are loaded now (or a table installed); never loads them.
bool loaded() noexcept;

namespace testing {
/// The files the loader would try, in order: (libcublasLt, libcublas) pairs, for a driver
/// with or without CUDA 13.
std::vector<std::pair<std::string, std::string>> search_order(bool driver_has_cuda13);
/// Replaces the libraries with a table (a fake in unit tests). Every entry must be set.
void install(const Api& table);
/// Forgets an installed table, a loaded library (it stays mapped) or a remembered failure,
/// so that the next api() searches again (after changing CUDAKIT_LIBCUBLAS, say).
void reset();
}  // namespace testing

}  // namespace cudakit::cublas
