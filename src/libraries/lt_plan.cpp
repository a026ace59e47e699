// cuBLASLt plans (lt_plan.hpp): descriptors built once per shape, the heuristic asked once.
#include "libraries/lt_plan.hpp"

#include <algorithm>
#include <cstdint>

#include "cudakit/blas_lt.hpp"
#include "libraries/blas_error.hpp"

namespace cudakit::detail {

namespace {

void mix(std::size_t& seed, std::uint64_t v) { seed ^= std::hash<std::uint64_t>{}(v) + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2); }

cublasLtEpilogue_t lt_epilogue(std::uint8_t epilogue) {
  switch (static_cast<Epilogue>(epilogue)) {
    case Epilogue::none: return CUBLASLT_EPILOGUE_DEFAULT;
    case Epilogue::bias: return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::relu: return CUBLASLT_EPILOGUE_RELU;
    case Epilogue::relu_bias: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case Epilogue::gelu: return CUBLASLT_EPILOGUE_GELU;
    case Epilogue::gelu_bias: return CUBLASLT_EPILOGUE_GELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// A matmul preference destroyed at the end of the scope (a failed destroy is parked).
struct Preference {
  const cublas::Api& api;
  cublasLtMatmulPreference_t handle = nullptr;
  ~Preference() {
    if (handle == nullptr) return;
    if (cublasStatus_t s = api.LtMatmulPreferenceDestroy(handle); s != CUBLAS_STATUS_SUCCESS)
      park_blas_error(s, cublas::Entry::LtMatmulPreferenceDestroy, "a heuristic's preference", Resource::none(),
                      "cuBLASLt preference release");
  }
};

void park_destroy_failure(cublasStatus_t s, cublas::Entry call) {
  if (s != CUBLAS_STATUS_SUCCESS) park_blas_error(s, call, "a cached matmul plan", Resource::none(), "cuBLASLt plan release");
}

}  // namespace

std::size_t LtPlanKeyHash::operator()(const LtPlanKey& k) const noexcept {
  std::size_t seed = 0;
  for (std::uint64_t v : {std::uint64_t(unsigned(k.m)), std::uint64_t(unsigned(k.n)), std::uint64_t(unsigned(k.k)),
                          std::uint64_t(unsigned(k.ld_first)), std::uint64_t(unsigned(k.ld_second)),
                          std::uint64_t(unsigned(k.ldc)), std::uint64_t(unsigned(k.type)),
                          std::uint64_t(unsigned(k.compute)),
                          std::uint64_t(k.op_first) | std::uint64_t(k.op_second) << 8 | std::uint64_t(k.epilogue) << 16,
                          std::uint64_t(k.align_first) | std::uint64_t(k.align_second) << 16 |
                              std::uint64_t(k.align_c) << 32 | std::uint64_t(k.align_bias) << 48})
    mix(seed, v);
  return seed;
}

LtPlanKey LtPlanKey::of(const ColumnMajorGemm& g, cudaDataType type, std::uint8_t epilogue, const void* first,
                        const void* second, const void* c, const void* bias) noexcept {
  return {g.m,
          g.n,
          g.k,
          g.ld_first,
          g.ld_second,
          g.ldc,
          type,
          g.compute,
          static_cast<std::uint8_t>(g.op_first),
          static_cast<std::uint8_t>(g.op_second),
          epilogue,
          alignment_of(first),
          alignment_of(second),
          alignment_of(c),
          bias != nullptr ? alignment_of(bias) : std::uint16_t{0}};
}

std::uint16_t alignment_of(const void* pointer) noexcept {
  auto p = reinterpret_cast<std::uintptr_t>(pointer);
  if (p == 0) return 256;
  return static_cast<std::uint16_t>(std::min<std::uintptr_t>(256, p & (~p + 1)));
}

LtPlan::LtPlan(const cublas::Api& api, cublasLtHandle_t handle, const LtPlanKey& key, std::size_t workspace_bytes,
               const void* bias, const Resource& resource, const std::function<std::string()>& operation)
    : api_(api) {
  using cublas::Entry;
  auto check = [&](cublasStatus_t s, Entry call) { check_blas(s, call, resource, operation); };
  const auto type = static_cast<cudaDataType>(key.type);
  const auto compute = static_cast<cublasComputeType_t>(key.compute);
  const cudaDataType scale = compute == CUBLAS_COMPUTE_64F ? CUDA_R_64F : CUDA_R_32F;
  try {
    check(api.LtMatmulDescCreate(&desc_, compute, scale), Entry::LtMatmulDescCreate);
    auto set = [&](cublasLtMatmulDescAttributes_t attribute, const auto& value) {
      check(api.LtMatmulDescSetAttribute(desc_, attribute, &value, sizeof value), Entry::LtMatmulDescSetAttribute);
    };
    set(CUBLASLT_MATMUL_DESC_TRANSA, std::int32_t{key.op_first});
    set(CUBLASLT_MATMUL_DESC_TRANSB, std::int32_t{key.op_second});
    set(CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<std::uint32_t>(lt_epilogue(key.epilogue)));
    if (bias != nullptr) set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
    bias_ = bias;

    // Column-major layouts of the stored matrices: cuBLAS's first operand is op_first of a
    // rows×cols matrix whose op is m×k, its second op_second of one whose op is k×n.
    const bool first_n = key.op_first == CUBLAS_OP_N, second_n = key.op_second == CUBLAS_OP_N;
    check(api.LtMatrixLayoutCreate(&first_, type, first_n ? key.m : key.k, first_n ? key.k : key.m, key.ld_first),
          Entry::LtMatrixLayoutCreate);
    check(api.LtMatrixLayoutCreate(&second_, type, second_n ? key.k : key.n, second_n ? key.n : key.k, key.ld_second),
          Entry::LtMatrixLayoutCreate);
    check(api.LtMatrixLayoutCreate(&c_, type, key.m, key.n, key.ldc), Entry::LtMatrixLayoutCreate);

    Preference preference{api};
    check(api.LtMatmulPreferenceCreate(&preference.handle), Entry::LtMatmulPreferenceCreate);
    auto prefer = [&](cublasLtMatmulPreferenceAttributes_t attribute, const auto& value) {
      check(api.LtMatmulPreferenceSetAttribute(preference.handle, attribute, &value, sizeof value),
            Entry::LtMatmulPreferenceSetAttribute);
    };
    prefer(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, std::uint64_t{workspace_bytes});
    prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, std::uint32_t{key.align_first});
    prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, std::uint32_t{key.align_second});
    prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, std::uint32_t{key.align_c});
    prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, std::uint32_t{key.align_c});

    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    check(api.LtMatmulAlgoGetHeuristic(handle, desc_, first_, second_, c_, c_, preference.handle, 1, &result, &found),
          Entry::LtMatmulAlgoGetHeuristic);
    if (found < 1 || result.state != CUBLAS_STATUS_SUCCESS)
      throw_blas_error(found < 1 ? CUBLAS_STATUS_NOT_SUPPORTED : result.state, Entry::LtMatmulAlgoGetHeuristic,
                       operation() + "; cuBLASLt has no algorithm for it within a workspace of " +
                           std::to_string(workspace_bytes) + " bytes",
                       resource);
    algorithm_ = result.algo;
  } catch (...) {
    release();  // what was made so far (a constructor that throws runs no destructor)
    throw;
  }
}

LtPlan::~LtPlan() { release(); }

void LtPlan::release() noexcept {
  if (c_ != nullptr) park_destroy_failure(api_.LtMatrixLayoutDestroy(std::exchange(c_, nullptr)), cublas::Entry::LtMatrixLayoutDestroy);
  if (second_ != nullptr)
    park_destroy_failure(api_.LtMatrixLayoutDestroy(std::exchange(second_, nullptr)), cublas::Entry::LtMatrixLayoutDestroy);
  if (first_ != nullptr)
    park_destroy_failure(api_.LtMatrixLayoutDestroy(std::exchange(first_, nullptr)), cublas::Entry::LtMatrixLayoutDestroy);
  if (desc_ != nullptr)
    park_destroy_failure(api_.LtMatmulDescDestroy(std::exchange(desc_, nullptr)), cublas::Entry::LtMatmulDescDestroy);
}

}  // namespace cudakit::detail
