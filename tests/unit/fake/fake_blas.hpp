// A fake cuBLAS and cuBLASLt for unit tests, built like the fake driver (fake_driver.hpp)
// and working on its memory and streams: installed into cudakit's cuBLAS loader in place
// of libcublas, it computes every GEMM and matmul on the host, so results can be checked.
//
// - GEMMs run when submitted (or, on a capturing stream, become a node of the capture that
//   computes at each replay), in double precision, with cuBLAS's column-major arguments
//   checked as cuBLAS checks them (INVALID_VALUE for a bad leading dimension).
// - Each operand, and the handle's workspace, is an access in the fake driver's ordering
//   model: a GEMM on one stream and a kernel on another that touch the same memory without
//   a wait between them is a hazard the test sees.
// - Handles and descriptors go through a ledger (leaks, double destroys); faults are
//   scripted per entry ("fail the 2nd cublasGemmEx with CUBLAS_STATUS_EXECUTION_FAILED");
//   every call is counted and logged.
// - Misuse is recorded as a problem: a handle used by two threads at once, a GEMM captured
//   on a handle without a workspace (the real one would allocate inside the capture), a
//   handle created during a capture in a strict mode, a call with another device current
//   than the handle's, the legacy stream.
#pragma once

#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda.h>

#include <functional>
#include <map>
#include <mutex>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "libraries/cublas_api.hpp"

namespace cudakit::cublas {
/// Test failures print an entry by its C symbol ("cublasLtMatmul").
inline void PrintTo(Entry e, std::ostream* out) { *out << name_of(e); }
}  // namespace cudakit::cublas

namespace cudakit::fake {

/// A GEMM or matmul as cuBLAS received it (column-major arguments).
struct BlasGemmCall {
  cublas::Entry entry;
  cublasOperation_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  int m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  long long stride_a = 0, stride_b = 0, stride_c = 0;
  int batch = 1;
  cudaDataType type = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;  // matmuls only
  CUstream stream = nullptr;
};

class Blas {
 public:
  /// The fake driver must be alive while this is used.
  Blas();
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

  /// The fake in use (one at a time).
  static Blas& current();

  /// Installs this fake into cudakit's cuBLAS loader.
  void install();

  // ---- faults ----
  /// The nth call (1-based) of `entry` returns `status`; nth == 0 fails every call.
  void fail(cublas::Entry entry, int nth, cublasStatus_t status);
  void clear_faults();

  // ---- configuration ----
  /// How many algorithms cublasLtMatmulAlgoGetHeuristic offers (0: none fits).
  int heuristic_results = 1;
  /// Runs inside every GEMM and matmul before it computes, on the calling thread (a test
  /// holds a call open here while another thread tries the handle).
  std::function<void()> during_gemm;

  // ---- observation ----
  int calls(cublas::Entry entry) const;
  std::vector<cublas::Entry> log() const;
  void clear_log();
  /// Every GEMM and matmul received, in order.
  std::vector<BlasGemmCall> gemms() const;
  /// Live objects of a kind: "handle", "lt handle", "matmul desc", "layout", "preference".
  std::size_t live(const std::string& kind) const;
  /// Leaks, double destroys and misuse seen. Empty when clean.
  std::vector<std::string> problems() const;
  /// Every call that returned a scripted fault, in order.
  std::vector<std::pair<cublas::Entry, cublasStatus_t>> failed_calls() const;

  // ---- for the implementation ----
  struct Fault {
    cublas::Entry entry;
    int nth;
    cublasStatus_t status;
  };
  mutable std::recursive_mutex mutex;
  std::vector<Fault> faults;
  int call_counts[cublas::entry_count] = {};
  std::vector<cublas::Entry> call_log;
  std::vector<std::pair<cublas::Entry, cublasStatus_t>> failures;
  std::vector<BlasGemmCall> gemm_log;
  std::map<std::string, std::set<const void*>> ledger;
  std::vector<std::string> misuse;
};

}  // namespace cudakit::fake
