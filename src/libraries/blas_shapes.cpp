// Row-major shapes checked and turned column-major (blas_shapes.hpp).
#include "libraries/blas_shapes.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <string>

#include "cudakit/error.hpp"

namespace cudakit::detail {

namespace {

std::string n(std::int64_t v) { return std::to_string(v); }

std::string scalar(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

// One operand as stored: a row-major rows×cols matrix with row stride ld. Numbers only:
// the words of a message are built when one is thrown (DESIGN 8: the success path does not
// allocate).
struct Stored {
  char name;          // 'A', 'B', 'C' (or 'A' of a GEMV)
  bool transposed;    // op(X) = Xᵀ
  std::int64_t rows, cols, ld;
  bool packed_ld;
  const char* rows_name;  // "m", "k", "n", "rows"
  const char* cols_name;
};

// "op(A)[m×k] = Aᵀ, stored k×m = 33×127" for a GEMM operand; "stored rows×cols = 6×5" for a
// GEMV's A.
std::string shape_of(const Stored& s, bool gemv) {
  std::string x(1, s.name);
  std::string stored = "stored " + std::string(s.rows_name) + "×" + s.cols_name + " = " + n(s.rows) + "×" + n(s.cols);
  if (gemv) return stored;
  if (s.name == 'C') return "C[m×n], " + stored;
  const char* op = s.name == 'A' ? "[m×k]" : "[k×n]";
  return "op(" + x + ")" + op + " = " + x + (s.transposed ? "ᵀ" : "") + ", " + stored;
}

std::string where(const Stored& s, bool gemv) {
  return shape_of(s, gemv) + ", ld " + n(s.ld) + (s.packed_ld ? " (packed)" : "");
}

// What the dimensions were, appended to every message.
std::string dims(const Gemm& g) { return " (m = " + n(g.m) + ", n = " + n(g.n) + ", k = " + n(g.k) + ")"; }
std::string dims(const Gemv& v) {
  return " (rows = " + n(v.rows) + ", cols = " + n(v.cols) + (v.transpose ? ", transposed)" : ")");
}

[[noreturn]] void bad(const char* operation, const std::string& what) {
  throw InvalidArgument(std::string(operation) + ": " + what);
}

template <class Shape>
void require_dimension(const char* operation, const char* name, std::int64_t value, const Shape& shape) {
  if (value < 0) [[unlikely]]
    bad(operation, std::string(name) + " = " + n(value) + " is negative" + dims(shape));
  if (value > INT_MAX) [[unlikely]]
    bad(operation, std::string(name) + " = " + n(value) + " exceeds cuBLAS's 32-bit limit " + n(INT_MAX) + dims(shape));
}

// The row stride: the given one (at least the row's length, at least 1) or the packed one.
template <class Shape>
std::int64_t leading_dimension(const char* operation, const char* ld_name, std::int64_t given, const Stored& s,
                               const Shape& shape, bool gemv) {
  std::int64_t packed = std::max<std::int64_t>(1, s.cols);
  if (given == 0) return packed;
  if (given < packed) [[unlikely]]
    bad(operation, std::string(ld_name) + " = " + n(given) + " is less than " + s.name + "'s row length " + n(packed) +
                       " (" + shape_of(s, gemv) + ")" + dims(shape));
  if (given > INT_MAX) [[unlikely]]
    bad(operation, std::string(ld_name) + " = " + n(given) + " exceeds cuBLAS's 32-bit limit " + n(INT_MAX) + dims(shape));
  return given;
}

// Elements one stored matrix spans.
std::int64_t extent(const Stored& s) { return s.rows == 0 || s.cols == 0 ? 0 : (s.rows - 1) * s.ld + s.cols; }

// The stride between batches: the given one or the packed one (rows · ld).
std::int64_t batch_stride(const char* operation, const char* name, std::int64_t given, const Stored& s, const Gemm& g) {
  if (given == StridedBatch::packed) return s.rows * s.ld;
  if (given < 0) [[unlikely]]
    bad(operation, std::string(name) + " = " + n(given) + " is negative" + dims(g));
  return given;
}

// The view must hold `count` matrices at `stride`: exactly when everything is packed, at
// least otherwise.
template <class Shape>
void require_view(const char* operation, const Stored& s, std::int64_t count, std::int64_t stride, bool packed,
                  std::size_t view, const Shape& shape, bool gemv) {
  std::int64_t needed = count == 0 || extent(s) == 0 ? 0 : (count - 1) * stride + extent(s);
  bool fits = packed ? static_cast<std::int64_t>(view) == needed : static_cast<std::int64_t>(view) >= needed;
  if (fits) [[likely]]
    return;
  std::string batches = count == 1 ? "" : " in " + n(count) + " batches " + n(stride) + " elements apart";
  bad(operation, std::string(1, s.name) + " is " + where(s, gemv) + batches + ", and needs " +
                     (packed ? "" : "at least ") + n(needed) + " elements, but its view has " + std::to_string(view) +
                     dims(shape));
}

void require_device(const char* operation, const char* name, int view_device, int device) {
  if (view_device >= 0 && view_device != device) [[unlikely]]
    bad(operation, std::string(name) + " is on device " + std::to_string(view_device) + " but the stream is on device " +
                       std::to_string(device));
}

}  // namespace

ColumnMajorGemm column_major_gemm(const char* operation, const Gemm& g, const StridedBatch* batch,
                                  const ViewSizes& views, int device) {
  require_dimension(operation, "m", g.m, g);
  require_dimension(operation, "n", g.n, g);
  require_dimension(operation, "k", g.k, g);
  const std::int64_t count = batch ? batch->count : 1;
  if (count < 0 || count > INT_MAX) [[unlikely]]
    bad(operation, "the batch count " + n(count) + " is outside [0, " + n(INT_MAX) + "]" + dims(g));

  Stored a{'A', g.transpose_a, g.transpose_a ? g.k : g.m, g.transpose_a ? g.m : g.k, 0, g.lda == 0,
           g.transpose_a ? "k" : "m", g.transpose_a ? "m" : "k"};
  Stored b{'B', g.transpose_b, g.transpose_b ? g.n : g.k, g.transpose_b ? g.k : g.n, 0, g.ldb == 0,
           g.transpose_b ? "n" : "k", g.transpose_b ? "k" : "n"};
  Stored c{'C', false, g.m, g.n, 0, g.ldc == 0, "m", "n"};
  a.ld = leading_dimension(operation, "lda", g.lda, a, g, false);
  b.ld = leading_dimension(operation, "ldb", g.ldb, b, g, false);
  c.ld = leading_dimension(operation, "ldc", g.ldc, c, g, false);

  std::int64_t stride_a = batch ? batch_stride(operation, "stride_a", batch->stride_a, a, g) : 0;
  std::int64_t stride_b = batch ? batch_stride(operation, "stride_b", batch->stride_b, b, g) : 0;
  std::int64_t stride_c = batch ? batch_stride(operation, "stride_c", batch->stride_c, c, g) : 0;
  if (count > 1 && stride_c < extent(c)) [[unlikely]]
    bad(operation, "stride_c = " + n(stride_c) + " is less than C's extent " + n(extent(c)) +
                       " elements: the batches of C would overlap" + dims(g));
  auto packed_batch = [&](std::int64_t given) { return !batch || given == StridedBatch::packed; };
  require_view(operation, a, count, stride_a, a.packed_ld && packed_batch(batch ? batch->stride_a : 0), views.a, g, false);
  require_view(operation, b, count, stride_b, b.packed_ld && packed_batch(batch ? batch->stride_b : 0), views.b, g, false);
  require_view(operation, c, count, stride_c, c.packed_ld && packed_batch(batch ? batch->stride_c : 0), views.c, g, false);
  require_device(operation, "A", views.a_device, device);
  require_device(operation, "B", views.b_device, device);
  require_device(operation, "C", views.c_device, device);

  ColumnMajorGemm out;
  out.op_first = g.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  out.op_second = g.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  out.m = static_cast<int>(g.n);
  out.n = static_cast<int>(g.m);
  out.k = static_cast<int>(g.k);
  out.ld_first = static_cast<int>(b.ld);
  out.ld_second = static_cast<int>(a.ld);
  out.ldc = static_cast<int>(c.ld);
  out.stride_first = stride_b;
  out.stride_second = stride_a;
  out.stride_c = stride_c;
  out.count = static_cast<int>(count);
  out.empty = g.m == 0 || g.n == 0 || count == 0;
  return out;
}

ColumnMajorGemm column_major_gemv(const char* operation, const Gemv& v, const ViewSizes& views, int device) {
  require_dimension(operation, "rows", v.rows, v);
  require_dimension(operation, "cols", v.cols, v);
  Stored a{'A', false, v.rows, v.cols, 0, v.lda == 0, "rows", "cols"};
  a.ld = leading_dimension(operation, "lda", v.lda, a, v, true);
  require_view(operation, a, 1, 0, a.packed_ld, views.a, v, true);
  const std::int64_t in = v.transpose ? v.rows : v.cols, out_length = v.transpose ? v.cols : v.rows;
  if (static_cast<std::int64_t>(views.b) != in) [[unlikely]]
    bad(operation, "x must have " + n(in) + " elements (" + (v.transpose ? "rows" : "cols") + ") but its view has " +
                       std::to_string(views.b) + dims(v));
  if (static_cast<std::int64_t>(views.c) != out_length) [[unlikely]]
    bad(operation, "y must have " + n(out_length) + " elements (" + (v.transpose ? "cols" : "rows") +
                       ") but its view has " + std::to_string(views.c) + dims(v));
  require_device(operation, "A", views.a_device, device);
  require_device(operation, "x", views.b_device, device);
  require_device(operation, "y", views.c_device, device);

  // cuBLAS sees A as the column-major cols×rows matrix Aᵀ: y = A·x is (Aᵀ)ᵀ·x.
  ColumnMajorGemm out;
  out.op_first = v.transpose ? CUBLAS_OP_N : CUBLAS_OP_T;  // cuBLAS's first operand is A here
  out.op_second = CUBLAS_OP_N;
  out.m = static_cast<int>(out_length);
  out.n = 1;
  out.k = static_cast<int>(in);
  out.ld_first = static_cast<int>(a.ld);
  out.ld_second = static_cast<int>(std::max<std::int64_t>(1, in));
  out.ldc = static_cast<int>(std::max<std::int64_t>(1, out_length));
  out.empty = out_length == 0;
  return out;
}

std::string describe_gemm(const char* what, const char* type, const Gemm& g, const StridedBatch* batch) {
  std::string s = std::string(what) + " of " + type + ", C[m×n] = " + (g.transpose_a ? "Aᵀ" : "A") + "[m×k]·" +
                  (g.transpose_b ? "Bᵀ" : "B") + "[k×n] with m = " + n(g.m) + ", n = " + n(g.n) + ", k = " + n(g.k);
  if (g.lda != 0) s += ", lda = " + n(g.lda);
  if (g.ldb != 0) s += ", ldb = " + n(g.ldb);
  if (g.ldc != 0) s += ", ldc = " + n(g.ldc);
  if (batch != nullptr) s += ", " + n(batch->count) + " batches";
  s += ", alpha = " + scalar(g.alpha) + ", beta = " + scalar(g.beta);
  if (g.tf32) s += ", TF32";
  return s + ", row-major";
}

std::string describe_gemv(const char* type, const Gemv& v) {
  return std::string("gemv of ") + type + ", y = " + (v.transpose ? "Aᵀ" : "A") + "·x with A stored " + n(v.rows) +
         "×" + n(v.cols) + (v.lda != 0 ? ", lda = " + n(v.lda) : std::string()) + (v.tf32 ? ", TF32" : "") +
         ", row-major";
}

cublasComputeType_t compute_type(cudaDataType type, bool tf32, const char* operation) {
  if (tf32 && type != CUDA_R_32F)
    bad(operation, "tf32 applies to float only (TF32 rounds fp32 inputs); this call is on another type");
  if (type == CUDA_R_64F) return CUBLAS_COMPUTE_64F;
  return tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

}  // namespace cudakit::detail
