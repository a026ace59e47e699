// Row-major shapes checked and turned column-major (blas_shapes.hpp).
#include "libraries/blas_shapes.hpp"

#include <algorithm>
#include <climits>
#include <string>

#include "cudakit/error.hpp"

namespace cudakit::detail {

namespace {

std::string n(std::int64_t v) { return std::to_string(v); }

// One operand as stored: a row-major rows×cols matrix with row stride ld.
struct Stored {
  const char* name;     // "A"
  std::string shape;    // "op(A)[m×k] = Aᵀ, stored k×m = 33×127"
  std::int64_t rows, cols, ld;
  bool packed_ld;
};

std::string where(const Stored& s) {
  return s.shape + ", ld " + n(s.ld) + (s.packed_ld ? " (packed)" : "");
}

// What the dimensions were, appended to every message.
std::string dims(const Gemm& g) { return " (m = " + n(g.m) + ", n = " + n(g.n) + ", k = " + n(g.k) + ")"; }

[[noreturn]] void bad(const char* operation, const std::string& what) {
  throw InvalidArgument(std::string(operation) + ": " + what);
}

void require_dimension(const char* operation, const char* name, std::int64_t value, const std::string& context) {
  if (value < 0) bad(operation, std::string(name) + " = " + n(value) + " is negative" + context);
  if (value > INT_MAX)
    bad(operation, std::string(name) + " = " + n(value) + " exceeds cuBLAS's 32-bit limit " + n(INT_MAX) + context);
}

// The row stride: the given one (at least the row's length, at least 1) or the packed one.
std::int64_t leading_dimension(const char* operation, const char* ld_name, std::int64_t given, const Stored& s,
                               const std::string& context) {
  std::int64_t packed = std::max<std::int64_t>(1, s.cols);
  if (given == 0) return packed;
  if (given < packed)
    bad(operation, std::string(ld_name) + " = " + n(given) + " is less than " + s.name + "'s row length " + n(packed) +
                       " (" + s.shape + ")" + context);
  if (given > INT_MAX)
    bad(operation, std::string(ld_name) + " = " + n(given) + " exceeds cuBLAS's 32-bit limit " + n(INT_MAX) + context);
  return given;
}

// Elements one stored matrix spans.
std::int64_t extent(const Stored& s) { return s.rows == 0 || s.cols == 0 ? 0 : (s.rows - 1) * s.ld + s.cols; }

// The stride between batches: the given one or the packed one (rows · ld).
std::int64_t batch_stride(const char* operation, const char* name, std::int64_t given, const Stored& s,
                          const std::string& context) {
  if (given == StridedBatch::packed) return s.rows * s.ld;
  if (given < 0) bad(operation, std::string(name) + " = " + n(given) + " is negative" + context);
  return given;
}

// The view must hold `count` matrices at `stride`: exactly when everything is packed, at
// least otherwise.
void require_view(const char* operation, const Stored& s, std::int64_t count, std::int64_t stride, bool packed,
                  std::size_t view, const std::string& context) {
  std::int64_t needed = count == 0 || extent(s) == 0 ? 0 : (count - 1) * stride + extent(s);
  bool fits = packed ? static_cast<std::int64_t>(view) == needed : static_cast<std::int64_t>(view) >= needed;
  if (fits) return;
  std::string batches = count == 1 ? "" : " in " + n(count) + " batches " + n(stride) + " elements apart";
  bad(operation, std::string(s.name) + " is " + where(s) + batches + ", and needs " + (packed ? "" : "at least ") +
                     n(needed) + " elements, but its view has " + std::to_string(view) + context);
}

void require_device(const char* operation, const char* name, int view_device, int device) {
  if (view_device >= 0 && view_device != device)
    bad(operation, std::string(name) + " is on device " + std::to_string(view_device) + " but the stream is on device " +
                       std::to_string(device));
}

}  // namespace

ColumnMajorGemm column_major_gemm(const char* operation, const Gemm& g, const StridedBatch* batch,
                                  const ViewSizes& views, int device) {
  const std::string context = dims(g);
  require_dimension(operation, "m", g.m, context);
  require_dimension(operation, "n", g.n, context);
  require_dimension(operation, "k", g.k, context);
  const std::int64_t count = batch ? batch->count : 1;
  if (count < 0 || count > INT_MAX)
    bad(operation, "the batch count " + n(count) + " is outside [0, " + n(INT_MAX) + "]" + context);

  Stored a{"A",
           g.transpose_a ? "op(A)[m×k] = Aᵀ, stored k×m = " + n(g.k) + "×" + n(g.m)
                         : "op(A)[m×k] = A, stored m×k = " + n(g.m) + "×" + n(g.k),
           g.transpose_a ? g.k : g.m, g.transpose_a ? g.m : g.k, 0, g.lda == 0};
  Stored b{"B",
           g.transpose_b ? "op(B)[k×n] = Bᵀ, stored n×k = " + n(g.n) + "×" + n(g.k)
                         : "op(B)[k×n] = B, stored k×n = " + n(g.k) + "×" + n(g.n),
           g.transpose_b ? g.n : g.k, g.transpose_b ? g.k : g.n, 0, g.ldb == 0};
  Stored c{"C", "C[m×n], stored m×n = " + n(g.m) + "×" + n(g.n), g.m, g.n, 0, g.ldc == 0};
  a.ld = leading_dimension(operation, "lda", g.lda, a, context);
  b.ld = leading_dimension(operation, "ldb", g.ldb, b, context);
  c.ld = leading_dimension(operation, "ldc", g.ldc, c, context);

  std::int64_t stride_a = batch ? batch_stride(operation, "stride_a", batch->stride_a, a, context) : 0;
  std::int64_t stride_b = batch ? batch_stride(operation, "stride_b", batch->stride_b, b, context) : 0;
  std::int64_t stride_c = batch ? batch_stride(operation, "stride_c", batch->stride_c, c, context) : 0;
  if (count > 1 && stride_c < extent(c))
    bad(operation, "stride_c = " + n(stride_c) + " is less than C's extent " + n(extent(c)) +
                       " elements: the batches of C would overlap" + context);
  auto packed_batch = [&](std::int64_t given) { return !batch || given == StridedBatch::packed; };
  require_view(operation, a, count, stride_a, a.packed_ld && packed_batch(batch ? batch->stride_a : 0), views.a, context);
  require_view(operation, b, count, stride_b, b.packed_ld && packed_batch(batch ? batch->stride_b : 0), views.b, context);
  require_view(operation, c, count, stride_c, c.packed_ld && packed_batch(batch ? batch->stride_c : 0), views.c, context);
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
  const std::string context = " (rows = " + n(v.rows) + ", cols = " + n(v.cols) + (v.transpose ? ", transposed)" : ")");
  require_dimension(operation, "rows", v.rows, context);
  require_dimension(operation, "cols", v.cols, context);
  Stored a{"A", "stored rows×cols = " + n(v.rows) + "×" + n(v.cols), v.rows, v.cols, 0, v.lda == 0};
  a.ld = leading_dimension(operation, "lda", v.lda, a, context);
  require_view(operation, a, 1, 0, a.packed_ld, views.a, context);
  const std::int64_t in = v.transpose ? v.rows : v.cols, out_length = v.transpose ? v.cols : v.rows;
  if (static_cast<std::int64_t>(views.b) != in)
    bad(operation, "x must have " + n(in) + " elements (" + (v.transpose ? "rows" : "cols") + ") but its view has " +
                       std::to_string(views.b) + context);
  if (static_cast<std::int64_t>(views.c) != out_length)
    bad(operation, "y must have " + n(out_length) + " elements (" + (v.transpose ? "cols" : "rows") +
                       ") but its view has " + std::to_string(views.c) + context);
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
  s += ", alpha = " + std::to_string(g.alpha) + ", beta = " + std::to_string(g.beta);
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
