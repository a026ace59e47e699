// Blas (blas.hpp) on the fake driver and the fake cuBLAS: the row-major convention against
// a host reference for every type and transpose, the column-major call cuBLAS receives,
// shape errors naming each dimension, the handle pool, the refusal of a second thread,
// errors, and declared work inside and outside a capture (the fake's ordering model fails
// a test whose GEMM and kernel on two streams were not ordered).
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "allocation_counter.hpp"
#include "blas_fixture.hpp"

namespace cudakit {
namespace {

using testing::BlasTest;
using testing::message_of;
using cublas::Entry;

template <class T>
class BlasTypedTest : public BlasTest {};
using ElementTypes = ::testing::Types<float, double, __half, __nv_bfloat16>;
TYPED_TEST_SUITE(BlasTypedTest, ElementTypes);

// ---- results ----

TYPED_TEST(BlasTypedTest, GemmComputesTheRowMajorProductForEveryTranspose) {
  using T = TypeParam;
  Stream s(Device::get(0));
  Blas blas(s);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const Gemm g{.m = 7, .n = 5, .k = 3, .transpose_a = ta, .transpose_b = tb};
      auto ha = this->template random<T>(7 * 3), hb = this->template random<T>(3 * 5);
      auto a = this->make(s, ha), b = this->make(s, hb);
      auto c = this->template poisoned<T>(s, 7 * 5);
      blas.gemm(a, b, c, g);
      s.synchronize();
      std::vector<double> want(7 * 5);
      testing::host_gemm(g, ha, hb, want);
      this->expect_near(this->read(c), want, std::string("op(A) ") + (ta ? "transposed" : "plain") + ", op(B) " +
                                                 (tb ? "transposed" : "plain"));
    }
}

TYPED_TEST(BlasTypedTest, GemmWithAlphaAndBetaAccumulatesIntoC) {
  using T = TypeParam;
  Stream s(Device::get(0));
  Blas blas(s);
  const Gemm g{.m = 9, .n = 4, .k = 6, .alpha = 0.5, .beta = -1.5};
  auto ha = this->template random<T>(9 * 6), hb = this->template random<T>(6 * 4), hc = this->template random<T>(9 * 4);
  auto a = this->make(s, ha), b = this->make(s, hb), c = this->make(s, hc);
  blas.gemm(a, b, c, g);
  s.synchronize();
  std::vector<double> want(hc.size());
  for (std::size_t i = 0; i < hc.size(); ++i) want[i] = testing::to_double(hc[i]);
  testing::host_gemm(g, ha, hb, want);
  this->expect_near(this->read(c), want, "C = 0.5·A·B - 1.5·C");
}

TYPED_TEST(BlasTypedTest, StridedBatchedGemmComputesEveryBatch) {
  using T = TypeParam;
  Stream s(Device::get(0));
  Blas blas(s);
  const Gemm g{.m = 5, .n = 3, .k = 4, .transpose_b = true};
  constexpr int batches = 3;
  auto ha = this->template random<T>(batches * 5 * 4), hb = this->template random<T>(batches * 3 * 4);
  auto a = this->make(s, ha), b = this->make(s, hb);
  auto c = this->template poisoned<T>(s, batches * 5 * 3);
  blas.gemm_strided_batched(a, b, c, g, {.count = batches});
  s.synchronize();
  auto got = this->read(c);
  for (int i = 0; i < batches; ++i) {
    std::vector<T> ai(ha.begin() + i * 20, ha.begin() + (i + 1) * 20), bi(hb.begin() + i * 12, hb.begin() + (i + 1) * 12);
    std::vector<double> want(15);
    testing::host_gemm(g, ai, bi, want);
    this->expect_near(std::vector<T>(got.begin() + i * 15, got.begin() + (i + 1) * 15), want,
                      "batch " + std::to_string(i));
  }
}

TYPED_TEST(BlasTypedTest, GemvComputesBothOrientations) {
  using T = TypeParam;
  Stream s(Device::get(0));
  Blas blas(s);
  auto ha = this->template random<T>(6 * 5);
  auto a = this->make(s, ha);
  for (bool transpose : {false, true}) {
    const std::int64_t in = transpose ? 6 : 5, out = transpose ? 5 : 6;
    auto hx = this->template random<T>(in);
    auto x = this->make(s, hx);
    auto y = this->template poisoned<T>(s, out);
    blas.gemv(a, x, y, {.rows = 6, .cols = 5, .transpose = transpose});
    s.synchronize();
    // y = op(A)·x is a GEMM with one column.
    std::vector<double> want(out);
    testing::host_gemm(Gemm{.m = out, .n = 1, .k = in, .transpose_a = transpose}, ha, hx, want);
    this->expect_near(this->read(y), want, transpose ? "y = Aᵀx" : "y = Ax");
  }
}

TEST_F(BlasTest, LeadingDimensionsSelectASubmatrix) {
  Stream s(dev());
  Blas blas(s);
  // A is the left 4 columns of a 3×10 matrix, B the top-left 4×2 of a 6×7 one, C the
  // middle of a 3×5 one.
  auto ha = random<float>(3 * 10), hb = random<float>(6 * 7), hc = random<float>(3 * 5);
  auto a = make(s, ha), b = make(s, hb), c = make(s, hc);
  const Gemm g{.m = 3, .n = 2, .k = 4, .lda = 10, .ldb = 7, .ldc = 5};
  blas.gemm(a, b, c.subspan(1), g);
  s.synchronize();
  std::vector<double> want(hc.size());
  for (std::size_t i = 0; i < hc.size(); ++i) want[i] = hc[i];
  std::vector<double> middle(want.begin() + 1, want.end());
  testing::host_gemm(g, ha, hb, middle);
  std::copy(middle.begin(), middle.end(), want.begin() + 1);
  expect_near(read(c), want, "submatrices");
}

TEST_F(BlasTest, ABroadcastStrideOfZeroReusesOneMatrixForEveryBatch) {
  Stream s(dev());
  Blas blas(s);
  auto hw = random<float>(4 * 3), hx = random<float>(2 * 2 * 4);
  auto w = make(s, hw), x = make(s, hx);
  auto y = poisoned<float>(s, 2 * 2 * 3);
  blas.gemm_strided_batched(x, w, y, {.m = 2, .n = 3, .k = 4}, {.count = 2, .stride_b = 0});
  s.synchronize();
  auto got = read(y);
  for (int i = 0; i < 2; ++i) {
    std::vector<float> xi(hx.begin() + i * 8, hx.begin() + (i + 1) * 8);
    std::vector<double> want(6);
    testing::host_gemm(Gemm{.m = 2, .n = 3, .k = 4}, xi, hw, want);
    expect_near(std::vector<float>(got.begin() + i * 6, got.begin() + (i + 1) * 6), want, "batch " + std::to_string(i));
  }
}

// ---- what cuBLAS receives ----

TEST_F(BlasTest, RowMajorBecomesTheTransposedColumnMajorProduct) {
  Stream s(dev());
  Blas blas(s);
  auto a = make(s, random<float>(3 * 7)), b = make(s, random<float>(5 * 3));
  auto c = poisoned<float>(s, 7 * 5);
  blas.gemm(a, b, c, {.m = 7, .n = 5, .k = 3, .transpose_a = true, .transpose_b = true});
  auto calls = fake_blas().gemms();
  ASSERT_EQ(calls.size(), 1u);
  const auto& g = calls[0];
  EXPECT_EQ(g.entry, Entry::GemmEx);
  EXPECT_EQ(g.m, 5) << "cuBLAS's m is our n";
  EXPECT_EQ(g.n, 7) << "cuBLAS's n is our m";
  EXPECT_EQ(g.k, 3);
  EXPECT_EQ(g.transa, CUBLAS_OP_T) << "cuBLAS's first operand is our B, transposed as ours is";
  EXPECT_EQ(g.transb, CUBLAS_OP_T);
  EXPECT_EQ(g.lda, 3) << "our B stored n×k: row length k";
  EXPECT_EQ(g.ldb, 7) << "our A stored k×m: row length m";
  EXPECT_EQ(g.ldc, 5);
  EXPECT_EQ(g.compute, CUBLAS_COMPUTE_32F) << "fp32 accumulation, no TF32 unless asked";
  EXPECT_EQ(g.stream, s.handle());
}

TEST_F(BlasTest, Tf32IsOptInForFloatAndRefusedForOtherTypes) {
  Stream s(dev());
  Blas blas(s);
  auto a = make(s, random<float>(4)), b = make(s, random<float>(4));
  auto c = poisoned<float>(s, 4);
  blas.gemm(a, b, c, {.m = 2, .n = 2, .k = 2, .tf32 = true});
  ASSERT_EQ(fake_blas().gemms().size(), 1u);
  EXPECT_EQ(fake_blas().gemms()[0].compute, CUBLAS_COMPUTE_32F_FAST_TF32);
  auto h = make(s, random<__nv_bfloat16>(4));
  auto hc = poisoned<__nv_bfloat16>(s, 4);
  std::string m = message_of<InvalidArgument>([&] { blas.gemm(h, h, hc, {.m = 2, .n = 2, .k = 2, .tf32 = true}); });
  EXPECT_NE(m.find("tf32 applies to float only"), std::string::npos) << m;
}

TEST_F(BlasTest, DoubleAccumulatesInDoubleAndHalfTypesInFloat) {
  Stream s(dev());
  Blas blas(s);
  auto d = make(s, random<double>(4));
  auto dc = poisoned<double>(s, 4);
  blas.gemm(d, d, dc, {.m = 2, .n = 2, .k = 2});
  auto h = make(s, random<__half>(4));
  auto hc = poisoned<__half>(s, 4);
  blas.gemm(h, h, hc, {.m = 2, .n = 2, .k = 2});
  auto calls = fake_blas().gemms();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].compute, CUBLAS_COMPUTE_64F);
  EXPECT_EQ(calls[0].type, CUDA_R_64F);
  EXPECT_EQ(calls[1].compute, CUBLAS_COMPUTE_32F);
  EXPECT_EQ(calls[1].type, CUDA_R_16F);
}

template <class T>
class BlasWideningTest : public BlasTest {};
using HalfTypes = ::testing::Types<__half, __nv_bfloat16>;
TYPED_TEST_SUITE(BlasWideningTest, HalfTypes);

TYPED_TEST(BlasWideningTest, HalfInputsWriteAFloatResultUnrounded) {
  using T = TypeParam;
  Stream s(Device::get(0));
  Blas blas(s);
  const Gemm g{.m = 6, .n = 11, .k = 5, .transpose_b = true};
  auto ha = this->template random<T>(6 * 5), hb = this->template random<T>(11 * 5);
  auto a = this->make(s, ha), b = this->make(s, hb);
  auto c = this->template poisoned<float>(s, 6 * 11);
  blas.gemm(a, b, c, g);
  s.synchronize();
  std::vector<double> want(6 * 11);
  testing::host_gemm(g, ha, hb, want);
  this->expect_near(this->read(c), want, "float C from half inputs");
  auto calls = this->fake_blas().gemms();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].compute, CUBLAS_COMPUTE_32F);
  EXPECT_EQ(calls[0].type, (std::is_same_v<T, __half> ? CUDA_R_16F : CUDA_R_16BF));
}

TEST_F(BlasTest, AnEmptyProductCallsNothing) {
  Stream s(dev());
  Blas blas(s);
  DeviceBuffer<float> none;
  auto b = make(s, random<float>(3 * 4));
  blas.gemm(none, b, none, {.m = 0, .n = 4, .k = 3});
  EXPECT_EQ(fake_blas().calls(Entry::GemmEx), 0);
}

// ---- shapes ----

TEST_F(BlasTest, ShapeErrorsNameEachDimension) {
  Stream s(dev());
  Blas blas(s);
  auto a = make(s, random<float>(127 * 33)), b = make(s, random<float>(33 * 65));
  auto c = poisoned<float>(s, 127 * 65);
  const Gemm g{.m = 127, .n = 65, .k = 33};

  std::string m = message_of<InvalidArgument>([&] { blas.gemm(a.first(4000), b, c, g); });
  for (const char* part : {"Blas::gemm", "A is op(A)[m×k] = A, stored m×k = 127×33", "needs 4191 elements",
                           "its view has 4000", "m = 127", "n = 65", "k = 33"})
    EXPECT_NE(m.find(part), std::string::npos) << part << " in: " << m;

  m = message_of<InvalidArgument>([&] { blas.gemm(a, b, c.first(100), g); });
  EXPECT_NE(m.find("C is C[m×n], stored m×n = 127×65"), std::string::npos) << m;
  EXPECT_NE(m.find("needs 8255 elements"), std::string::npos) << m;

  m = message_of<InvalidArgument>(
      [&] { blas.gemm(a, b.first(2000), c, {.m = 127, .n = 65, .k = 33, .transpose_b = true}); });
  EXPECT_NE(m.find("B is op(B)[k×n] = Bᵀ, stored n×k = 65×33"), std::string::npos) << m;

  m = message_of<InvalidArgument>([&] { blas.gemm(a, b, c, {.m = -1, .n = 65, .k = 33}); });
  EXPECT_NE(m.find("m = -1 is negative"), std::string::npos) << m;

  m = message_of<InvalidArgument>([&] { blas.gemm(a, b, c, {.m = 127, .n = 65, .k = 33, .ldb = 64}); });
  EXPECT_NE(m.find("ldb = 64 is less than B's row length 65"), std::string::npos) << m;

  m = message_of<InvalidArgument>([&] { blas.gemm(a, b, c, {.m = 127, .n = 65, .k = 3000000000}); });
  EXPECT_NE(m.find("exceeds cuBLAS's 32-bit limit"), std::string::npos) << m;

  m = message_of<InvalidArgument>(
      [&] { blas.gemm_strided_batched(a, b, c, {.m = 2, .n = 2, .k = 2}, {.count = 3, .stride_c = 1}); });
  EXPECT_NE(m.find("the batches of C would overlap"), std::string::npos) << m;

  m = message_of<InvalidArgument>([&] { blas.gemv(a, b.first(32), c.first(127), {.rows = 127, .cols = 33}); });
  EXPECT_NE(m.find("x must have 33 elements (cols) but its view has 32"), std::string::npos) << m;

  EXPECT_EQ(fake_blas().calls(Entry::GemmEx), 0) << "nothing reached cuBLAS";
}

// A handle keeps the GEMM it checked last, and a repeat skips the checks: every input the
// checks read must still make a changed call checked again.
TEST_F(BlasTest, ARepeatedGemmIsCheckedAgainWhenAnyInputChanges) {
  Stream s(dev());
  Blas blas(s);
  auto ha = random<float>(127 * 33), hb = random<float>(33 * 65);
  auto a = make(s, ha), b = make(s, hb);
  const Gemm g{.m = 127, .n = 65, .k = 33};
  auto product_is_right = [&](const DeviceBuffer<float>& c, const Gemm& shape, const char* what) {
    s.synchronize();
    std::vector<double> want(static_cast<std::size_t>(shape.m * shape.n));
    testing::host_gemm(shape, ha, hb, want);
    std::vector<float> got = read(c);
    got.resize(want.size());
    expect_near(got, want, what);
  };

  auto c = poisoned<float>(s, 127 * 65);
  blas.gemm(a, b, c, g);
  product_is_right(c, g, "the first call");

  // The same shape on a view too short for C, then with a leading dimension too small, then
  // as a batch of two that C cannot hold.
  std::string m = message_of<InvalidArgument>([&] { blas.gemm(a, b, c.first(100), g); });
  EXPECT_NE(m.find("needs 8255 elements"), std::string::npos) << m;
  m = message_of<InvalidArgument>([&] { blas.gemm(a, b, c, {.m = 127, .n = 65, .k = 33, .ldb = 64}); });
  EXPECT_NE(m.find("ldb = 64 is less than B's row length 65"), std::string::npos) << m;
  m = message_of<InvalidArgument>([&] { blas.gemm_strided_batched(a, b, c, g, {.count = 2}); });
  EXPECT_NE(m.find("in 2 batches"), std::string::npos) << m;

  // A refused call left nothing saved: the first call again, on fresh poison.
  auto again = poisoned<float>(s, 127 * 65);
  blas.gemm(a, b, again, g);
  product_is_right(again, g, "the first call repeated after refusals");

  // Another shape on the same handle computes that shape.
  const Gemm fewer_rows{.m = 100, .n = 65, .k = 33};
  auto c2 = poisoned<float>(s, 100 * 65);
  blas.gemm(a.first(100 * 33), b, c2, fewer_rows);
  product_is_right(c2, fewer_rows, "another shape");

  // The same shape and sizes in another element type: double computes in fp64.
  std::vector<double> da(ha.begin(), ha.end()), db(hb.begin(), hb.end());
  auto a64 = make(s, da), b64 = make(s, db);
  auto c64 = poisoned<double>(s, 127 * 65);
  blas.gemm(a64, b64, c64, g);
  s.synchronize();
  std::vector<double> want(127 * 65);
  testing::host_gemm(g, da, db, want);
  expect_near(read(c64), want, "double after float");
}

TEST_F(BlasTest, AViewLongerThanAPackedMatrixIsRefusedAndAnExplicitLeadingDimensionAllowsIt) {
  Stream s(dev());
  Blas blas(s);
  auto a = make(s, random<float>(5 * 4)), b = make(s, random<float>(4 * 2));
  auto c = poisoned<float>(s, 4 * 2);
  std::string m = message_of<InvalidArgument>([&] { blas.gemm(a, b, c, {.m = 4, .n = 2, .k = 4}); });
  EXPECT_NE(m.find("needs 16 elements, but its view has 20"), std::string::npos) << m;
  blas.gemm(a, b, c, {.m = 4, .n = 2, .k = 4, .lda = 4});  // "at least" with an explicit ld
  EXPECT_EQ(fake_blas().calls(Entry::GemmEx), 1);
}

class TwoDeviceBlasTest : public BlasTest {
  void configure(fake::Driver& d) override { d.devices.resize(2); }
};

TEST_F(TwoDeviceBlasTest, AViewOnAnotherDeviceIsRefused) {
  Stream s0(Device::get(0)), s1(Device::get(1));
  Blas blas(s0);
  auto a = make(s0, random<float>(4)), b = make(s1, random<float>(4));
  auto c = poisoned<float>(s0, 4);
  std::string m = message_of<InvalidArgument>([&] { blas.gemm(a, b, c, {.m = 2, .n = 2, .k = 2}); });
  EXPECT_NE(m.find("B is on device 1 but the stream is on device 0"), std::string::npos) << m;
}

// ---- handles ----

TEST_F(BlasTest, ABlasMadeAgainOnItsStreamGetsItsHandleBackWithoutRebinding) {
  Stream s(dev());
  auto a = make(s, random<float>(4));
  auto c = poisoned<float>(s, 4);
  for (int i = 0; i < 3; ++i) {
    Blas blas(s);
    blas.gemm(a, a, c, {.m = 2, .n = 2, .k = 2});
  }
  EXPECT_EQ(fake_blas().calls(Entry::Create), 1);
  EXPECT_EQ(fake_blas().calls(Entry::SetStream), 1);
  EXPECT_EQ(fake_blas().calls(Entry::SetWorkspace), 1) << "set with the binding, once";
}

TEST_F(BlasTest, GemmsOnABoundHandleCallOnlyTheGemm) {
  Stream s(dev());
  Blas blas(s);
  auto a = make(s, random<float>(16)), b = make(s, random<float>(16));
  auto c = poisoned<float>(s, 16);
  fake_blas().clear_log();
  blas.gemm(a, b, c, {.m = 4, .n = 4, .k = 4});
  blas.gemm(a, b, c, {.m = 4, .n = 4, .k = 4});
  blas.gemm(a.first(8), b, c.first(8), {.m = 2, .n = 4, .k = 4});  // another shape
  blas.gemv(a, b.first(4), c.first(4), {.rows = 4, .cols = 4});
  EXPECT_EQ(fake_blas().log(), std::vector<Entry>(4, Entry::GemmEx))
      << "the stream and the workspace were set when the handle was bound, never per call";
}

TEST_F(BlasTest, ARepeatedGemmAllocatesNothingOnTheHost) {
  Stream s(dev());
  Blas blas(s);
  auto a = make(s, random<__nv_bfloat16>(64)), b = make(s, random<__nv_bfloat16>(64));
  auto c = poisoned<__nv_bfloat16>(s, 64);
  blas.gemm(a, b, c, {.m = 8, .n = 8, .k = 8});
  testing::CountAllocations counter;
  for (int i = 0; i < 10; ++i) {
    blas.gemm(a, b, c, {.m = 8, .n = 8, .k = 8, .beta = 0.5});
    blas.gemm_strided_batched(a, b, c, {.m = 4, .n = 4, .k = 4}, {.count = 4});
  }
  EXPECT_EQ(counter.count(), 0);
}

TEST_F(BlasTest, TwoBlasOnOneStreamHaveTwoHandlesEachWithItsWorkspace) {
  Stream s(dev());
  Blas first(s), second(s);
  EXPECT_NE(first.native_handle(), second.native_handle());
  EXPECT_EQ(fake_blas().calls(Entry::Create), 2);
  EXPECT_EQ(fake_blas().calls(Entry::SetWorkspace), 2);
  EXPECT_EQ(first.workspace_bytes(), std::size_t{32} << 20) << "compute capability 9.0: cuBLAS recommends 32 MiB";
}

TEST_F(BlasTest, AHandleMovingToAnotherStreamIsRebound) {
  Stream s1(dev()), s2(dev());
  auto a = make(s1, random<float>(4));
  auto c = poisoned<float>(s1, 4);
  cublasHandle_t handle = nullptr;
  {
    Blas blas(s1);
    handle = blas.native_handle();
    blas.gemm(a, a, c, {.m = 2, .n = 2, .k = 2});
  }
  Blas blas(s2);
  EXPECT_EQ(blas.native_handle(), handle) << "the pool's idle handle";
  EXPECT_EQ(fake_blas().calls(Entry::SetStream), 2);
  EXPECT_EQ(fake_blas().calls(Entry::SetWorkspace), 2) << "cublasSetStream resets the workspace: set again";
  // The workspace and C were last written on s1: the GEMM on s2 is ordered after it (the
  // fake's ordering model checks it at the end of the test).
  blas.gemm(a, a, c, {.m = 2, .n = 2, .k = 2});
  s2.synchronize();
}

TEST_F(BlasTest, AHandleUsedFromTwoThreadsAtOnceIsRefused) {
  Stream s(dev());
  Blas blas(s);
  auto a = make(s, random<float>(4));
  auto c1 = poisoned<float>(s, 4), c2 = poisoned<float>(s, 4);
  std::mutex m;
  std::condition_variable cv;
  bool inside = false, tried = false;
  std::atomic<int> entered{0};
  fake_blas().during_gemm = [&] {  // holds the first GEMM open until the second thread tried
    if (entered++ != 0) return;
    std::unique_lock l(m);
    inside = true;
    cv.notify_all();
    cv.wait(l, [&] { return tried; });
  };
  std::thread first([&] { blas.gemm(a, a, c1, {.m = 2, .n = 2, .k = 2}); });
  {
    std::unique_lock l(m);
    cv.wait(l, [&] { return inside; });
  }
  std::string message = message_of<HandleInUse>([&] { blas.gemm(a, a, c2, {.m = 2, .n = 2, .k = 2}); });
  {
    std::lock_guard l(m);
    tried = true;
  }
  cv.notify_all();
  first.join();
  EXPECT_NE(message.find("Blas::gemm on stream"), std::string::npos) << message;
  EXPECT_NE(message.find("is in use by thread"), std::string::npos) << message;
  EXPECT_EQ(fake_blas().calls(Entry::GemmEx), 1) << "the refused call never reached cuBLAS";
  blas.gemm(a, a, c2, {.m = 2, .n = 2, .k = 2});  // the handle is free again
  EXPECT_EQ(fake_blas().calls(Entry::GemmEx), 2);
}

TEST_F(BlasTest, AnEmptyBlasThrowsEmptyHandle) {
  Stream s(dev());
  Blas blas(s);
  Blas moved(std::move(blas));
  auto a = make(s, random<float>(4));
  auto c = poisoned<float>(s, 4);
  EXPECT_THROW(blas.gemm(a, a, c, {.m = 2, .n = 2, .k = 2}), EmptyHandle);
  EXPECT_THROW(Blas(StreamRef{}), EmptyHandle);
  EXPECT_EQ(blas.workspace_bytes(), 0u);
  EXPECT_EQ(blas.native_handle(), nullptr);
}

// ---- errors ----

TEST_F(BlasTest, AFailedGemmNamesTheStatusTheCallTheShapesAndTheStream) {
  Stream s(dev());
  Blas blas(s);
  auto a = make(s, random<__nv_bfloat16>(7 * 3)), b = make(s, random<__nv_bfloat16>(3 * 5));
  auto c = poisoned<__nv_bfloat16>(s, 7 * 5);
  fake_blas().fail(Entry::GemmEx, 1, CUBLAS_STATUS_NOT_SUPPORTED);
  try {
    blas.gemm(a, b, c, {.m = 7, .n = 5, .k = 3, .transpose_a = false});
    FAIL() << "no BlasError";
  } catch (const BlasError& e) {
    EXPECT_EQ(e.status(), CUBLAS_STATUS_NOT_SUPPORTED);
    EXPECT_EQ(e.status_name(), "CUBLAS_STATUS_NOT_SUPPORTED");
    EXPECT_EQ(e.call(), "cublasGemmEx");
    std::string w = e.what();
    for (const char* part : {"cublasGemmEx (gemm of __nv_bfloat16, C[m×n] = A[m×k]·B[k×n] with m = 7, n = 5, k = 3",
                             "row-major) on stream 0x", "on device 0", ": CUBLAS_STATUS_NOT_SUPPORTED: "})
      EXPECT_NE(w.find(part), std::string::npos) << part << " in: " << w;
  }
  blas.gemm(a, b, c, {.m = 7, .n = 5, .k = 3});  // usable afterwards
}

TEST_F(BlasTest, StatusNamesAreKnownWithoutTheLibrary) {
  EXPECT_EQ(blas_status_name(CUBLAS_STATUS_EXECUTION_FAILED), "CUBLAS_STATUS_EXECUTION_FAILED");
  EXPECT_EQ(blas_status_name(static_cast<cublasStatus_t>(999)), "cuBLAS status 999");
}

TEST_F(BlasTest, TheLibraryReportsWhereItCameFrom) {
  EXPECT_TRUE(blas_available());
  BlasLibrary lib = blas_library();
  EXPECT_EQ(lib.path, "(fake libcublas)");
  EXPECT_EQ(lib.version, "13.1.0");
}

// ---- ordering: declared work ----

TEST_F(BlasTest, OnOneStreamAGemmRecordsNoEventAndWaitsForNothing) {
  Stream s(dev());
  Blas blas(s);
  auto a = make(s, random<float>(16)), b = make(s, random<float>(16));
  auto c = poisoned<float>(s, 16);
  blas.gemm(a, b, c, {.m = 4, .n = 4, .k = 4});  // the workspace comes over from the service stream once
  fake().clear_log();
  for (int i = 0; i < 10; ++i) blas.gemm(a, b, c, {.m = 4, .n = 4, .k = 4, .beta = 1.0});
  EXPECT_EQ(records(), 0);
  EXPECT_EQ(waits(), 0);
}

TEST_F(BlasTest, AKernelOnAnotherStreamReadingCWaitsForTheGemm) {
  Stream s1(dev()), s2(dev());
  Blas blas(s1);
  auto a = make(s1, random<float>(16)), b = make(s1, random<float>(16));
  auto c = poisoned<float>(s1, 16);
  DeviceBuffer<float> out(s2, 16, uninitialized);
  blas.gemm(a, b, c, {.m = 4, .n = 4, .k = 4});
  fake().clear_log();
  copy(out, c, s2);  // a kernel-like read of C on the second stream
  EXPECT_EQ(waits(), 1) << "one wait where the streams meet";
  s2.synchronize();
  EXPECT_EQ(at(out, 5), at(c, 5));
}

TEST_F(BlasTest, AGemmOnAnotherStreamWritingCWaitsForItsReaders) {
  Stream s1(dev()), s2(dev());
  Blas blas(s2);
  auto a = make(s1, random<float>(16)), b = make(s1, random<float>(16));
  auto c = make(s1, random<float>(16));
  DeviceBuffer<float> out(s1, 16, uninitialized);
  copy(out, c, s1);                               // s1 reads C
  blas.gemm(a, b, c, {.m = 4, .n = 4, .k = 4});  // s2 overwrites it: must wait for the read
  s2.synchronize();
}

TEST_F(BlasTest, WithoutTheDeclarationTheOrderingModelSeesTheRace) {
  ignore_hazards();
  Stream s1(dev()), s2(dev());
  Blas blas(s1);
  auto a = make(s1, random<float>(16)), b = make(s1, random<float>(16));
  auto c = poisoned<float>(s1, 16);
  DeviceBuffer<float> out(s2, 16, uninitialized);
  blas.gemm(a, b, c, {.m = 4, .n = 4, .k = 4});
  {
    ManualOrdering raw;  // what a raw call that declares nothing amounts to
    blas.gemm(a, b, c, {.m = 4, .n = 4, .k = 4});
    copy(out, c, s2);
  }
  s1.synchronize();
  s2.synchronize();
  bool raced = false;
  for (const auto& h : fake().hazards()) raced |= h.description.find("cublasGemmEx C") != std::string::npos;
  EXPECT_TRUE(raced) << "the fake's ordering model must see the undeclared GEMM race the read";
}

// ---- capture ----

TEST_F(BlasTest, ACapturedGemmKeepsItsBuffersAliveAndReplaysWithoutAnAllocation) {
  Stream s(dev());
  Blas blas(s);
  auto ha = random<float>(6 * 4), hb = random<float>(4 * 5);
  auto a = std::make_unique<DeviceBuffer<float>>(make(s, ha));
  auto b = std::make_unique<DeviceBuffer<float>>(make(s, hb));
  auto c = std::make_unique<DeviceBuffer<float>>(poisoned<float>(s, 6 * 5));
  Graph graph = capture_nonempty(s, [&] { blas.gemm(*a, *b, *c, {.m = 6, .n = 5, .k = 4}); });
  const DeviceBuffer<float>* result = c.get();
  GraphExec exec = graph.instantiate();
  a.reset();
  b.reset();
  auto memory = fake().live("device memory");
  std::vector<double> want(30);
  testing::host_gemm(Gemm{.m = 6, .n = 5, .k = 4}, ha, hb, want);
  for (int i = 0; i < 3; ++i) {
    std::memset(reinterpret_cast<void*>(result->device_pointer()), 0xff, result->size_bytes());  // poison again
    exec.launch(s);
    s.synchronize();
    expect_near(read(*result), want, "replay " + std::to_string(i));
  }
  EXPECT_EQ(fake().live("device memory"), memory) << "the graph keeps A and B";
  c.reset();
}

TEST_F(BlasTest, TheFirstCaptureOnABrandNewStreamAndHandleWorks) {
  Stream s(dev());
  auto ha = random<float>(3 * 3);
  auto a = make(s, ha);
  auto c = poisoned<float>(s, 3 * 3);
  Stream fresh(dev());
  Graph graph = capture_nonempty(fresh, [&] {
    Blas blas(fresh);  // the pool has no handle: made (and its workspace) while capturing
    blas.gemm(a, a, c, {.m = 3, .n = 3, .k = 3});
  });
  EXPECT_EQ(fake_blas().calls(Entry::Create), 1);
  GraphExec exec = graph.instantiate();
  exec.launch(fresh);
  fresh.synchronize();
  std::vector<double> want(9);
  testing::host_gemm(Gemm{.m = 3, .n = 3, .k = 3}, ha, ha, want);
  expect_near(read(c), want, "the first capture's replay");
  // The fixture fails the test if the fake saw cublasCreate invalidate the capture, or a
  // GEMM captured without a workspace.
}

TEST_F(BlasTest, DeclaredWorkInsideACaptureOrdersTheReplayAgainstOtherStreams) {
  Stream s(dev()), other(dev());
  Blas blas(s);
  auto a = make(s, random<float>(16));
  auto c = poisoned<float>(s, 16);
  DeviceBuffer<float> out(other, 16, uninitialized);
  Graph graph = capture_nonempty(s, [&] { blas.gemm(a, a, c, {.m = 4, .n = 4, .k = 4}); });
  GraphExec exec = graph.instantiate();
  exec.launch(s);
  copy(out, c, other);  // after the replay: ordered through the graph's tracking
  other.synchronize();
  EXPECT_EQ(at(out, 3), at(c, 3));
}

}  // namespace
}  // namespace cudakit
