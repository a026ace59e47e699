// Blas (blas.hpp): GEMM, strided-batched GEMM and GEMV as declared work on the handle's
// stream.
#include "cudakit/blas.hpp"

#include <string>
#include <type_traits>

#include "cudakit/declared_work.hpp"
#include "device/capture_tolerant_scope.hpp"
#include "libraries/blas_error.hpp"
#include "libraries/blas_handle.hpp"
#include "libraries/handle_pool.hpp"
#include "libraries/blas_shapes.hpp"

namespace cudakit {

namespace detail {
namespace {

/// alpha and beta as the compute type takes them: float for fp32 accumulation, double
/// for fp64.
struct Scalars {
  float alpha32, beta32;
  double alpha64, beta64;
  bool wide;
  Scalars(double alpha, double beta, cublasComputeType_t compute)
      : alpha32(static_cast<float>(alpha)), beta32(static_cast<float>(beta)), alpha64(alpha), beta64(beta),
        wide(compute == CUBLAS_COMPUTE_64F) {}
  const void* alpha() const { return wide ? static_cast<const void*>(&alpha64) : &alpha32; }
  const void* beta() const { return wide ? static_cast<const void*>(&beta64) : &beta32; }
};

// One cuBLAS GEMM call in column-major form: cuBLAS's first operand is `first` (our B, or
// A for a GEMV), its second `second`.
cublasStatus_t call_gemm(const BlasSlot& slot, const ColumnMajorGemm& g, const Scalars& s, const void* first,
                         const void* second, void* c, cudaDataType type, cudaDataType c_type, bool batched) {
  const cublas::Api& api = *slot.api;
  if (batched)
    return api.GemmStridedBatchedEx(slot.handle, g.op_first, g.op_second, g.m, g.n, g.k, s.alpha(), first, type,
                                    g.ld_first, g.stride_first, second, type, g.ld_second, g.stride_second, s.beta(),
                                    c, c_type, g.ldc, g.stride_c, g.count, g.compute, CUBLAS_GEMM_DEFAULT);
  return api.GemmEx(slot.handle, g.op_first, g.op_second, g.m, g.n, g.k, s.alpha(), first, type, g.ld_first, second,
                    type, g.ld_second, s.beta(), c, c_type, g.ldc, g.compute, CUBLAS_GEMM_DEFAULT);
}

/// "float", or "__nv_bfloat16 to float" for a GEMM that writes another type than it reads.
template <class T, class Out>
std::string gemm_type_words() {
  if constexpr (std::is_same_v<T, Out>) return BlasType<T>::name;
  else return std::string(BlasType<T>::name) + " to " + BlasType<Out>::name;
}

}  // namespace
}  // namespace detail

Blas::Blas(StreamRef stream)
    : slot_(detail::lease_handle<detail::BlasSlot>(stream, "Blas").release()), stream_(stream) {}

void Blas::reset() noexcept {
  detail::return_handle(std::unique_ptr<detail::BlasSlot>(std::exchange(slot_, nullptr)));
  stream_ = {};
}

std::size_t Blas::workspace_bytes() const noexcept { return slot_ != nullptr ? slot_->workspace.size_bytes() : 0; }

cublasHandle_t Blas::native_handle() const noexcept { return slot_ != nullptr ? slot_->handle : nullptr; }

template <blas_element T, gemm_output_for<T> Out>
void Blas::gemm_views(DeviceSpan<const T> a, DeviceSpan<const T> b, DeviceSpan<Out> c, const Gemm& shape,
                      const StridedBatch* batch) {
  const char* operation = batch != nullptr ? "Blas::gemm_strided_batched" : "Blas::gemm";
  const Resource res = detail::call_resource(slot_, stream_, "Blas (moved-from or default-constructed)");
  detail::ExclusiveUse::Guard guard(slot_->use, operation, res);
  const int device = res.device;
  constexpr cudaDataType type = detail::BlasType<T>::data;
  const detail::ColumnMajorGemm& g = slot_->last_gemm.check(operation, shape, batch, detail::views_of(a, b, c), type,
                                                            detail::BlasType<Out>::data, device);
  if (g.empty) return;
  const detail::Scalars scalars(shape.alpha, shape.beta, g.compute);
  detail::BlasSlot& slot = *slot_;
  enqueue(stream_, reads(a, b), writes(c, slot.workspace), [&](CUstream) {
    // cuBLAS may set the handle up on its first call (loading kernels, per-handle state):
    // inside a capture, relaxed mode keeps that out of the graph; the GEMM is captured as always.
    detail::CaptureTolerantScope tolerant(device);
    cublasStatus_t status =
        detail::call_gemm(slot, g, scalars, b.data(), a.data(), c.data(), type, detail::BlasType<Out>::data, batch);
    detail::check_blas(status, batch ? cublas::Entry::GemmStridedBatchedEx : cublas::Entry::GemmEx, res, [&] {
      return detail::describe_gemm(batch ? "strided-batched gemm" : "gemm", detail::gemm_type_words<T, Out>().c_str(),
                                   shape, batch);
    });
  });
}

template <blas_element T>
void Blas::gemv_views(DeviceSpan<const T> a, DeviceSpan<const T> x, DeviceSpan<T> y, const Gemv& shape) {
  const char* operation = "Blas::gemv";
  const Resource res = detail::call_resource(slot_, stream_, "Blas (moved-from or default-constructed)");
  detail::ExclusiveUse::Guard guard(slot_->use, operation, res);
  const int device = res.device;
  constexpr cudaDataType type = detail::BlasType<T>::data;
  const detail::ColumnMajorGemm g =
      detail::column_major_gemv(operation, shape, detail::views_of(a, x, y), type, device);
  if (g.empty) return;
  const detail::Scalars scalars(shape.alpha, shape.beta, g.compute);
  detail::BlasSlot& slot = *slot_;
  enqueue(stream_, reads(a, x), writes(y, slot.workspace), [&](CUstream) {
    detail::CaptureTolerantScope tolerant(device);  // as in gemm_views
    cublasStatus_t status = detail::call_gemm(slot, g, scalars, a.data(), x.data(), y.data(), type, type, false);
    detail::check_blas(status, cublas::Entry::GemmEx, res,
                       [&] { return detail::describe_gemv(detail::BlasType<T>::name, shape); });
  });
}

#define CUDAKIT_BLAS_INSTANTIATE(T)                                                                                  \
  template void Blas::gemm_views<T, T>(DeviceSpan<const T>, DeviceSpan<const T>, DeviceSpan<T>, const Gemm&,        \
                                       const StridedBatch*);                                                        \
  template void Blas::gemv_views<T>(DeviceSpan<const T>, DeviceSpan<const T>, DeviceSpan<T>, const Gemv&);
CUDAKIT_BLAS_INSTANTIATE(float)
CUDAKIT_BLAS_INSTANTIATE(double)
CUDAKIT_BLAS_INSTANTIATE(__half)
CUDAKIT_BLAS_INSTANTIATE(__nv_bfloat16)
template void Blas::gemm_views<__half, float>(DeviceSpan<const __half>, DeviceSpan<const __half>, DeviceSpan<float>,
                                              const Gemm&, const StridedBatch*);
template void Blas::gemm_views<__nv_bfloat16, float>(DeviceSpan<const __nv_bfloat16>,
                                                     DeviceSpan<const __nv_bfloat16>, DeviceSpan<float>, const Gemm&,
                                                     const StridedBatch*);
#undef CUDAKIT_BLAS_INSTANTIATE

}  // namespace cudakit
