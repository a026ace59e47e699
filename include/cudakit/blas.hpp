// cuBLAS on cudakit streams and buffers: GEMM, strided-batched GEMM and GEMV for float,
// double, __half and __nv_bfloat16, each ordered and kept alive like a typed launch.
//
//   cudakit::Blas blas(stream);                                  // a cuBLAS handle bound to the stream
//   blas.gemm(x, w, y, {.m = batch, .n = 4096, .k = 1024});      // y = x·w, row-major, fp32 accumulation
//   blas.gemm(a, b, c, {.m = m, .n = n, .k = k, .transpose_b = true, .alpha = 0.5, .beta = 1.0});
//   blas.gemm_strided_batched(q, kt, scores, {.m = 128, .n = 128, .k = 64}, {.count = heads});
//   blas.gemv(w, x, y, {.rows = 4096, .cols = 1024});            // y = w·x
//
// Row-major. Every matrix is row-major, as in C++ arrays and PyTorch: element (i, j) of a
// matrix with leading dimension ld is at i·ld + j. A GEMM computes
//   C[m×n] = alpha · op(A)[m×k] · op(B)[k×n] + beta · C
// where op(X) is X, or Xᵀ with transpose_x (A is then stored k×m, B n×k). cuBLAS is
// column-major; a row-major matrix is its transpose to cuBLAS, so cudakit asks cuBLAS for
// Cᵀ = op(B)ᵀ · op(A)ᵀ, which is the same memory: no copy, no transpose kernel.
// Leading dimensions (lda, ldb, ldc) are row strides in elements; 0 means packed (the
// stored matrix's column count).
//
// Precision: float, __half and __nv_bfloat16 accumulate in fp32 (cublasGemmEx with
// CUBLAS_COMPUTE_32F); double in fp64. `.tf32 = true` (float only) lets tensor cores round
// the inputs to TF32 (CUBLAS_COMPUTE_32F_FAST_TF32): faster, about 3 decimal digits per
// product. alpha and beta are given as double and passed as float for fp32 accumulation.
//
// Shapes are checked before cuBLAS sees them (DESIGN 10): each dimension must be at least
// 0 and fit cuBLAS's 32-bit arguments, each leading dimension at least its row's length,
// and each view must hold its matrix: exactly rows × cols elements when packed, at least
// (rows - 1) · ld + cols otherwise (a longer view is a mistake then; take first()). The
// InvalidArgument names each dimension: "A is op(A)[m×k] = 127×33 (m = 127, k = 33,
// packed) and needs 4191 elements, but its view has 4000". Views on another device than
// the stream's are refused too.
//
// Ordering and lifetime: each call is declared work (declared_work.hpp) on the Blas's
// stream: it reads A and B and writes C (read too when beta ≠ 0) and the handle's
// workspace. Work on other streams is ordered against it exactly as against a typed
// launch, and a capture keeps the buffers (and the workspace) alive for its graph.
//
// Handles: a Blas takes a cuBLAS handle from a pool per device (the one last bound to this
// stream, if idle) and binds it to the stream (cublasSetStream); destroying the Blas gives
// the handle back. Each handle has its own workspace in cudakit memory
// (workspace_bytes(): 32 MiB on compute capability 9.0 and newer, 4 MiB before, as cuBLAS
// recommends), set with cublasSetWorkspace whenever the handle is bound, before any call
// is made: a captured GEMM then has no allocation node. Making a Blas while its stream is
// capturing works: a new handle and its workspace are made outside the capture (the
// workspace on the device's service stream). Handles live as long as the process.
//
// Errors: BlasError (blas_library.hpp) names the status, the call, the shapes and the
// stream; FeatureUnavailable when cuBLAS cannot be loaded (the first Blas loads it).
//
// Thread safety: a Blas is used by one thread at a time: a call from a second thread while
// one is in progress throws HandleInUse, and the first proceeds. Give each thread its own
// Blas; several may share a stream (each gets a handle of its own).
#pragma once

#include <cublas_api.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "cudakit/export.hpp"
#include "cudakit/blas_library.hpp"
#include "cudakit/copy.hpp"
#include "cudakit/device_span.hpp"
#include "cudakit/stream.hpp"

namespace cudakit {

/// The element types Blas and BlasLt compute on.
template <class T>
concept blas_element = std::same_as<T, float> || std::same_as<T, double> || std::same_as<T, __half> ||
                       std::same_as<T, __nv_bfloat16>;

/// A row-major GEMM: C[m×n] = alpha · op(A)[m×k] · op(B)[k×n] + beta · C (see above).
struct Gemm {
  std::int64_t m = 0, n = 0, k = 0;
  bool transpose_a = false;  // op(A) = Aᵀ: A is stored k×m
  bool transpose_b = false;  // op(B) = Bᵀ: B is stored n×k
  double alpha = 1.0, beta = 0.0;
  std::int64_t lda = 0, ldb = 0, ldc = 0;  // row strides in elements; 0: packed
  bool tf32 = false;  // float only: CUBLAS_COMPUTE_32F_FAST_TF32
};

/// The batch of a strided-batched GEMM: matrix i of A starts at i · stride_a elements, and
/// so on. `packed`: each matrix right after the previous one. A stride of 0 repeats one A or
/// B for every batch; C's matrices must not overlap.
struct StridedBatch {
  /// The stride value that means "packed" (each matrix right after the previous one).
  static constexpr std::int64_t packed = -1;
  std::int64_t count = 1;
  std::int64_t stride_a = packed, stride_b = packed, stride_c = packed;
};

/// A row-major GEMV: y = alpha · op(A) · x + beta · y, with A stored rows×cols (op(A) = Aᵀ
/// with transpose: then x has rows elements and y cols).
struct Gemv {
  std::int64_t rows = 0, cols = 0;
  bool transpose = false;
  double alpha = 1.0, beta = 0.0;
  std::int64_t lda = 0;  // row stride of A in elements; 0: packed (cols)
  bool tf32 = false;     // float only
};

/// Out is what a GEMM on inputs of element type T may write: T itself, or float for
/// __half and __nv_bfloat16 inputs (the fp32 accumulation stored unrounded, as logits
/// often are).
template <class Out, class T>
concept gemm_output_for =
    std::same_as<Out, T> || (std::same_as<Out, float> && (std::same_as<T, __half> || std::same_as<T, __nv_bfloat16>));

namespace detail {
struct BlasSlot;
}

/// A cuBLAS handle bound to one stream, with typed calls on cudakit buffers and views
/// (see above). Move-only.
class CUDAKIT_API Blas {
 public:
  /// Takes a handle for `stream`'s device from the pool (creating it, with its workspace,
  /// when none is idle) and binds it to the stream. Throws EmptyHandle for an empty stream,
  /// FeatureUnavailable without cuBLAS, BlasError or DriverError when setting up fails.
  explicit Blas(StreamRef stream);

  /// An empty Blas (what a moved-from one becomes): its calls throw EmptyHandle.
  Blas() = default;
  Blas(Blas&& other) noexcept
      : slot_(std::exchange(other.slot_, nullptr)), stream_(std::exchange(other.stream_, {})) {}
  Blas& operator=(Blas&& other) noexcept {
    if (this != &other) {
      reset();
      slot_ = std::exchange(other.slot_, nullptr);
      stream_ = std::exchange(other.stream_, {});
    }
    return *this;
  }
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;
  ~Blas() { reset(); }

  /// The stream the handle is bound to (empty for an empty Blas).
  StreamRef stream() const noexcept { return stream_; }
  /// The size of the handle's workspace in bytes (0 for an empty Blas).
  std::size_t workspace_bytes() const noexcept;
  /// The cuBLAS handle, for calls cudakit does not wrap. Such calls are the caller's to
  /// order: declare what they touch with cudakit::enqueue on stream(), and keep to one
  /// thread at a time.
  cublasHandle_t native_handle() const noexcept;

  /// C = alpha · op(A) · op(B) + beta · C, row-major (cublasGemmEx). A and B are buffers
  /// or views of one element type, C of the same type or, for __half and __nv_bfloat16
  /// inputs, of float; C must be writable.
  template <class A, class B, class C>
    requires device_range<const A&> && device_range<const B&> && writable_device_range<C> &&
             blas_element<device_value_t<const A&>> && std::same_as<device_value_t<const B&>, device_value_t<const A&>> &&
             gemm_output_for<device_value_t<C>, device_value_t<const A&>>
  void gemm(const A& a, const B& b, C&& c, const Gemm& shape) {
    gemm_views<device_value_t<const A&>, device_value_t<C>>(detail::as_device_span(a), detail::as_device_span(b),
                                                           detail::as_device_span(std::forward<C>(c)), shape, nullptr);
  }

  /// `batch.count` GEMMs of one shape at strides through A, B and C
  /// (cublasGemmStridedBatchedEx); the element types as for gemm.
  template <class A, class B, class C>
    requires device_range<const A&> && device_range<const B&> && writable_device_range<C> &&
             blas_element<device_value_t<const A&>> && std::same_as<device_value_t<const B&>, device_value_t<const A&>> &&
             gemm_output_for<device_value_t<C>, device_value_t<const A&>>
  void gemm_strided_batched(const A& a, const B& b, C&& c, const Gemm& shape, const StridedBatch& batch) {
    gemm_views<device_value_t<const A&>, device_value_t<C>>(detail::as_device_span(a), detail::as_device_span(b),
                                                           detail::as_device_span(std::forward<C>(c)), shape, &batch);
  }

  /// y = alpha · op(A) · x + beta · y, row-major (a GEMM with one column, cublasGemmEx,
  /// so that __half and __nv_bfloat16 accumulate in fp32 too).
  template <class A, class X, class Y>
    requires device_range<const A&> && device_range<const X&> && writable_device_range<Y> &&
             blas_element<device_value_t<Y>> && std::same_as<device_value_t<const A&>, device_value_t<Y>> &&
             std::same_as<device_value_t<const X&>, device_value_t<Y>>
  void gemv(const A& a, const X& x, Y&& y, const Gemv& shape) {
    gemv_views<device_value_t<Y>>(detail::as_device_span(a), detail::as_device_span(x),
                                  detail::as_device_span(std::forward<Y>(y)), shape);
  }

  /// Gives the handle back to the pool now and leaves this Blas empty.
  void reset() noexcept;

 private:
  template <blas_element T, gemm_output_for<T> Out>
  void gemm_views(DeviceSpan<const T> a, DeviceSpan<const T> b, DeviceSpan<Out> c, const Gemm& shape,
                  const StridedBatch* batch);
  template <blas_element T>
  void gemv_views(DeviceSpan<const T> a, DeviceSpan<const T> x, DeviceSpan<T> y, const Gemv& shape);

  detail::BlasSlot* slot_ = nullptr;
  StreamRef stream_;
};

}  // namespace cudakit
