// BlasLt (blas_lt.hpp) on the fake driver and the fake cuBLASLt: every epilogue against a
// host reference, the algorithm chosen once per shape, the bias checks, errors, and a
// captured matmul.
#include <gtest/gtest.h>

#include <cmath>

#include "allocation_counter.hpp"
#include "blas_fixture.hpp"

namespace cudakit {
namespace {

using testing::BlasTest;
using testing::message_of;
using cublas::Entry;
using testing::activation;


template <class T>
class BlasLtTypedTest : public BlasTest {};
using LtTypes = ::testing::Types<float, __half, __nv_bfloat16>;
TYPED_TEST_SUITE(BlasLtTypedTest, LtTypes);

TYPED_TEST(BlasLtTypedTest, EveryEpilogueMatchesTheHost) {
  using T = TypeParam;
  Stream s(Device::get(0));
  BlasLt lt(s);
  const Gemm g{.m = 9, .n = 7, .k = 5, .transpose_b = true};
  auto ha = this->template random<T>(9 * 5), hb = this->template random<T>(7 * 5), hbias = this->template random<T>(7);
  auto a = this->make(s, ha), b = this->make(s, hb), bias = this->make(s, hbias);
  for (Epilogue e : {Epilogue::none, Epilogue::bias, Epilogue::relu, Epilogue::relu_bias, Epilogue::gelu,
                     Epilogue::gelu_bias}) {
    auto c = this->template poisoned<T>(s, 9 * 7);
    if (has_bias(e)) lt.matmul(a, b, bias, c, g, e);
    else lt.matmul(a, b, c, g, e);
    s.synchronize();
    std::vector<double> want(9 * 7);
    testing::host_gemm(g, ha, hb, want);
    for (std::size_t i = 0; i < want.size(); ++i)
      want[i] = activation(want[i] + (has_bias(e) ? testing::to_double(hbias[i % 7]) : 0.0), e);
    this->expect_near(this->read(c), want, "epilogue " + std::to_string(static_cast<int>(e)));
  }
  auto calls = this->fake_blas().gemms();
  ASSERT_EQ(calls.size(), 6u);
  EXPECT_EQ(calls[5].epilogue, CUBLASLT_EPILOGUE_GELU_BIAS);
  EXPECT_EQ(calls[1].epilogue, CUBLASLT_EPILOGUE_BIAS);
  EXPECT_EQ(calls[0].m, 7) << "row-major, as Blas: cuBLASLt's m is our n (the bias runs along it)";
}

// A handle keeps the matmul shape it checked last, and a repeat skips the checks, as a
// Blas GEMM does: a changed view, leading dimension or bias is checked again, a refused
// call leaves nothing saved, and the first call repeated afterwards is right.
TEST_F(BlasTest, ARepeatedMatmulIsCheckedAgainWhenAnyInputChanges) {
  Stream s(dev());
  BlasLt lt(s);
  auto ha = random<float>(37 * 19), hb = random<float>(19 * 23), hbias = random<float>(23);
  auto a = make(s, ha), b = make(s, hb), bias = make(s, hbias);
  const Gemm g{.m = 37, .n = 23, .k = 19};
  auto product_is_right = [&](const DeviceBuffer<float>& c, const char* what) {
    s.synchronize();
    std::vector<double> want(37 * 23);
    testing::host_gemm(g, ha, hb, want);
    for (std::size_t i = 0; i < want.size(); ++i) want[i] += testing::to_double(hbias[i % 23]);
    expect_near(read(c), want, what);
  };
  auto c = poisoned<float>(s, 37 * 23);
  lt.matmul(a, b, bias, c, g, Epilogue::bias);
  product_is_right(c, "the first call");

  std::string m = message_of<InvalidArgument>([&] { lt.matmul(a, b, bias, c.first(100), g, Epilogue::bias); });
  EXPECT_NE(m.find("needs 851 elements"), std::string::npos) << m;
  m = message_of<InvalidArgument>(
      [&] { lt.matmul(a, b, bias, c, {.m = 37, .n = 23, .k = 19, .ldb = 22}, Epilogue::bias); });
  EXPECT_NE(m.find("ldb = 22 is less than B's row length 23"), std::string::npos) << m;
  m = message_of<InvalidArgument>([&] { lt.matmul(a, b, bias.first(22), c, g, Epilogue::bias); });
  EXPECT_NE(m.find("n = 23 elements"), std::string::npos) << m;

  auto again = poisoned<float>(s, 37 * 23);
  lt.matmul(a, b, bias, again, g, Epilogue::bias);
  product_is_right(again, "the first call repeated after refusals");
  EXPECT_EQ(fake_blas().calls(Entry::LtMatmul), 2) << "no refused call reached cuBLASLt";
}

TEST_F(BlasTest, TheAlgorithmIsChosenOncePerShapeAndType) {
  Stream s(dev());
  BlasLt lt(s);
  auto a = make(s, random<float>(8 * 8)), b = make(s, random<float>(8 * 8));
  auto c = poisoned<float>(s, 8 * 8);
  for (int i = 0; i < 5; ++i) lt.matmul(a, b, c, {.m = 8, .n = 8, .k = 8}, Epilogue::relu);
  EXPECT_EQ(fake_blas().calls(Entry::LtMatmulAlgoGetHeuristic), 1);
  EXPECT_EQ(fake_blas().calls(Entry::LtMatmulDescCreate), 1) << "the descriptors are kept with the algorithm";
  EXPECT_EQ(fake_blas().calls(Entry::LtMatmul), 5);
  lt.matmul(a.first(32), b, c.first(32), {.m = 4, .n = 8, .k = 8}, Epilogue::relu);  // another shape
  lt.matmul(a, b, c, {.m = 8, .n = 8, .k = 8}, Epilogue::gelu);  // another epilogue
  auto h = make(s, random<__half>(64));
  auto hc = poisoned<__half>(s, 64);
  lt.matmul(h, h, hc, {.m = 8, .n = 8, .k = 8}, Epilogue::relu);  // another type
  EXPECT_EQ(fake_blas().calls(Entry::LtMatmulAlgoGetHeuristic), 4);
  EXPECT_EQ(lt.cached_shapes(), 4u);
  EXPECT_EQ(fake_blas().live("preference"), 0u) << "the heuristic's preference is not kept";
}

TEST_F(BlasTest, ARepeatedMatmulWithAnEpilogueCallsOnlyTheMatmul) {
  Stream s(dev());
  BlasLt lt(s);
  auto a = make(s, random<float>(4 * 3)), b = make(s, random<float>(3 * 5)), bias = make(s, random<float>(5));
  auto c = poisoned<float>(s, 20);
  const Gemm g{.m = 4, .n = 5, .k = 3};
  lt.matmul(a, b, bias, c, g, Epilogue::gelu_bias);
  fake_blas().clear_log();
  for (int i = 0; i < 3; ++i) lt.matmul(a, b, bias, c, g, Epilogue::gelu_bias);
  EXPECT_EQ(fake_blas().log(), std::vector<Entry>(3, Entry::LtMatmul))
      << "no descriptor, layout or preference made, no heuristic asked, the bias not set again";
  EXPECT_EQ(lt.cached_shapes(), 1u);
}

TEST_F(BlasTest, ANewBiasIsSetOnTheCachedDescriptorAndNothingElseIsMade) {
  Stream s(dev());
  BlasLt lt(s);
  auto ha = random<float>(4 * 3), hb = random<float>(3 * 5), h1 = random<float>(5), h2 = random<float>(5);
  auto a = make(s, ha), b = make(s, hb), bias1 = make(s, h1), bias2 = make(s, h2);
  auto c = poisoned<float>(s, 20);
  const Gemm g{.m = 4, .n = 5, .k = 3};
  lt.matmul(a, b, bias1, c, g, Epilogue::bias);
  fake_blas().clear_log();
  lt.matmul(a, b, bias2, c, g, Epilogue::bias);
  EXPECT_EQ(fake_blas().log(), (std::vector<Entry>{Entry::LtMatmulDescSetAttribute, Entry::LtMatmul}));
  s.synchronize();
  std::vector<double> want(20);
  testing::host_gemm(g, ha, hb, want);
  for (int i = 0; i < 20; ++i) want[i] += h2[i % 5];
  expect_near(read(c), want, "the second bias");
}

TEST_F(BlasTest, AlternatingShapesArePlannedOnceEachAndComputeTheirOwnProducts) {
  Stream s(dev());
  BlasLt lt(s);
  auto ha = random<float>(6 * 4), hb = random<float>(4 * 5);
  auto a = make(s, ha), b = make(s, hb);
  auto c = poisoned<float>(s, 30);
  const Gemm wide{.m = 6, .n = 5, .k = 4}, narrow{.m = 3, .n = 5, .k = 4};  // narrow: A's first 3 rows
  for (int round = 0; round < 3; ++round) {
    lt.matmul(a, b, c, wide, Epilogue::relu);
    s.synchronize();
    std::vector<double> want(30);
    testing::host_gemm(wide, ha, hb, want);
    for (double& v : want) v = activation(v, Epilogue::relu);
    expect_near(read(c), want, "the 6x5 product, round " + std::to_string(round));

    auto small = poisoned<float>(s, 15);
    lt.matmul(a.first(12), b, small, narrow, Epilogue::relu);
    s.synchronize();
    std::vector<double> want_small(15);
    testing::host_gemm(narrow, std::vector<float>(ha.begin(), ha.begin() + 12), hb, want_small);
    for (double& v : want_small) v = activation(v, Epilogue::relu);
    expect_near(read(small), want_small, "the 3x5 product, round " + std::to_string(round));
  }
  EXPECT_EQ(fake_blas().calls(Entry::LtMatmulAlgoGetHeuristic), 2);
  EXPECT_EQ(fake_blas().calls(Entry::LtMatrixLayoutCreate), 6) << "three layouts per shape, once";
  EXPECT_EQ(fake_blas().calls(Entry::LtMatmul), 6);
}

TEST_F(BlasTest, ARepeatedMatmulAllocatesNothingOnTheHost) {
  Stream s(dev());
  BlasLt lt(s);
  auto a = make(s, random<float>(16)), bias = make(s, random<float>(4));
  auto c = poisoned<float>(s, 16);
  lt.matmul(a, a, bias, c, {.m = 4, .n = 4, .k = 4}, Epilogue::relu_bias);
  testing::CountAllocations counter;
  for (int i = 0; i < 10; ++i) lt.matmul(a, a, bias, c, {.m = 4, .n = 4, .k = 4}, Epilogue::relu_bias);
  EXPECT_EQ(counter.count(), 0);
}

TEST_F(BlasTest, ThePooledHandleKeepsItsPlansForItsNextUser) {
  Stream s(dev());
  auto a = make(s, random<float>(16));
  auto c = poisoned<float>(s, 16);
  for (int i = 0; i < 3; ++i) {
    BlasLt lt(s);
    lt.matmul(a, a, c, {.m = 4, .n = 4, .k = 4});
  }
  EXPECT_EQ(fake_blas().calls(Entry::LtCreate), 1);
  EXPECT_EQ(fake_blas().calls(Entry::LtMatmulAlgoGetHeuristic), 1);
}

TEST_F(BlasTest, APlannedMatmulTakesEachCallsBias) {
  Stream s(dev());
  BlasLt lt(s);
  auto ha = random<float>(4 * 3), hb = random<float>(3 * 5), h1 = random<float>(5), h2 = random<float>(5);
  auto a = make(s, ha), b = make(s, hb), bias1 = make(s, h1), bias2 = make(s, h2);
  auto c1 = poisoned<float>(s, 20), c2 = poisoned<float>(s, 20);
  const Gemm g{.m = 4, .n = 5, .k = 3};
  lt.matmul(a, b, bias1, c1, g, Epilogue::bias);
  lt.matmul(a, b, bias2, c2, g, Epilogue::bias);
  s.synchronize();
  std::vector<double> base(20);
  testing::host_gemm(g, ha, hb, base);
  std::vector<double> want1 = base, want2 = base;
  for (int i = 0; i < 20; ++i) {
    want1[i] += h1[i % 5];
    want2[i] += h2[i % 5];
  }
  expect_near(read(c1), want1, "the first bias");
  expect_near(read(c2), want2, "the second bias");
}

TEST_F(BlasTest, AnUnalignedViewGetsAPlanOfItsOwn) {
  Stream s(dev());
  BlasLt lt(s);
  auto a = make(s, random<float>(17)), b = make(s, random<float>(16));
  auto c = poisoned<float>(s, 16);
  lt.matmul(a.first(16), b, c, {.m = 4, .n = 4, .k = 4});
  lt.matmul(a.subspan(1), b, c, {.m = 4, .n = 4, .k = 4});  // 4-byte aligned: fewer algorithms fit
  EXPECT_EQ(fake_blas().calls(Entry::LtMatmulAlgoGetHeuristic), 2);
}

TEST_F(BlasTest, TheBiasMustMatchTheEpilogueAndTheColumns) {
  Stream s(dev());
  BlasLt lt(s);
  auto a = make(s, random<float>(16)), bias = make(s, random<float>(4));
  auto c = poisoned<float>(s, 16);
  const Gemm g{.m = 4, .n = 4, .k = 4};
  std::string m = message_of<InvalidArgument>([&] { lt.matmul(a, a, c, g, Epilogue::gelu_bias); });
  EXPECT_NE(m.find("Epilogue::gelu_bias adds a bias, but none was given"), std::string::npos) << m;
  m = message_of<InvalidArgument>([&] { lt.matmul(a, a, bias, c, g, Epilogue::relu); });
  EXPECT_NE(m.find("a bias was given, but Epilogue::relu adds none"), std::string::npos) << m;
  m = message_of<InvalidArgument>([&] { lt.matmul(a, a, bias.first(3), c, g, Epilogue::bias); });
  EXPECT_NE(m.find("the bias must have n = 4 elements (one per column of C) but its view has 3"), std::string::npos)
      << m;
  m = message_of<InvalidArgument>([&] { lt.matmul(a, a, c.first(15), g); });
  EXPECT_NE(m.find("BlasLt::matmul: C is C[m×n]"), std::string::npos) << m;
  EXPECT_EQ(fake_blas().calls(Entry::LtMatmul), 0);
}

TEST_F(BlasTest, NoAlgorithmForAShapeIsABlasErrorNamingTheHeuristic) {
  fake_blas().heuristic_results = 0;
  Stream s(dev());
  BlasLt lt(s);
  auto a = make(s, random<float>(16));
  auto c = poisoned<float>(s, 16);
  try {
    lt.matmul(a, a, c, {.m = 4, .n = 4, .k = 4}, Epilogue::gelu);
    FAIL() << "no BlasError";
  } catch (const BlasError& e) {
    EXPECT_EQ(e.call(), "cublasLtMatmulAlgoGetHeuristic");
    EXPECT_EQ(e.status(), CUBLAS_STATUS_NOT_SUPPORTED);
    std::string w = e.what();
    EXPECT_NE(w.find("epilogue gelu"), std::string::npos) << w;
    EXPECT_NE(w.find("no algorithm for it within a workspace of 33554432 bytes"), std::string::npos) << w;
  }
  EXPECT_EQ(lt.cached_shapes(), 0u);
  EXPECT_EQ(fake_blas().live("matmul desc"), 0u) << "the failed plan's descriptors are destroyed";
  EXPECT_EQ(fake_blas().live("layout"), 0u);
}

TEST_F(BlasTest, ACapturedMatmulWithAnEpilogueReplays) {
  Stream s(dev());
  BlasLt lt(s);
  auto ha = random<__nv_bfloat16>(6 * 8), hb = random<__nv_bfloat16>(8 * 4), hbias = random<__nv_bfloat16>(4);
  auto a = make(s, ha), b = make(s, hb), bias = make(s, hbias);
  auto c = poisoned<__nv_bfloat16>(s, 6 * 4);
  const Gemm g{.m = 6, .n = 4, .k = 8};
  Graph graph = capture_nonempty(s, [&] { lt.matmul(a, b, bias, c, g, Epilogue::gelu_bias); });
  GraphExec exec = graph.instantiate();
  exec.launch(s);
  s.synchronize();
  std::vector<double> want(24);
  testing::host_gemm(g, ha, hb, want);
  for (int i = 0; i < 24; ++i) want[i] = activation(want[i] + testing::to_double(hbias[i % 4]), Epilogue::gelu_bias);
  expect_near(read(c), want, "the replay");
}

TEST_F(BlasTest, AFailedMatmulNamesTheCallAndTheEpilogue) {
  Stream s(dev());
  BlasLt lt(s);
  auto a = make(s, random<float>(16));
  auto c = poisoned<float>(s, 16);
  fake_blas().fail(Entry::LtMatmul, 1, CUBLAS_STATUS_EXECUTION_FAILED);
  std::string m = message_of<BlasError>([&] { lt.matmul(a, a, c, {.m = 4, .n = 4, .k = 4}, Epilogue::relu); });
  for (const char* part : {"cublasLtMatmul (matmul of float", "m = 4, n = 4, k = 4", "epilogue relu", "on stream 0x",
                           "CUBLAS_STATUS_EXECUTION_FAILED"})
    EXPECT_NE(m.find(part), std::string::npos) << part << " in: " << m;
  lt.matmul(a, a, c, {.m = 4, .n = 4, .k = 4}, Epilogue::relu);  // usable afterwards
}

}  // namespace
}  // namespace cudakit
