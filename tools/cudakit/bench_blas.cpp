// cuBLAS benchmarks (group "blas"; `cudakit bench --filter blas`), each beside the raw
// library in the same process, interleaved, GPU time by events on one stream:
//   - Blas::gemm against cublasGemmEx on a raw handle bound to the same stream, with a
//     workspace of the same size: square 4096 and 8192 in bf16 and fp32 (TFLOP/s, target at
//     least 0.99x the raw throughput, i.e. at most 1.01x its time), and 64 and 256 where the
//     launch dominates (µs per GEMM, at most 1.03x). Each large size also gets a line with
//     both sides as a percentage of the H200's bf16 dense peak, 989 TFLOP/s (NVIDIA's
//     nominal figure without sparsity; fp32 GEMMs run far below it by nature);
//   - BlasLt::matmul with a GELU+bias epilogue against cublasLtMatmul with the same
//     descriptors and algorithm: square 4096 in bf16 (TFLOP/s, at least 0.98x) and a
//     decoder layer's x[32×1024]·W[1024×4096] (µs, at most 1.03x: like the small GEMMs
//     the call is host-bound, cuBLASLt's own host code taking about 10 µs of it against
//     a few µs on the device, so cudakit's fixed cost per call is held to the same bound);
//   - declared work (3 buffers, one stream) around a callable that makes the cheapest real
//     submission, an empty kernel's raw launch, against that launch alone: CPU time per
//     call, at most 1.02x;
//   - a chain of 8 decoder GEMMs captured into a graph and replayed, against the same 8
//     Blas::gemm calls on the stream (both cudakit; µs per GEMM, reported).
// Without cuBLAS the group measures nothing and says so on stderr.
#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "bench/harness.hpp"
#include "cudakit/blas.hpp"
#include "cudakit/blas_lt.hpp"
#include "cudakit/cudakit.hpp"
#include "cudakit/declared_work.hpp"

#ifdef CUDAKIT_HAVE_TEST_KERNELS
#include "test_kernels.hpp"
#endif

namespace cudakit::tool::bench {
namespace {

constexpr double h200_bf16_dense_peak = 989.0;  // TFLOP/s, NVIDIA's nominal figure without sparsity

// ---- the raw library, as an application that dlopened it would call it ----

template <class F>
F symbol(const char* name) {
  auto f = reinterpret_cast<F>(blas_symbol(name));
  if (f == nullptr) throw Error(std::string("the loaded cuBLAS has no ") + name);
  return f;
}

using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                  const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                  cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);

struct RawCublas {
  decltype(&::cublasCreate_v2) create = symbol<decltype(create)>("cublasCreate_v2");
  decltype(&::cublasDestroy_v2) destroy = symbol<decltype(destroy)>("cublasDestroy_v2");
  decltype(&::cublasSetStream_v2) set_stream = symbol<decltype(set_stream)>("cublasSetStream_v2");
  decltype(&::cublasSetWorkspace_v2) set_workspace = symbol<decltype(set_workspace)>("cublasSetWorkspace_v2");
  GemmEx gemm = symbol<GemmEx>("cublasGemmEx");
  decltype(&::cublasLtCreate) lt_create = symbol<decltype(lt_create)>("cublasLtCreate");
  decltype(&::cublasLtDestroy) lt_destroy = symbol<decltype(lt_destroy)>("cublasLtDestroy");
  decltype(&::cublasLtMatmulDescCreate) desc_create = symbol<decltype(desc_create)>("cublasLtMatmulDescCreate");
  decltype(&::cublasLtMatmulDescDestroy) desc_destroy = symbol<decltype(desc_destroy)>("cublasLtMatmulDescDestroy");
  decltype(&::cublasLtMatmulDescSetAttribute) desc_set =
      symbol<decltype(desc_set)>("cublasLtMatmulDescSetAttribute");
  decltype(&::cublasLtMatrixLayoutCreate) layout_create = symbol<decltype(layout_create)>("cublasLtMatrixLayoutCreate");
  decltype(&::cublasLtMatrixLayoutDestroy) layout_destroy =
      symbol<decltype(layout_destroy)>("cublasLtMatrixLayoutDestroy");
  decltype(&::cublasLtMatmulPreferenceCreate) pref_create = symbol<decltype(pref_create)>("cublasLtMatmulPreferenceCreate");
  decltype(&::cublasLtMatmulPreferenceDestroy) pref_destroy =
      symbol<decltype(pref_destroy)>("cublasLtMatmulPreferenceDestroy");
  decltype(&::cublasLtMatmulPreferenceSetAttribute) pref_set =
      symbol<decltype(pref_set)>("cublasLtMatmulPreferenceSetAttribute");
  decltype(&::cublasLtMatmulAlgoGetHeuristic) heuristic = symbol<decltype(heuristic)>("cublasLtMatmulAlgoGetHeuristic");
  decltype(&::cublasLtMatmul) matmul = symbol<decltype(matmul)>("cublasLtMatmul");
};

void check_status(cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS) throw Error(std::string(call) + " failed: " + blas_status_name(s));
}

// A raw cuBLAS handle bound to `stream` with a workspace of `bytes`, as cudakit sets its own.
struct RawHandle {
  const RawCublas& raw;
  cublasHandle_t handle = nullptr;
  DeviceBuffer<std::byte> workspace;
  RawHandle(const RawCublas& r, StreamRef stream, std::size_t bytes) : raw(r), workspace(stream, bytes, uninitialized) {
    check_status(raw.create(&handle), "cublasCreate");
    check_status(raw.set_stream(handle, stream.handle()), "cublasSetStream");
    check_status(raw.set_workspace(handle, workspace.data(), bytes), "cublasSetWorkspace");
  }
  ~RawHandle() { raw.destroy(handle); }
  RawHandle(const RawHandle&) = delete;
  RawHandle& operator=(const RawHandle&) = delete;
};

// A raw cuBLASLt matmul D = epilogue(A·B + bias), row-major through the same transposition
// cudakit uses, planned once with the heuristic, as an application would.
struct RawLtMatmul {
  const RawCublas& raw;
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algorithm{};
  DeviceBuffer<std::byte> workspace;
  struct Operands {
    const void *a, *b, *d, *bias;
  };
  // The largest power of two, at most 256, that divides the address.
  static std::uint32_t alignment_of(const void* pointer) {
    const auto p = reinterpret_cast<std::uintptr_t>(pointer);
    return static_cast<std::uint32_t>(std::min<std::uintptr_t>(256, p & (~p + 1)));
  }
  RawLtMatmul(const RawCublas& r, StreamRef stream, std::size_t bytes, int m, int n, int k, const Operands& operands)
      : raw(r), workspace(stream, bytes, uninitialized) {
    check_status(raw.lt_create(&handle), "cublasLtCreate");
    check_status(raw.desc_create(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    const std::uint32_t epilogue = CUBLASLT_EPILOGUE_GELU_BIAS;
    check_status(raw.desc_set(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue), "set epilogue");
    check_status(raw.desc_set(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &operands.bias, sizeof operands.bias),
                 "set bias");
    check_status(raw.layout_create(&first, CUDA_R_16BF, n, k, n), "cublasLtMatrixLayoutCreate");
    check_status(raw.layout_create(&second, CUDA_R_16BF, k, m, k), "cublasLtMatrixLayoutCreate");
    check_status(raw.layout_create(&c, CUDA_R_16BF, n, m, n), "cublasLtMatrixLayoutCreate");
    cublasLtMatmulPreference_t pref = nullptr;
    check_status(raw.pref_create(&pref), "cublasLtMatmulPreferenceCreate");
    const std::uint64_t limit = bytes;
    check_status(raw.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &limit, sizeof limit), "set workspace");
    // The operands' alignment, as cuBLASLt's documentation asks an application to state it
    // and as cudakit states it: the heuristic then offers both sides the same algorithm.
    // (cuBLASLt's A is the row-major B, as in cudakit's transposition.)
    const std::pair<cublasLtMatmulPreferenceAttributes_t, const void*> alignments[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, operands.b},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, operands.a},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, operands.d},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, operands.d}};
    for (const auto& [attribute, pointer] : alignments) {
      const std::uint32_t alignment = alignment_of(pointer);
      check_status(raw.pref_set(pref, attribute, &alignment, sizeof alignment), "set alignment");
    }
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    check_status(raw.heuristic(handle, desc, first, second, c, c, pref, 1, &result, &found),
                 "cublasLtMatmulAlgoGetHeuristic");
    raw.pref_destroy(pref);
    if (found < 1) throw Error("cuBLASLt offers no algorithm for the raw matmul");
    algorithm = result.algo;
  }
  ~RawLtMatmul() {
    raw.layout_destroy(c);
    raw.layout_destroy(second);
    raw.layout_destroy(first);
    raw.desc_destroy(desc);
    raw.lt_destroy(handle);
  }
  RawLtMatmul(const RawLtMatmul&) = delete;
  RawLtMatmul& operator=(const RawLtMatmul&) = delete;
  // Not const: the matmul writes the workspace.
  void run(const void* a, const void* b, void* d, CUstream stream) {
    const float one = 1, zero = 0;
    check_status(raw.matmul(handle, desc, &one, b, first, a, second, &zero, d, c, d, c, &algorithm, workspace.data(),
                            workspace.size_bytes(), stream),
                 "cublasLtMatmul");
  }
};

// ---- results ----

double tflops(double flops, double seconds) { return seconds > 0 ? flops / seconds / 1e12 : 0.0; }

Result throughput_result(std::string name, const PairedSamples& s, double flops, double target) {
  Result r;
  r.name = std::move(name);
  r.group = "blas";
  r.unit = "TFLOP/s";
  r.better = Better::higher;
  r.target_ratio = target;
  for (double v : s.cudakit) r.cudakit.push_back(tflops(flops, v));
  for (double v : s.raw) r.raw.push_back(tflops(flops, v));
  return r;
}

Result peak_fraction_result(const Result& t) {
  Result r = t;
  r.name = t.name + ", % of bf16 peak";
  r.unit = "%";
  r.target_ratio = 0;  // reported
  for (double& v : r.cudakit) v = v / h200_bf16_dense_peak * 100;
  for (double& v : r.raw) v = v / h200_bf16_dense_peak * 100;
  return r;
}

// Fills a buffer with values in [-1, 1) on the stream (the data's content does not change
// the timing of a GEMM, but denormals and NaNs could).
template <class T>
DeviceBuffer<T> random_matrix(StreamRef s, std::size_t count, unsigned seed) {
  std::vector<T> host(count);
  for (std::size_t i = 0; i < count; ++i) {
    seed = seed * 1664525u + 1013904223u;
    host[i] = T(static_cast<float>(seed >> 8) / float(1u << 24) * 2.0f - 1.0f);
  }
  return upload(s, host);
}

bool blas_present() {
  if (blas_available()) return true;
  std::fprintf(stderr, "cudakit bench: the blas benchmarks are skipped: cuBLAS was not found (cudakit doctor says "
                       "where it looked)\n");
  return false;
}

// ---- Blas::gemm against cublasGemmEx ----

template <class T>
PairedSamples time_gemm(const Context& c, Stream& stream, int size, int ops) {
  const cudaDataType type = std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_16BF;
  const std::size_t count = std::size_t(size) * size;
  auto a = random_matrix<T>(stream, count, 1), b = random_matrix<T>(stream, count, 2);
  DeviceBuffer<T> out(stream, count, uninitialized), raw_out(stream, count, uninitialized);
  Blas blas(stream);
  RawCublas raw;
  RawHandle handle(raw, stream, blas.workspace_bytes());
  stream.synchronize();
  const float one = 1, zero = 0;
  return time_device(
      c.interleave(ops), stream,
      [&](int n) {
        for (int i = 0; i < n; ++i) blas.gemm(a, b, out, {.m = size, .n = size, .k = size});
      },
      [&](int n) {
        for (int i = 0; i < n; ++i)
          check_status(raw.gemm(handle.handle, CUBLAS_OP_N, CUBLAS_OP_N, size, size, size, &one, b.data(), type, size,
                                a.data(), type, size, &zero, raw_out.data(), type, size, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT),
                       "cublasGemmEx");
      });
}

std::vector<Result> gemm_large(const Context& c) {
  if (!blas_present()) return {};
  Stream stream(c.device);
  std::vector<Result> results;
  struct Case {
    const char* type;
    int size, ops;
  };
  const Case cases[] = {{"bf16", 4096, 50}, {"bf16", 8192, 10}, {"fp32", 4096, 5}, {"fp32", 8192, 2}};
  for (const Case& k : cases) {
    PairedSamples s = std::string(k.type) == "bf16" ? time_gemm<__nv_bfloat16>(c, stream, k.size, k.ops)
                                                     : time_gemm<float>(c, stream, k.size, k.ops);
    Result t = throughput_result("gemm " + std::string(k.type) + " " + std::to_string(k.size) + "^3", s,
                                 2.0 * k.size * k.size * k.size, 1 / 1.01);
    results.push_back(t);
    results.push_back(peak_fraction_result(t));
  }
  return results;
}

std::vector<Result> gemm_small(const Context& c) {
  if (!blas_present()) return {};
  Stream stream(c.device);
  std::vector<Result> results;
  for (int size : {64, 256}) {
    results.push_back(cost_result("gemm bf16 " + std::to_string(size) + "^3", "blas",
                                  time_gemm<__nv_bfloat16>(c, stream, size, 500), 1.03));
    results.push_back(
        cost_result("gemm fp32 " + std::to_string(size) + "^3", "blas", time_gemm<float>(c, stream, size, 500), 1.03));
  }
  return results;
}

// ---- BlasLt::matmul with GELU+bias against cublasLtMatmul ----

PairedSamples time_lt(const Context& c, Stream& stream, int m, int n, int k, int ops) {
  using bf16 = __nv_bfloat16;
  auto a = random_matrix<bf16>(stream, std::size_t(m) * k, 3), b = random_matrix<bf16>(stream, std::size_t(k) * n, 4);
  auto bias = random_matrix<bf16>(stream, n, 5);
  DeviceBuffer<bf16> out(stream, std::size_t(m) * n, uninitialized), raw_out(stream, std::size_t(m) * n, uninitialized);
  BlasLt lt(stream);
  RawCublas raw;
  RawLtMatmul raw_matmul(raw, stream, lt.workspace_bytes(), m, n, k,
                         {.a = a.data(), .b = b.data(), .d = raw_out.data(), .bias = bias.data()});
  const Gemm shape{.m = m, .n = n, .k = k};
  lt.matmul(a, b, bias, out, shape, Epilogue::gelu_bias);  // planned before the timing
  stream.synchronize();
  return time_device(
      c.interleave(ops), stream,
      [&](int count) {
        for (int i = 0; i < count; ++i) lt.matmul(a, b, bias, out, shape, Epilogue::gelu_bias);
      },
      [&](int count) {
        for (int i = 0; i < count; ++i) raw_matmul.run(a.data(), b.data(), raw_out.data(), stream.handle());
      });
}

std::vector<Result> lt_epilogue(const Context& c) {
  if (!blas_present()) return {};
  Stream stream(c.device);
  Result big = throughput_result("lt matmul gelu+bias bf16 4096^3", time_lt(c, stream, 4096, 4096, 4096, 50),
                                 2.0 * 4096.0 * 4096.0 * 4096.0, 1 / 1.02);
  return {big, peak_fraction_result(big),
          cost_result("lt matmul gelu+bias bf16 32x1024 * 1024x4096", "blas", time_lt(c, stream, 32, 4096, 1024, 500),
                      1.03)};
}

// ---- declared work around the cheapest real submission ----

#ifdef CUDAKIT_HAVE_TEST_KERNELS
std::vector<Result> declared_work(const Context& c) {
  RawPrimaryContext raw_context(c.device);
  Module module = Module::load(c.device, cudakit_kernels::test_fatbin());
  CUfunction empty = module.function("empty_kernel").handle();
  Stream stream(c.device);
  DeviceBuffer<float> a(stream, 256, zeroed), b(stream, 256, zeroed), out(stream, 256, zeroed);
  stream.synchronize();
  auto launch = raw_entry<driver::EntryId::LaunchKernel>();
  auto raw_launch = [&](CUstream s) { check_raw(launch(empty, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr), "cuLaunchKernel"); };
  Interleave plan = c.interleave(2000);
  auto synchronize = raw_entry<driver::EntryId::StreamSynchronize>();
  CUstream s = stream.handle();
  plan.between_batches = [&] { check_raw(synchronize(s), "cuStreamSynchronize"); };
  auto samples = time_host(
      plan,
      [&](int n) {
        for (int i = 0; i < n; ++i) enqueue(stream, reads(a, b), writes(out), raw_launch);
      },
      [&](int n) {
        for (int i = 0; i < n; ++i) raw_launch(s);
      });
  return {cost_result("declared work, 3 buffers, one stream", "blas", samples, 1.02)};
}
CUDAKIT_BENCHMARK("blas declared work", "blas", QuickRun::skip, declared_work);
#endif

// ---- a captured chain of GEMMs against the same chain on a stream ----

std::vector<Result> captured_chain(const Context& c) {
  if (!blas_present()) return {};
  using bf16 = __nv_bfloat16;
  constexpr int gemms = 8, batch = 32, width = 1024;
  Stream stream(c.device);
  Blas blas(stream);
  std::vector<DeviceBuffer<bf16>> weights, activations;
  activations.push_back(random_matrix<bf16>(stream, std::size_t(batch) * width, 6));
  for (int i = 0; i < gemms; ++i) {
    weights.push_back(random_matrix<bf16>(stream, std::size_t(width) * width, 7 + i));
    activations.emplace_back(stream, std::size_t(batch) * width, uninitialized);
  }
  auto chain = [&] {
    for (int i = 0; i < gemms; ++i)
      blas.gemm(activations[i], weights[i], activations[i + 1], {.m = batch, .n = width, .k = width});
  };
  chain();
  GraphExec exec = capture_nonempty(stream, chain).instantiate();
  stream.synchronize();
  PairedSamples s = time_device(
      c.interleave(50), stream,
      [&](int n) {
        for (int i = 0; i < n; ++i) exec.launch(stream);
      },
      [&](int n) {
        for (int i = 0; i < n; ++i) chain();
      });
  for (auto& v : s.cudakit) v /= gemms;
  for (auto& v : s.raw) v /= gemms;
  return {cost_result("8 gemms 32x1024x1024 bf16, graph vs stream, per gemm", "blas", s, 0)};
}

CUDAKIT_BENCHMARK("blas gemm large", "blas", QuickRun::skip, gemm_large);
CUDAKIT_BENCHMARK("blas gemm small", "blas", QuickRun::skip, gemm_small);
CUDAKIT_BENCHMARK("blas lt epilogue", "blas", QuickRun::skip, lt_epilogue);
CUDAKIT_BENCHMARK("blas captured chain", "blas", QuickRun::skip, captured_chain);

}  // namespace
}  // namespace cudakit::tool::bench
