// The fake cuBLAS and cuBLASLt (fake_blas.hpp): handles, GEMMs and matmuls computed on the
// host, on the fake driver's memory and streams.
#include "fake_blas.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "fake_driver.hpp"

namespace cudakit::fake {

namespace {

using cublas::Entry;

Blas* g_blas = nullptr;

Blas& B() { return Blas::current(); }

// ---- interception: counts, log, scripted faults ----

bool intercept(Entry e, cublasStatus_t* out) {
  Blas& b = B();
  std::lock_guard l(b.mutex);
  int n = ++b.call_counts[static_cast<std::size_t>(e)];
  b.call_log.push_back(e);
  for (const auto& f : b.faults) {
    if (f.entry == e && (f.nth == 0 || f.nth == n)) {
      *out = f.status;
      b.failures.emplace_back(e, f.status);
      return true;
    }
  }
  return false;
}

// Marks this thread as inside the fake for one entry's length: what the fake allocates
// (its log, its ledger, the host GEMMs) is not counted as cudakit's (allocation_counter.hpp).
struct InsideFake {
  InsideFake() noexcept { ++inside_fake_driver; }
  ~InsideFake() { --inside_fake_driver; }
  InsideFake(const InsideFake&) = delete;
  InsideFake& operator=(const InsideFake&) = delete;
};

// The start of every entry: marked as inside the fake, counted, logged, and failed when a
// fault is scripted for it.
#define CUDAKIT_FAKE_ENTRY(entry)                        \
  InsideFake inside_fake;                                \
  if (cublasStatus_t injected = CUBLAS_STATUS_SUCCESS;   \
      intercept(entry, &injected))                       \
  return injected

void misuse(const std::string& what) {
  std::lock_guard l(B().mutex);
  B().misuse.push_back(what);
}

void created(const char* kind, const void* p) {
  std::lock_guard l(B().mutex);
  B().ledger[kind].insert(p);
}

bool destroyed(const char* kind, const void* p) {
  std::lock_guard l(B().mutex);
  if (B().ledger[kind].erase(p) == 0) {
    B().misuse.push_back(std::string("destroyed ") + kind + " that is not live (double destroy or never created)");
    return false;
  }
  return true;
}

bool live(const char* kind, const void* p) {
  std::lock_guard l(B().mutex);
  auto it = B().ledger.find(kind);
  return it != B().ledger.end() && it->second.count(p) != 0;
}

// ---- objects ----

struct Handle {
  int device = -1;
  CUstream stream = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  std::atomic<int> in_call{0};
};

struct LtHandle {
  int device = -1;
  std::atomic<int> in_call{0};
};

struct Desc {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType scale = CUDA_R_32F;
  std::int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  std::uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
};

struct Layout {
  cudaDataType type = CUDA_R_32F;
  std::uint64_t rows = 0, cols = 0;
  std::int64_t ld = 0;
};

struct Preference {
  std::uint64_t max_workspace = 0;
};

// The name the ledger files each kind of object under (Blas::live takes it).
template <class T>
struct Kind;
template <>
struct Kind<Handle> {
  static constexpr const char* name = "handle";
};
template <>
struct Kind<LtHandle> {
  static constexpr const char* name = "lt handle";
};
template <>
struct Kind<Desc> {
  static constexpr const char* name = "matmul desc";
};
template <>
struct Kind<Layout> {
  static constexpr const char* name = "layout";
};
template <>
struct Kind<Preference> {
  static constexpr const char* name = "preference";
};

// Files a new object in the ledger and hands it out as the library's opaque type.
template <class T, class Out>
cublasStatus_t hand_out(T* object, Out* out) {
  *out = reinterpret_cast<Out>(object);
  created(Kind<T>::name, object);
  return CUBLAS_STATUS_SUCCESS;
}

// A handle (cuBLAS's or cuBLASLt's) for the current context's device, made by `call`; an
// allocation, so refused in a strict capture as the library's would be.
template <class T, class Out>
cublasStatus_t create_handle(Out* out, const char* call) {
  if (out == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  int device = device_of(current_context());
  if (device < 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (unsafe_call(call) != CUDA_SUCCESS) {
    misuse(std::string(call) + " during a capture in a strict mode: it allocates, which invalidated the capture");
    return CUBLAS_STATUS_ALLOC_FAILED;
  }
  auto* h = new T;
  h->device = device;
  return hand_out(h, out);
}

// Takes an object out of the ledger and frees it; `not_live` when it is not there.
template <class T, class In>
cublasStatus_t destroy_object(In object, cublasStatus_t not_live) {
  auto* p = reinterpret_cast<T*>(object);
  if (!destroyed(Kind<T>::name, p)) return not_live;
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}

// Frees an object left in the ledger, as the type its kind names.
template <class... T>
void free_as_kind(const std::string& kind, const void* p) {
  (void)((kind == Kind<T>::name ? (delete static_cast<const T*>(p), true) : false) || ...);
}
void free_object(const std::string& kind, const void* p) {
  free_as_kind<Handle, LtHandle, Desc, Layout, Preference>(kind, p);
}

constexpr std::uint64_t algorithm_mark = 0xc0ffee;
constexpr std::size_t algorithm_workspace = 4096;  // what the fake's algorithms need

// One GEMM's handle in use for the call's length: notes a second thread arriving.
template <class H>
class InCall {
 public:
  InCall(H* h, const char* call) : h_(h) {
    if (h_->in_call.fetch_add(1) != 0)
      misuse(std::string(call) + ": the handle was used by two threads at once");
  }
  ~InCall() { h_->in_call.fetch_sub(1); }

 private:
  H* h_;
};

void check_device(int handle_device, const char* call) {
  int current = device_of(current_context());
  if (current != handle_device)
    misuse(std::string(call) + ": the handle belongs to device " + std::to_string(handle_device) +
           " but the current context is device " + std::to_string(current) + "'s");
}

// ---- element access ----

std::size_t element_bytes(cudaDataType t) {
  switch (t) {
    case CUDA_R_64F: return 8;
    case CUDA_R_16F:
    case CUDA_R_16BF: return 2;
    default: return 4;
  }
}

double load(const void* base, std::size_t i, cudaDataType t) {
  switch (t) {
    case CUDA_R_64F: return static_cast<const double*>(base)[i];
    case CUDA_R_16F: return __half2float(static_cast<const __half*>(base)[i]);
    case CUDA_R_16BF: return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
    default: return static_cast<const float*>(base)[i];
  }
}

void store(void* base, std::size_t i, cudaDataType t, double v) {
  switch (t) {
    case CUDA_R_64F: static_cast<double*>(base)[i] = v; break;
    case CUDA_R_16F: static_cast<__half*>(base)[i] = __float2half(static_cast<float>(v)); break;
    case CUDA_R_16BF: static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16(static_cast<float>(v)); break;
    default: static_cast<float*>(base)[i] = static_cast<float>(v); break;
  }
}

bool known_type(cudaDataType t) { return t == CUDA_R_32F || t == CUDA_R_64F || t == CUDA_R_16F || t == CUDA_R_16BF; }

bool compute_fits(cublasComputeType_t c, cudaDataType t) {
  if (t == CUDA_R_64F) return c == CUBLAS_COMPUTE_64F;
  if (c == CUBLAS_COMPUTE_32F_FAST_TF32) return t == CUDA_R_32F;
  return c == CUBLAS_COMPUTE_32F;
}

// ---- one column-major GEMM on the host ----

struct HostGemm {
  cublasOperation_t transa, transb;
  int m, n, k;
  double alpha, beta;
  const void* a;
  int lda;
  const void* b;
  int ldb;
  void* c;
  int ldc;
  cudaDataType type;
  std::uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  cudaDataType c_type = type;  // C's type: A's, or float for half and bf16 inputs

  // Elements a stored column-major rows×cols matrix spans.
  static std::size_t span(int rows, int cols, int ld) {
    return rows == 0 || cols == 0 ? 0 : static_cast<std::size_t>(cols - 1) * ld + rows;
  }
  std::size_t a_elements() const { return transa == CUBLAS_OP_N ? span(m, k, lda) : span(k, m, lda); }
  std::size_t b_elements() const { return transb == CUBLAS_OP_N ? span(k, n, ldb) : span(n, k, ldb); }
  std::size_t c_elements() const { return span(m, n, ldc); }

  void compute() const {
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < m; ++i) {
        double sum = 0;
        for (int p = 0; p < k; ++p) {
          double x = load(a, transa == CUBLAS_OP_N ? i + std::size_t(p) * lda : p + std::size_t(i) * lda, type);
          double y = load(b, transb == CUBLAS_OP_N ? p + std::size_t(j) * ldb : j + std::size_t(p) * ldb, type);
          sum += x * y;
        }
        const std::size_t at = i + std::size_t(j) * ldc;
        double v = alpha * sum + (beta != 0 ? beta * load(c, at, c_type) : 0.0);  // beta 0: C is not read
        if (epilogue & CUBLASLT_EPILOGUE_BIAS) v += load(bias, static_cast<std::size_t>(i), type);
        if ((epilogue & CUBLASLT_EPILOGUE_RELU) && v < 0) v = 0;
        if (epilogue & CUBLASLT_EPILOGUE_GELU)
          v = 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
        store(c, at, c_type, v);
      }
    }
  }
};

// Whether [p, p + bytes) lies in one fake allocation.
bool in_memory(const void* p, std::size_t bytes) {
  if (bytes == 0) return true;
  std::uintptr_t base = 0;
  const Allocation* a = Driver::current().allocation_of(reinterpret_cast<std::uintptr_t>(p), &base);
  return a != nullptr && reinterpret_cast<std::uintptr_t>(p) + bytes <= base + a->bytes;
}

// Runs `work` on `s` now, or records it as a node of the capture `s` is in; `accesses`
// tells the ordering model what it touches.
cublasStatus_t submit(CUstream s, const char* what, std::function<void(CUstream)> work) {
  Driver& d = Driver::current();
  {
    std::lock_guard l(d.mutex);
    if (s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) {
      misuse(std::string(what) + " on the legacy/default stream (DESIGN 1)");
      return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (d.stream(s) == nullptr) {
      misuse(std::string(what) + " on a stream the fake driver does not know");
      return CUBLAS_STATUS_EXECUTION_FAILED;
    }
  }
  auto replay = [work](CUstream on) {
    Driver::current().tick(on);
    work(on);
    return CUDA_SUCCESS;
  };
  CUresult r = CUDA_SUCCESS;
  if (capture_operation(s, CU_GRAPH_NODE_TYPE_KERNEL, what, replay, &r))
    return r == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
  replay(s);
  return CUBLAS_STATUS_SUCCESS;
}

bool capturing(CUstream s) {
  Driver& d = Driver::current();
  std::lock_guard l(d.mutex);
  FakeStream* fs = d.stream(s);
  return fs != nullptr && fs->capturing;
}

// The bytes that `batch` operands of `one` elements each, `stride` elements apart, span.
std::size_t operand_bytes(std::size_t one, long long stride, int batch, std::size_t element_size) {
  if (one == 0) return 0;
  return (static_cast<std::size_t>(std::max(batch, 1) - 1) * static_cast<std::size_t>(stride) + one) * element_size;
}

// The ordering model's view of one GEMM: each operand read, C written, the workspace written.
void note_accesses(CUstream on, const HostGemm& g, const char* what, long long stride_a, long long stride_b,
                   long long stride_c, int batch, const void* workspace, std::size_t workspace_bytes) {
  Driver& d = Driver::current();
  const std::size_t es = element_bytes(g.type);
  const std::string w(what);
  auto address = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p); };
  d.access(on, address(g.a), operand_bytes(g.a_elements(), stride_a, batch, es), false, w + " A");
  d.access(on, address(g.b), operand_bytes(g.b_elements(), stride_b, batch, es), false, w + " B");
  if (g.bias != nullptr) d.access(on, address(g.bias), g.m * es, false, w + " bias");
  d.access(on, address(g.c), operand_bytes(g.c_elements(), stride_c, batch, element_bytes(g.c_type)), true, w + " C");
  if (workspace != nullptr) d.access(on, address(workspace), workspace_bytes, true, w + " workspace");
}

// Checks cuBLAS's own argument rules and that every operand lies in device memory.
cublasStatus_t validate(const HostGemm& g, const char* call, long long stride_a, long long stride_b, long long stride_c,
                        int batch) {
  if (g.m < 0 || g.n < 0 || g.k < 0 || batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (g.lda < std::max(1, g.transa == CUBLAS_OP_N ? g.m : g.k)) return CUBLAS_STATUS_INVALID_VALUE;
  if (g.ldb < std::max(1, g.transb == CUBLAS_OP_N ? g.k : g.n)) return CUBLAS_STATUS_INVALID_VALUE;
  if (g.ldc < std::max(1, g.m)) return CUBLAS_STATUS_INVALID_VALUE;
  if (!known_type(g.type)) return CUBLAS_STATUS_NOT_SUPPORTED;
  const std::size_t es = element_bytes(g.type);
  if (!in_memory(g.a, operand_bytes(g.a_elements(), stride_a, batch, es)) ||
      !in_memory(g.b, operand_bytes(g.b_elements(), stride_b, batch, es)) ||
      !in_memory(g.c, operand_bytes(g.c_elements(), stride_c, batch, element_bytes(g.c_type))) ||
      (g.bias != nullptr && !in_memory(g.bias, g.m * es))) {
    misuse(std::string(call) + ": an operand lies outside device memory (the real one would fault)");
    return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  return CUBLAS_STATUS_SUCCESS;
}

double scalar(const void* p, bool wide) { return wide ? *static_cast<const double*>(p) : *static_cast<const float*>(p); }

// ---- cuBLAS ----

cublasStatus_t Create(cublasHandle_t* out) {
  CUDAKIT_FAKE_ENTRY(Entry::Create);
  return create_handle<Handle>(out, "cublasCreate_v2");
}

cublasStatus_t Destroy(cublasHandle_t handle) {
  CUDAKIT_FAKE_ENTRY(Entry::Destroy);
  return destroy_object<Handle>(handle, CUBLAS_STATUS_NOT_INITIALIZED);
}

cublasStatus_t SetStream(cublasHandle_t handle, cudaStream_t stream) {
  CUDAKIT_FAKE_ENTRY(Entry::SetStream);
  auto* h = reinterpret_cast<Handle*>(handle);
  if (!live("handle", h)) return CUBLAS_STATUS_NOT_INITIALIZED;
  InCall guard(h, "cublasSetStream_v2");
  if (stream == nullptr) misuse("cublasSetStream_v2 with the legacy/default stream (DESIGN 1)");
  h->stream = reinterpret_cast<CUstream>(stream);
  h->workspace = nullptr;  // as documented: setting the stream resets the workspace to cuBLAS's own
  h->workspace_bytes = 0;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t SetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes) {
  CUDAKIT_FAKE_ENTRY(Entry::SetWorkspace);
  auto* h = reinterpret_cast<Handle*>(handle);
  if (!live("handle", h)) return CUBLAS_STATUS_NOT_INITIALIZED;
  InCall guard(h, "cublasSetWorkspace_v2");
  if (reinterpret_cast<std::uintptr_t>(workspace) % 256 != 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (workspace != nullptr && !in_memory(workspace, bytes)) {
    misuse("cublasSetWorkspace_v2: the workspace is not device memory of that size");
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  h->workspace = workspace;
  h->workspace_bytes = bytes;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t gemm(Entry entry, cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                    int k, const void* alpha, const void* a, cudaDataType ta, int lda, long long stride_a, const void* b,
                    cudaDataType tb, int ldb, long long stride_b, const void* beta, void* c, cudaDataType tc, int ldc,
                    long long stride_c, int batch, cublasComputeType_t compute) {
  const char* call = cublas::name_of(entry);
  auto* h = reinterpret_cast<Handle*>(handle);
  if (!live("handle", h)) return CUBLAS_STATUS_NOT_INITIALIZED;
  InCall guard(h, call);
  check_device(h->device, call);
  // cuBLAS's combinations cudakit uses: one type throughout, or half and bf16 inputs with a
  // float output.
  const bool widened = tc == CUDA_R_32F && (ta == CUDA_R_16F || ta == CUDA_R_16BF);
  if (ta != tb || (ta != tc && !widened)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (!compute_fits(compute, ta)) return CUBLAS_STATUS_NOT_SUPPORTED;
  const bool wide = compute == CUBLAS_COMPUTE_64F;
  HostGemm g{transa, transb, m, n, k, scalar(alpha, wide), scalar(beta, wide), a, lda, b, ldb, c, ldc, ta};
  g.c_type = tc;
  if (cublasStatus_t s = validate(g, call, stride_a, stride_b, stride_c, batch); s != CUBLAS_STATUS_SUCCESS) return s;
  {
    std::lock_guard l(B().mutex);
    B().gemm_log.push_back({entry, transa, transb, m, n, k, lda, ldb, ldc, stride_a, stride_b, stride_c, batch, ta,
                            compute, CUBLASLT_EPILOGUE_DEFAULT, h->stream});
  }
  if (capturing(h->stream) && h->workspace == nullptr)
    misuse(std::string(call) + " captured on a handle without a workspace: cuBLAS would allocate inside the capture");
  if (B().during_gemm) B().during_gemm();
  const void* workspace = h->workspace;
  const std::size_t workspace_bytes = h->workspace_bytes;
  return submit(h->stream, call, [=](CUstream on) {
    note_accesses(on, g, call, stride_a, stride_b, stride_c, batch, workspace, workspace_bytes);
    const std::size_t es = element_bytes(g.type);
    for (int i = 0; i < batch; ++i) {
      HostGemm one = g;
      one.a = static_cast<const char*>(g.a) + i * stride_a * es;
      one.b = static_cast<const char*>(g.b) + i * stride_b * es;
      one.c = static_cast<char*>(g.c) + i * stride_c * element_bytes(g.c_type);
      one.compute();
    }
  });
}

cublasStatus_t GemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                      const void* alpha, const void* a, cudaDataType ta, int lda, const void* b, cudaDataType tb, int ldb,
                      const void* beta, void* c, cudaDataType tc, int ldc, cublasComputeType_t compute,
                      cublasGemmAlgo_t) {
  CUDAKIT_FAKE_ENTRY(Entry::GemmEx);
  return gemm(Entry::GemmEx, handle, transa, transb, m, n, k, alpha, a, ta, lda, 0, b, tb, ldb, 0, beta, c, tc, ldc, 0,
              1, compute);
}

cublasStatus_t GemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                    int n, int k, const void* alpha, const void* a, cudaDataType ta, int lda,
                                    long long stride_a, const void* b, cudaDataType tb, int ldb, long long stride_b,
                                    const void* beta, void* c, cudaDataType tc, int ldc, long long stride_c, int batch,
                                    cublasComputeType_t compute, cublasGemmAlgo_t) {
  CUDAKIT_FAKE_ENTRY(Entry::GemmStridedBatchedEx);
  return gemm(Entry::GemmStridedBatchedEx, handle, transa, transb, m, n, k, alpha, a, ta, lda, stride_a, b, tb, ldb,
              stride_b, beta, c, tc, ldc, stride_c, batch, compute);
}

// ---- cuBLASLt ----

cublasStatus_t LtCreate(cublasLtHandle_t* out) {
  CUDAKIT_FAKE_ENTRY(Entry::LtCreate);
  return create_handle<LtHandle>(out, "cublasLtCreate");
}

cublasStatus_t LtDestroy(cublasLtHandle_t handle) {
  CUDAKIT_FAKE_ENTRY(Entry::LtDestroy);
  return destroy_object<LtHandle>(handle, CUBLAS_STATUS_NOT_INITIALIZED);
}

std::size_t LtGetVersion() {
  std::lock_guard l(B().mutex);
  ++B().call_counts[static_cast<std::size_t>(Entry::LtGetVersion)];
  B().call_log.push_back(Entry::LtGetVersion);
  return 130100;
}

cublasStatus_t LtMatmulDescCreate(cublasLtMatmulDesc_t* out, cublasComputeType_t compute, cudaDataType_t scale) {
  CUDAKIT_FAKE_ENTRY(Entry::LtMatmulDescCreate);
  if (out == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* d = new Desc;
  d->compute = compute;
  d->scale = scale;
  return hand_out(d, out);
}

cublasStatus_t LtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  CUDAKIT_FAKE_ENTRY(Entry::LtMatmulDescDestroy);
  return destroy_object<Desc>(desc, CUBLAS_STATUS_INVALID_VALUE);
}

template <class T>
bool read_attribute(const void* buf, std::size_t size, T& into) {
  if (buf == nullptr || size != sizeof(T)) return false;
  std::memcpy(&into, buf, sizeof(T));
  return true;
}

cublasStatus_t LtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
                                        const void* buf, size_t size) {
  CUDAKIT_FAKE_ENTRY(Entry::LtMatmulDescSetAttribute);
  auto* d = reinterpret_cast<Desc*>(desc);
  if (!live("matmul desc", d)) return CUBLAS_STATUS_INVALID_VALUE;
  bool ok = true;
  switch (attribute) {
    case CUBLASLT_MATMUL_DESC_TRANSA: ok = read_attribute(buf, size, d->transa); break;
    case CUBLASLT_MATMUL_DESC_TRANSB: ok = read_attribute(buf, size, d->transb); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: ok = read_attribute(buf, size, d->epilogue); break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: ok = read_attribute(buf, size, d->bias); break;
    default: ok = buf != nullptr;
  }
  return ok ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t LtMatrixLayoutCreate(cublasLtMatrixLayout_t* out, cudaDataType type, uint64_t rows, uint64_t cols,
                                    int64_t ld) {
  CUDAKIT_FAKE_ENTRY(Entry::LtMatrixLayoutCreate);
  if (out == nullptr || ld < std::max<int64_t>(1, static_cast<int64_t>(rows))) return CUBLAS_STATUS_INVALID_VALUE;
  return hand_out(new Layout{type, rows, cols, ld}, out);
}

cublasStatus_t LtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  CUDAKIT_FAKE_ENTRY(Entry::LtMatrixLayoutDestroy);
  return destroy_object<Layout>(layout, CUBLAS_STATUS_INVALID_VALUE);
}

cublasStatus_t LtMatmulPreferenceCreate(cublasLtMatmulPreference_t* out) {
  CUDAKIT_FAKE_ENTRY(Entry::LtMatmulPreferenceCreate);
  if (out == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  return hand_out(new Preference, out);
}

cublasStatus_t LtMatmulPreferenceDestroy(cublasLtMatmulPreference_t preference) {
  CUDAKIT_FAKE_ENTRY(Entry::LtMatmulPreferenceDestroy);
  return destroy_object<Preference>(preference, CUBLAS_STATUS_INVALID_VALUE);
}

cublasStatus_t LtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t preference,
                                              cublasLtMatmulPreferenceAttributes_t attribute, const void* buf,
                                              size_t size) {
  CUDAKIT_FAKE_ENTRY(Entry::LtMatmulPreferenceSetAttribute);
  auto* p = reinterpret_cast<Preference*>(preference);
  if (!live("preference", p)) return CUBLAS_STATUS_INVALID_VALUE;
  if (attribute == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES)
    return read_attribute(buf, size, p->max_workspace) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
  std::uint32_t alignment = 0;
  return read_attribute(buf, size, alignment) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

// A matmul's column-major problem from its descriptors; false when they disagree.
bool problem_of(const Desc& d, const Layout& a, const Layout& b, const Layout& c, const Layout& dl, HostGemm& g) {
  const bool ta = d.transa != CUBLAS_OP_N, tb = d.transb != CUBLAS_OP_N;
  const std::uint64_t m = ta ? a.cols : a.rows, k = ta ? a.rows : a.cols;
  const std::uint64_t kb = tb ? b.cols : b.rows, n = tb ? b.rows : b.cols;
  if (k != kb || c.rows != m || c.cols != n || dl.rows != m || dl.cols != n || c.ld != dl.ld) return false;
  if (a.type != b.type || a.type != c.type || a.type != dl.type || !known_type(a.type)) return false;
  if (!compute_fits(d.compute, a.type)) return false;
  const bool wants_bias = (d.epilogue & CUBLASLT_EPILOGUE_BIAS) != 0;
  if (wants_bias != (d.bias != nullptr)) return false;
  g = HostGemm{static_cast<cublasOperation_t>(d.transa), static_cast<cublasOperation_t>(d.transb), int(m), int(n),
               int(k), 1.0, 0.0, nullptr, int(a.ld), nullptr, int(b.ld), nullptr, int(c.ld), a.type, d.epilogue,
               d.bias};
  return true;
}

cublasStatus_t LtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                        cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                        cublasLtMatmulPreference_t preference, int requested,
                                        cublasLtMatmulHeuristicResult_t results[], int* count) {
  CUDAKIT_FAKE_ENTRY(Entry::LtMatmulAlgoGetHeuristic);
  auto* h = reinterpret_cast<LtHandle*>(handle);
  if (!live("lt handle", h) || !live("matmul desc", desc) || !live("layout", a) || !live("layout", b) ||
      !live("layout", c) || !live("layout", d) || !live("preference", preference))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (requested <= 0 || results == nullptr || count == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  InCall guard(h, "cublasLtMatmulAlgoGetHeuristic");
  HostGemm g{};
  if (!problem_of(*reinterpret_cast<Desc*>(desc), *reinterpret_cast<Layout*>(a), *reinterpret_cast<Layout*>(b),
                  *reinterpret_cast<Layout*>(c), *reinterpret_cast<Layout*>(d), g)) {
    misuse("cublasLtMatmulAlgoGetHeuristic: the descriptors disagree (shapes, types, epilogue and bias)");
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const auto* p = reinterpret_cast<Preference*>(preference);
  int offered = p->max_workspace >= algorithm_workspace ? B().heuristic_results : 0;
  *count = std::min(requested, offered);
  for (int i = 0; i < *count; ++i) {
    results[i] = {};
    results[i].algo.data[0] = algorithm_mark;
    results[i].workspaceSize = algorithm_workspace;
    results[i].state = CUBLAS_STATUS_SUCCESS;
    results[i].wavesCount = 1.0f;
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t LtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* a,
                        cublasLtMatrixLayout_t a_layout, const void* b, cublasLtMatrixLayout_t b_layout,
                        const void* beta, const void* c, cublasLtMatrixLayout_t c_layout, void* d,
                        cublasLtMatrixLayout_t d_layout, const cublasLtMatmulAlgo_t* algorithm, void* workspace,
                        size_t workspace_bytes, cudaStream_t stream) {
  CUDAKIT_FAKE_ENTRY(Entry::LtMatmul);
  auto* h = reinterpret_cast<LtHandle*>(handle);
  if (!live("lt handle", h) || !live("matmul desc", desc) || !live("layout", a_layout) || !live("layout", b_layout) ||
      !live("layout", c_layout) || !live("layout", d_layout))
    return CUBLAS_STATUS_INVALID_VALUE;
  InCall guard(h, "cublasLtMatmul");
  check_device(h->device, "cublasLtMatmul");
  if (algorithm == nullptr || algorithm->data[0] != algorithm_mark) return CUBLAS_STATUS_INVALID_VALUE;
  if (workspace_bytes < algorithm_workspace || workspace == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (c != d) return CUBLAS_STATUS_NOT_SUPPORTED;  // cudakit computes in place
  const Desc& dd = *reinterpret_cast<Desc*>(desc);
  HostGemm g{};
  if (!problem_of(dd, *reinterpret_cast<Layout*>(a_layout), *reinterpret_cast<Layout*>(b_layout),
                  *reinterpret_cast<Layout*>(c_layout), *reinterpret_cast<Layout*>(d_layout), g)) {
    misuse("cublasLtMatmul: the descriptors disagree (shapes, types, epilogue and bias)");
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const bool wide = dd.scale == CUDA_R_64F;
  g.alpha = scalar(alpha, wide);
  g.beta = scalar(beta, wide);
  g.a = a;
  g.b = b;
  g.c = d;
  if (cublasStatus_t s = validate(g, "cublasLtMatmul", 0, 0, 0, 1); s != CUBLAS_STATUS_SUCCESS) return s;
  if (!in_memory(workspace, workspace_bytes)) {
    misuse("cublasLtMatmul: the workspace is not device memory of that size");
    return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  CUstream s = reinterpret_cast<CUstream>(stream);
  {
    std::lock_guard l(B().mutex);
    B().gemm_log.push_back({Entry::LtMatmul, g.transa, g.transb, g.m, g.n, g.k, g.lda, g.ldb, g.ldc, 0, 0, 0, 1, g.type,
                            dd.compute, static_cast<cublasLtEpilogue_t>(dd.epilogue), s});
  }
  if (B().during_gemm) B().during_gemm();
  return submit(s, "cublasLtMatmul", [=](CUstream on) {
    note_accesses(on, g, "cublasLtMatmul", 0, 0, 0, 1, workspace, workspace_bytes);
    g.compute();
  });
}

#undef CUDAKIT_FAKE_ENTRY

}  // namespace

Blas::Blas() { g_blas = this; }

Blas::~Blas() {
  // What failed releases (or a leaking test) left behind: freed here, each as its kind.
  for (auto& [kind, objects] : ledger)
    for (const void* p : objects) free_object(kind, p);
  if (g_blas == this) g_blas = nullptr;
  cublas::testing::reset();
}

Blas& Blas::current() {
  if (g_blas == nullptr) {
    std::fprintf(stderr, "fake cuBLAS: used with no fake::Blas alive\n");
    std::abort();
  }
  return *g_blas;
}

void Blas::install() {
  cublas::Api table;
#define CUDAKIT_X(name, symbol, type) table.name = &name;
  CUDAKIT_CUBLAS_ENTRIES(CUDAKIT_X)
#undef CUDAKIT_X
  table.path = "(fake libcublas)";
  table.lt_path = "(fake libcublasLt)";
  table.version = 130100;
  cublas::testing::install(table);
}

void Blas::fail(cublas::Entry entry, int nth, cublasStatus_t status) {
  std::lock_guard l(mutex);
  faults.push_back({entry, nth, status});
}

void Blas::clear_faults() {
  std::lock_guard l(mutex);
  faults.clear();
}

int Blas::calls(cublas::Entry entry) const {
  std::lock_guard l(mutex);
  return call_counts[static_cast<std::size_t>(entry)];
}

std::vector<cublas::Entry> Blas::log() const {
  std::lock_guard l(mutex);
  return call_log;
}

void Blas::clear_log() {
  std::lock_guard l(mutex);
  call_log.clear();
  std::fill(std::begin(call_counts), std::end(call_counts), 0);
  gemm_log.clear();
}

std::vector<BlasGemmCall> Blas::gemms() const {
  std::lock_guard l(mutex);
  return gemm_log;
}

std::size_t Blas::live(const std::string& kind) const {
  std::lock_guard l(mutex);
  auto it = ledger.find(kind);
  return it == ledger.end() ? 0 : it->second.size();
}

std::vector<std::string> Blas::problems() const {
  std::lock_guard l(mutex);
  std::vector<std::string> out = misuse;
  for (const auto& [kind, objects] : ledger)
    if (!objects.empty()) out.push_back(std::to_string(objects.size()) + " " + kind + "(s) leaked");
  return out;
}

std::vector<std::pair<cublas::Entry, cublasStatus_t>> Blas::failed_calls() const {
  std::lock_guard l(mutex);
  return failures;
}

}  // namespace cudakit::fake
