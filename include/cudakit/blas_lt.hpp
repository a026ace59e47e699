// cuBLASLt matmuls with fused epilogues (bias, ReLU, GELU) on cudakit streams and buffers,
// ordered and kept alive like a typed launch.
//
//   cudakit::BlasLt lt(stream);
//   lt.matmul(x, w1, b1, h, {.m = batch, .n = 4096, .k = 1024}, cudakit::Epilogue::gelu_bias);  // h = gelu(x·w1 + b1)
//   lt.matmul(h, w2, y, {.m = batch, .n = 1024, .k = 4096});                                     // y = h·w2
//
// What it computes: C = act(alpha · op(A) · op(B) + beta · C + bias), row-major, with the
// shapes of blas.hpp's Gemm (the same row-major convention, leading dimensions, checks and
// messages). The bias has one element per column of C (n elements, of C's type): in
// y = x·W + b it is b. Epilogues: none, relu, gelu, and each with a bias (bias,
// relu_bias, gelu_bias); GELU is cuBLASLt's tanh approximation,
// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))). Types: float, __half and __nv_bfloat16, with
// fp32 accumulation (`.tf32 = true` on float for TF32 tensor cores).
//
// Algorithms: the first matmul of a shape asks cublasLtMatmulAlgoGetHeuristic for the best
// algorithm that fits the handle's workspace, and keeps it with the descriptors it built;
// a later matmul of the same shape only calls cublasLtMatmul (and sets the bias pointer on
// the descriptor when the bias is another buffer than the last one's). A shape is everything the choice depends on: m, n, k, the leading dimensions, the
// transposes, the type, TF32, the epilogue and the alignment of each pointer. The cache
// belongs to the handle, which keeps it when it goes back to the pool; it holds one entry
// per shape met, without a bound.
//
// Handles, workspace, capture, errors and threads: as for Blas (blas.hpp). Each BlasLt
// takes a cuBLASLt handle with its own workspace from a pool per device; making one while
// its stream captures works; every call declares its reads (A, B, the bias) and writes (C,
// the workspace); one thread at a time per BlasLt (HandleInUse otherwise).
#pragma once

#include <cublasLt.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "cudakit/export.hpp"
#include "cudakit/blas.hpp"

namespace cudakit {

/// What the matmul applies to alpha · op(A) · op(B) + beta · C before storing it.
enum class Epilogue : std::uint8_t {
  none,       ///< nothing
  bias,       ///< + bias (one per column of C)
  relu,       ///< max(0, x)
  relu_bias,  ///< max(0, x + bias)
  gelu,       ///< GELU (tanh approximation)
  gelu_bias,  ///< GELU(x + bias)
};

/// Whether the epilogue adds a bias.
constexpr bool has_bias(Epilogue e) noexcept {
  return e == Epilogue::bias || e == Epilogue::relu_bias || e == Epilogue::gelu_bias;
}

/// The element types BlasLt computes on.
template <class T>
concept blas_lt_element = blas_element<T> && !std::same_as<T, double>;

namespace detail {
struct LtSlot;
}

/// A cuBLASLt handle used on one stream, with its workspace and its algorithm cache (see
/// above). Move-only.
class CUDAKIT_API BlasLt {
 public:
  /// Takes a handle for `stream`'s device from the pool (creating it, with its workspace,
  /// when none is idle). Throws EmptyHandle for an empty stream, FeatureUnavailable without
  /// cuBLASLt, BlasError or DriverError when setting up fails.
  explicit BlasLt(StreamRef stream);

  /// An empty BlasLt (what a moved-from one becomes): its calls throw EmptyHandle.
  BlasLt() = default;
  BlasLt(BlasLt&& other) noexcept
      : slot_(std::exchange(other.slot_, nullptr)), stream_(std::exchange(other.stream_, {})) {}
  BlasLt& operator=(BlasLt&& other) noexcept {
    if (this != &other) {
      reset();
      slot_ = std::exchange(other.slot_, nullptr);
      stream_ = std::exchange(other.stream_, {});
    }
    return *this;
  }
  BlasLt(const BlasLt&) = delete;
  BlasLt& operator=(const BlasLt&) = delete;
  ~BlasLt() { reset(); }

  /// The stream the calls go to (empty for an empty BlasLt).
  StreamRef stream() const noexcept { return stream_; }
  /// The size of the handle's workspace in bytes (0 for an empty BlasLt).
  std::size_t workspace_bytes() const noexcept;
  /// How many shapes the handle has chosen an algorithm for (its cache's entries).
  std::size_t cached_shapes() const noexcept;

  /// C = act(alpha · op(A) · op(B) + beta · C) with an epilogue without bias
  /// (Epilogue::none, relu or gelu; InvalidArgument for one with a bias).
  template <class A, class B, class C>
    requires device_range<const A&> && device_range<const B&> && writable_device_range<C> &&
             blas_lt_element<device_value_t<C>> && std::same_as<device_value_t<const A&>, device_value_t<C>> &&
             std::same_as<device_value_t<const B&>, device_value_t<C>>
  void matmul(const A& a, const B& b, C&& c, const Gemm& shape, Epilogue epilogue = Epilogue::none) {
    matmul_views<device_value_t<C>>(detail::as_device_span(a), detail::as_device_span(b), {},
                                    detail::as_device_span(std::forward<C>(c)), shape, epilogue, false);
  }

  /// C = act(alpha · op(A) · op(B) + beta · C + bias) with an epilogue with bias
  /// (Epilogue::bias, relu_bias or gelu_bias; InvalidArgument for one without). The bias
  /// has n elements of C's type.
  template <class A, class B, class Bias, class C>
    requires device_range<const A&> && device_range<const B&> && device_range<const Bias&> &&
             writable_device_range<C> && blas_lt_element<device_value_t<C>> &&
             std::same_as<device_value_t<const A&>, device_value_t<C>> &&
             std::same_as<device_value_t<const B&>, device_value_t<C>> &&
             std::same_as<device_value_t<const Bias&>, device_value_t<C>>
  void matmul(const A& a, const B& b, const Bias& bias, C&& c, const Gemm& shape, Epilogue epilogue) {
    matmul_views<device_value_t<C>>(detail::as_device_span(a), detail::as_device_span(b),
                                    detail::as_device_span(bias), detail::as_device_span(std::forward<C>(c)), shape,
                                    epilogue, true);
  }

  /// Gives the handle back to the pool now and leaves this BlasLt empty.
  void reset() noexcept;

 private:
  template <blas_lt_element T>
  void matmul_views(DeviceSpan<const T> a, DeviceSpan<const T> b, DeviceSpan<const T> bias, DeviceSpan<T> c,
                    const Gemm& shape, Epilogue epilogue, bool with_bias);

  detail::LtSlot* slot_ = nullptr;
  StreamRef stream_;
};

}  // namespace cudakit
