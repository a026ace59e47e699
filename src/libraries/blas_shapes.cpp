// Row-major shapes checked and turned column-major (blas_shapes.hpp).
#include "libraries/blas_shapes.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <string>
#include <string_view>

#include "cudakit/error.hpp"

namespace cudakit::detail {

namespace {

std::string n(std::int64_t v) { return std::to_string(v); }

std::string scalar(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

// One matrix as stored: a row-major rows×cols matrix with row stride ld. Numbers only:
// the words of a message are built when one is thrown (DESIGN 8: the success path does not
// allocate).
struct Stored {
  char name;          // 'A', 'B', 'C' (or 'A' of a GEMV)
  bool transposed;    // op(X) = Xᵀ
  std::int64_t rows, cols;
  const char* rows_name;  // "m", "k", "n", "rows"
  const char* cols_name;
  std::int64_t ld = 0;      // set by lay_out
  bool packed_ld = false;   // likewise
  std::int64_t stride = 0;  // between batches; likewise
};

// A GEMM operand whose op(X) is rows×cols: stored so, or cols×rows when transposed.
Stored operand(char name, bool transposed, std::int64_t rows, std::int64_t cols, const char* rows_name,
               const char* cols_name) {
  if (transposed) return {name, true, cols, rows, cols_name, rows_name};
  return {name, false, rows, cols, rows_name, cols_name};
}

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

void require_device(const char* operation, std::string_view name, int view_device, int device) {
  if (view_device >= 0 && view_device != device) [[unlikely]]
    bad(operation, std::string(name) + " is on device " + std::to_string(view_device) + " but the stream is on device " +
                       std::to_string(device));
}

// Elements one stored matrix spans.
std::int64_t extent(const Stored& s) { return s.rows == 0 || s.cols == 0 ? 0 : (s.rows - 1) * s.ld + s.cols; }

// What every matrix of one call is checked with.
template <class Shape>
struct Call {
  const char* operation;
  const Shape& shape;
  bool gemv;
  std::int64_t count;  // batches (1 without)
  int device;          // the stream's
};

// One matrix as the call gave it.
struct Given {
  std::int64_t ld;      // 0: packed
  const char* ld_name;  // "lda"
  std::int64_t stride;  // between batches; StridedBatch::packed when packed or not batched
  const char* stride_name;
  std::size_t view;  // its view's elements
  int view_device;   // its view's device (-1: unknown)
};

// Lays one matrix out: its leading dimension (at least its row's length, at least 1,
// within 32 bits; 0 takes the packed one) and its batch stride (at least 0; for C, batches
// that do not overlap). Sets s.ld, s.packed_ld and s.stride.
template <class Shape>
void lay_out(const Call<Shape>& call, Stored& s, const Given& given) {
  const char* op = call.operation;
  const std::int64_t packed = std::max<std::int64_t>(1, s.cols);
  s.packed_ld = given.ld == 0;
  s.ld = s.packed_ld ? packed : given.ld;
  if (given.ld != 0 && given.ld < packed) [[unlikely]]
    bad(op, std::string(given.ld_name) + " = " + n(given.ld) + " is less than " + s.name + "'s row length " + n(packed) +
                " (" + shape_of(s, call.gemv) + ")" + dims(call.shape));
  if (given.ld > INT_MAX) [[unlikely]]
    bad(op, std::string(given.ld_name) + " = " + n(given.ld) + " exceeds cuBLAS's 32-bit limit " + n(INT_MAX) +
                dims(call.shape));

  if (given.stride != StridedBatch::packed && given.stride < 0) [[unlikely]]
    bad(op, std::string(given.stride_name) + " = " + n(given.stride) + " is negative" + dims(call.shape));
  s.stride = given.stride == StridedBatch::packed ? s.rows * s.ld : given.stride;
  if (s.name == 'C' && call.count > 1 && s.stride < extent(s)) [[unlikely]]
    bad(op, "stride_c = " + n(s.stride) + " is less than C's extent " + n(extent(s)) +
                " elements: the batches of C would overlap" + dims(call.shape));
}

// Checks that one laid-out matrix's view holds it (exactly the matrices' extent when
// everything is packed, at least it otherwise) and lies on the stream's device.
template <class Shape>
void require_view(const Call<Shape>& call, const Stored& s, const Given& given) {
  const bool exact = s.packed_ld && given.stride == StridedBatch::packed;
  const std::int64_t needed = call.count == 0 || extent(s) == 0 ? 0 : (call.count - 1) * s.stride + extent(s);
  const auto view = static_cast<std::int64_t>(given.view);
  if (exact ? view != needed : view < needed) [[unlikely]] {
    std::string batches =
        call.count == 1 ? "" : " in " + n(call.count) + " batches " + n(s.stride) + " elements apart";
    bad(call.operation, std::string(1, s.name) + " is " + where(s, call.gemv) + batches + ", and needs " +
                            (exact ? "" : "at least ") + n(needed) + " elements, but its view has " +
                            std::to_string(given.view) + dims(call.shape));
  }
  require_device(call.operation, std::string_view(&s.name, 1), given.view_device, call.device);
}

}  // namespace

ColumnMajorGemm column_major_gemm(const char* operation, const Gemm& g, const StridedBatch* batch,
                                  const ViewSizes& views, cudaDataType type, int device) {
  require_dimension(operation, "m", g.m, g);
  require_dimension(operation, "n", g.n, g);
  require_dimension(operation, "k", g.k, g);
  const std::int64_t count = batch ? batch->count : 1;
  if (count < 0 || count > INT_MAX) [[unlikely]]
    bad(operation, "the batch count " + n(count) + " is outside [0, " + n(INT_MAX) + "]" + dims(g));
  ColumnMajorGemm out;
  out.compute = compute_type(type, g.tf32, operation);

  const Call<Gemm> call{operation, g, false, count, device};
  auto stride = [&](std::int64_t StridedBatch::*given) { return batch ? batch->*given : StridedBatch::packed; };
  Stored a = operand('A', g.transpose_a, g.m, g.k, "m", "k");
  Stored b = operand('B', g.transpose_b, g.k, g.n, "k", "n");
  Stored c = operand('C', false, g.m, g.n, "m", "n");
  const Given given_a{g.lda, "lda", stride(&StridedBatch::stride_a), "stride_a", views.a, views.a_device};
  const Given given_b{g.ldb, "ldb", stride(&StridedBatch::stride_b), "stride_b", views.b, views.b_device};
  const Given given_c{g.ldc, "ldc", stride(&StridedBatch::stride_c), "stride_c", views.c, views.c_device};
  lay_out(call, a, given_a);  // every layout first: a layout error is reported before a view's
  lay_out(call, b, given_b);
  lay_out(call, c, given_c);
  require_view(call, a, given_a);
  require_view(call, b, given_b);
  require_view(call, c, given_c);

  out.op_first = g.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  out.op_second = g.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  out.m = static_cast<int>(g.n);
  out.n = static_cast<int>(g.m);
  out.k = static_cast<int>(g.k);
  out.ld_first = static_cast<int>(b.ld);
  out.ld_second = static_cast<int>(a.ld);
  out.ldc = static_cast<int>(c.ld);
  if (batch != nullptr) {
    out.stride_first = b.stride;
    out.stride_second = a.stride;
    out.stride_c = c.stride;
  }
  out.count = static_cast<int>(count);
  out.empty = g.m == 0 || g.n == 0 || count == 0;
  return out;
}

void LastCheckedGemm::check_afresh(const char* operation, const Key& key, const Gemm& shape, const StridedBatch* batch,
                                   const ViewSizes& views, cudaDataType type, int device) {
  saved_ = false;
  gemm_ = column_major_gemm(operation, shape, batch, views, type, device);
  key_ = key;
  saved_ = true;
}

ColumnMajorGemm column_major_gemv(const char* operation, const Gemv& v, const ViewSizes& views, cudaDataType type,
                                  int device) {
  require_dimension(operation, "rows", v.rows, v);
  require_dimension(operation, "cols", v.cols, v);
  ColumnMajorGemm out;
  out.compute = compute_type(type, v.tf32, operation);
  Stored a{'A', false, v.rows, v.cols, "rows", "cols"};
  const Call<Gemv> call{operation, v, true, 1, device};
  const Given given_a{v.lda, "lda", StridedBatch::packed, "", views.a, views.a_device};
  lay_out(call, a, given_a);
  require_view(call, a, given_a);
  const std::int64_t in = v.transpose ? v.rows : v.cols, out_length = v.transpose ? v.cols : v.rows;
  if (static_cast<std::int64_t>(views.b) != in) [[unlikely]]
    bad(operation, "x must have " + n(in) + " elements (" + (v.transpose ? "rows" : "cols") + ") but its view has " +
                       std::to_string(views.b) + dims(v));
  if (static_cast<std::int64_t>(views.c) != out_length) [[unlikely]]
    bad(operation, "y must have " + n(out_length) + " elements (" + (v.transpose ? "cols" : "rows") +
                       ") but its view has " + std::to_string(views.c) + dims(v));
  require_device(operation, "x", views.b_device, device);
  require_device(operation, "y", views.c_device, device);

  // cuBLAS sees A as the column-major cols×rows matrix Aᵀ: y = A·x is (Aᵀ)ᵀ·x.
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
