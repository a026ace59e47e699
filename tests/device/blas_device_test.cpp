// cuBLAS and cuBLASLt through Blas and BlasLt on a real GPU, against host references on
// fresh random data: every type and transpose at odd sizes, strided-batched GEMMs, GEMVs,
// every Lt epilogue; a GEMM on one stream and a kernel reading its result on another,
// ordered by the declaration (and racing without it); 8 GEMMs and kernels captured, their
// buffers dropped, replayed 1000 times; the first capture on a brand-new stream and handle.
//
// Skipped without a GPU, and without cuBLAS. With CUDAKIT_REQUIRE_GPU=1 a missing cuBLAS
// is a failure, like a missing GPU: that variable says the machine must run everything
// (the device suite sets it; the H200 has cuBLAS from the toolkit and the pip wheel).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cudakit/blas.hpp"
#include "cudakit/blas_lt.hpp"
#include "blas_reference.hpp"
#include "gpu_fixture.hpp"
#include "stream_gate.hpp"

#ifdef CUDAKIT_HAVE_TEST_KERNELS
#include "test_kernels.hpp"
#endif

namespace cudakit {
namespace {

using testing::expect_held;
using testing::GpuTest;

using testing::from_double;
using testing::gelu;
using testing::to_double;

// How far a result may be from the double reference, relative to the sum of the magnitudes
// that made it (Σ|alpha·a·b| + |beta·c| + |bias|): fp32 accumulation over a few hundred
// terms, then one rounding to T.
template <class T>
double relative_bound(bool tf32 = false) {
  if constexpr (std::is_same_v<T, __half>) return 2e-3;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return 1e-2;
  else if constexpr (std::is_same_v<T, double>) return 1e-12;
  else return tf32 ? 4e-3 : 2e-5;
}

// A row-major reference: value and magnitude of each element of alpha·op(A)·op(B) + beta·C
// (C packed; empty when beta is 0).
struct Reference {
  std::vector<double> value, magnitude;
};
template <class T>
Reference reference(const Gemm& g, const std::vector<T>& a, const std::vector<T>& b, const std::vector<T>& c) {
  Reference r{std::vector<double>(g.m * g.n), {}};
  for (std::size_t i = 0; i < c.size(); ++i) r.value[i] = to_double(c[i]);
  testing::host_gemm(g, a, b, r.value, &r.magnitude);
  return r;
}

class BlasGpuTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    try {
      (void)blas_library();
    } catch (const FeatureUnavailable& e) {
      if (testing::gpu_required()) FAIL() << "CUDAKIT_REQUIRE_GPU=1, but cuBLAS is missing: " << e.what();
      GTEST_SKIP() << e.what();
    }
    seed_ = std::random_device{}();
    rng_.seed(seed_);
  }

  template <class T>
  std::vector<T> random(std::size_t n) {
    return testing::random_values<T>(rng_, n);
  }
  // Small integers (-3 to 3): every sum and product of a few hundred of them is exact in fp32.
  std::vector<float> integers(std::size_t n) {
    std::uniform_int_distribution<int> d(-3, 3);
    std::vector<float> v(n);
    for (auto& x : v) x = static_cast<float>(d(rng_));
    return v;
  }

  template <class T>
  void expect_close(const std::vector<T>& got, const std::vector<double>& want, const std::vector<double>& magnitude,
                    double bound, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    int shown = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      double g = to_double(got[i]);
      if (!(std::fabs(g - want[i]) <= bound * (magnitude[i] + 1e-30)) && shown++ < 5)
        ADD_FAILURE() << what << ": element " << i << " is " << g << ", the host says " << want[i] << " (bound "
                      << bound * magnitude[i] << ", seed " << seed_ << ")";
    }
  }

  unsigned seed_ = 0;
  std::mt19937 rng_;
};

template <class T>
class BlasTypedGpuTest : public BlasGpuTest {};
using ElementTypes = ::testing::Types<float, double, __half, __nv_bfloat16>;
TYPED_TEST_SUITE(BlasTypedGpuTest, ElementTypes);

TYPED_TEST(BlasTypedGpuTest, EveryTransposeAtOddSizesMatchesTheHost) {
  using T = TypeParam;
  Stream s(this->device());
  Blas blas(s);
  constexpr std::int64_t m = 127, n = 65, k = 33;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (double beta : {0.0, -0.75}) {
        const Gemm g{.m = m, .n = n, .k = k, .transpose_a = ta, .transpose_b = tb, .alpha = 1.25, .beta = beta};
        auto ha = this->template random<T>(m * k), hb = this->template random<T>(k * n);
        auto hc = beta != 0 ? this->template random<T>(m * n) : std::vector<T>(m * n, from_double<T>(-777.0));
        auto a = upload(s, ha), b = upload(s, hb), c = upload(s, hc);
        blas.gemm(a, b, c, g);
        auto r = reference(g, ha, hb, beta != 0 ? hc : std::vector<T>{});
        this->expect_close(download(s, c), r.value, r.magnitude, relative_bound<T>(),
                           std::string(ta ? "Aᵀ" : "A") + "·" + (tb ? "Bᵀ" : "B") + ", beta " + std::to_string(beta));
      }
}

TYPED_TEST(BlasTypedGpuTest, StridedBatchedGemmComputesEveryBatch) {
  using T = TypeParam;
  Stream s(this->device());
  Blas blas(s);
  constexpr std::int64_t m = 31, n = 17, k = 9, count = 5;
  const Gemm g{.m = m, .n = n, .k = k, .transpose_b = true};
  auto ha = this->template random<T>(count * m * k), hb = this->template random<T>(count * n * k);
  auto a = upload(s, ha), b = upload(s, hb);
  auto c = upload(s, std::vector<T>(count * m * n, from_double<T>(-777.0)));
  blas.gemm_strided_batched(a, b, c, g, {.count = count});
  auto got = download(s, c);
  for (std::int64_t i = 0; i < count; ++i) {
    std::vector<T> ai(ha.begin() + i * m * k, ha.begin() + (i + 1) * m * k);
    std::vector<T> bi(hb.begin() + i * n * k, hb.begin() + (i + 1) * n * k);
    auto r = reference(g, ai, bi, std::vector<T>{});
    this->expect_close(std::vector<T>(got.begin() + i * m * n, got.begin() + (i + 1) * m * n), r.value, r.magnitude,
                       relative_bound<T>(), "batch " + std::to_string(i));
  }
}

TYPED_TEST(BlasTypedGpuTest, GemvInBothOrientationsMatchesTheHost) {
  using T = TypeParam;
  Stream s(this->device());
  Blas blas(s);
  constexpr std::int64_t rows = 127, cols = 65;
  auto ha = this->template random<T>(rows * cols);
  auto a = upload(s, ha);
  for (bool transpose : {false, true}) {
    const std::int64_t in = transpose ? rows : cols, out = transpose ? cols : rows;
    auto hx = this->template random<T>(in);
    auto x = upload(s, hx);
    auto y = upload(s, std::vector<T>(out, from_double<T>(-777.0)));
    blas.gemv(a, x, y, {.rows = rows, .cols = cols, .transpose = transpose});
    auto r = reference(Gemm{.m = out, .n = 1, .k = in, .transpose_a = transpose}, ha, hx, std::vector<T>{});
    this->expect_close(download(s, y), r.value, r.magnitude, relative_bound<T>(), transpose ? "Aᵀ·x" : "A·x");
  }
}

TEST_F(BlasGpuTest, Tf32GemmStaysWithinTf32Precision) {
  Stream s(device());
  Blas blas(s);
  const Gemm g{.m = 127, .n = 65, .k = 33, .tf32 = true};
  auto ha = random<float>(127 * 33), hb = random<float>(33 * 65);
  auto a = upload(s, ha), b = upload(s, hb);
  DeviceBuffer<float> c(s, 127 * 65, uninitialized);
  blas.gemm(a, b, c, g);
  auto r = reference(g, ha, hb, std::vector<float>{});
  expect_close(download(s, c), r.value, r.magnitude, relative_bound<float>(true), "TF32");
}

template <class T>
class BlasLtTypedGpuTest : public BlasGpuTest {};
using LtTypes = ::testing::Types<float, __half, __nv_bfloat16>;
TYPED_TEST_SUITE(BlasLtTypedGpuTest, LtTypes);

TYPED_TEST(BlasLtTypedGpuTest, EveryEpilogueAtOddSizesMatchesTheHost) {
  using T = TypeParam;
  Stream s(this->device());
  BlasLt lt(s);
  // The plans live with the pooled handle, which an earlier test may have used.
  const std::size_t plans_before = lt.cached_shapes();
  constexpr std::int64_t m = 127, n = 65, k = 33;
  for (bool tb : {false, true}) {
    const Gemm g{.m = m, .n = n, .k = k, .transpose_b = tb};
    auto ha = this->template random<T>(m * k), hb = this->template random<T>(k * n), hbias = this->template random<T>(n);
    auto a = upload(s, ha), b = upload(s, hb), bias = upload(s, hbias);
    auto r = reference(g, ha, hb, std::vector<T>{});
    for (Epilogue e : {Epilogue::none, Epilogue::bias, Epilogue::relu, Epilogue::relu_bias, Epilogue::gelu,
                       Epilogue::gelu_bias}) {
      auto c = upload(s, std::vector<T>(m * n, from_double<T>(-777.0)));
      if (has_bias(e)) lt.matmul(a, b, bias, c, g, e);
      else lt.matmul(a, b, c, g, e);
      std::vector<double> want(m * n), magnitude(m * n);
      for (std::int64_t i = 0; i < m * n; ++i) {
        double v = r.value[i] + (has_bias(e) ? to_double(hbias[i % n]) : 0.0);
        want[i] = testing::activation(v, e);
        magnitude[i] = r.magnitude[i] + (has_bias(e) ? std::fabs(to_double(hbias[i % n])) : 0.0);
      }
      this->expect_close(download(s, c), want, magnitude, 1.5 * relative_bound<T>(),
                         "epilogue " + std::to_string(static_cast<int>(e)) + (tb ? ", Bᵀ" : ""));
    }
  }
  EXPECT_EQ(lt.cached_shapes() - plans_before, 12u) << "one plan per shape and epilogue";
}

#ifdef CUDAKIT_HAVE_TEST_KERNELS

using ScaleOffset = void(const float*, float*, float, float, int);
using AddArrays = void(const float*, const float*, float*, int);
using WaitForGate = void(int*, long long);

class BlasWithKernelsGpuTest : public BlasGpuTest {
 protected:
  void SetUp() override {
    BlasGpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    module_ = Module::load(device(), cudakit_kernels::test_fatbin());
    scale_offset_ = module_.kernel<ScaleOffset>("scale_offset");
    add_arrays_ = module_.kernel<AddArrays>("add_arrays");
    wait_for_gate_ = module_.kernel<WaitForGate>("wait_for_gate");
  }
  void TearDown() override {
    run_deferred_releases();
    BlasGpuTest::TearDown();
  }
  static LaunchConfig cover(std::size_t n) { return LaunchConfig{grid_for(n, 256), 256}; }
  void copy_scaled(DeviceSpan<const float> in, DeviceSpan<float> out, float scale, float offset, StreamRef s) {
    launch(s, scale_offset_, cover(out.size()), in, out, scale, offset, int(out.size()));
  }
  void add(DeviceSpan<const float> a, DeviceSpan<const float> b, DeviceSpan<float> out, StreamRef s) {
    launch(s, add_arrays_, cover(out.size()), a, b, out, int(out.size()));
  }
  // Holds `s` until the gate opens (stream_gate.hpp).
  testing::StreamGate hold(StreamRef s) {
    return testing::StreamGate(s, device(), [this](StreamRef on, int* flag, long long max_cycles) {
      launch(on, wait_for_gate_, LaunchConfig{1, 1}, flag, max_cycles);
    });
  }

  // The cross-stream scenario: C is last written on stream b; a gate holds stream a, behind
  // it the GEMM writes C (declared, or through the raw library without a declaration); a
  // kernel on b copies C out at once. Returns what the kernel read.
  std::vector<float> gemm_then_read_on_another_stream(bool declared, std::vector<double>* want) {
    Stream a(device()), b(device());
    constexpr std::int64_t m = 96, n = 80, k = 48;
    auto hx = random<float>(m * k), hw = random<float>(k * n);
    auto x = upload(a, hx), w = upload(a, hw);
    DeviceBuffer<float> c(b, m * n, uninitialized), out(b, m * n, uninitialized);
    fill(b, c, -777.0f);  // C's last writer is b
    a.synchronize();
    b.synchronize();
    Blas blas(a);
    DeviceBuffer<float> warm(a, m * n, uninitialized);
    blas.gemm(x, w, warm, {.m = m, .n = n, .k = k});  // the handle's workspace now belongs to a
    testing::StreamGate gate = hold(a);  // the GEMM starts when the gate opens
    if (declared) {
      blas.gemm(x, w, c, {.m = m, .n = n, .k = k});
    } else {
      // The raw library on a's handle, C's write declared to nobody.
      auto gemm = reinterpret_cast<cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                                      int, const void*, const void*, cudaDataType, int, const void*,
                                                      cudaDataType, int, const void*, void*, cudaDataType, int,
                                                      cublasComputeType_t, cublasGemmAlgo_t)>(blas_symbol("cublasGemmEx"));
      EXPECT_NE(gemm, nullptr);
      const float one = 1, zero = 0;
      enqueue(a, reads(x, w), [&](CUstream) {  // reads declared, C not
        EXPECT_EQ(gemm(blas.native_handle(), CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, w.data(), CUDA_R_32F, n, x.data(),
                       CUDA_R_32F, k, &zero, c.data(), CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                  CUBLAS_STATUS_SUCCESS);
      });
    }
    copy_scaled(c, out, 1.0f, 0.0f, b);  // a kernel on b reading C
    expect_held(a, "the gate holds a");
    if (!declared) b.synchronize();  // the undeclared reader does not wait for a: it reads now
    gate.open();
    auto got = download(b, out);
    a.synchronize();  // the raw GEMM still writes C: wait for it before C goes
    auto r = reference(Gemm{.m = m, .n = n, .k = k}, hx, hw, std::vector<float>{});
    *want = r.value;
    return got;
  }

  Module module_;
  Kernel<ScaleOffset> scale_offset_;
  Kernel<AddArrays> add_arrays_;
  Kernel<WaitForGate> wait_for_gate_;
};

TEST_F(BlasWithKernelsGpuTest, AKernelOnAnotherStreamReadsTheGemmsResultThroughTheDeclaration) {
  std::vector<double> want;
  auto got = gemm_then_read_on_another_stream(true, &want);
  std::vector<double> magnitude(want.size(), 48.0);  // |x|,|w| ≤ 1, k = 48
  expect_close(got, want, magnitude, 2e-5, "C read on the other stream");
}

TEST_F(BlasWithKernelsGpuTest, WithoutTheDeclarationTheKernelOnTheOtherStreamRacesTheGemm) {
  CUDAKIT_SKIP_UNLESS_GATES_HOLD();
  std::vector<double> want;
  auto got = gemm_then_read_on_another_stream(false, &want);
  int stale = 0;
  for (float v : got) stale += v == -777.0f;
  EXPECT_GT(stale, 0) << "the raw arm must show the race (the kernel read C before the GEMM wrote it)";
}

TEST_F(BlasWithKernelsGpuTest, EightCapturedGemmsWithKernelsReplayExactlyAThousandTimesAfterTheirBuffersAreDropped) {
  Stream s(device());
  Blas blas(s);
  constexpr std::int64_t m = 47, n = 39, k = 31;
  constexpr int gemms = 8;
  // Integer data: every result is exact in fp32, so each replay must match bit for bit.
  std::vector<std::vector<float>> hx, hw;
  std::vector<std::unique_ptr<DeviceBuffer<float>>> x, w, shifted, products, sums;
  for (int i = 0; i < gemms; ++i) {
    hx.push_back(integers(m * k));
    hw.push_back(integers(k * n));
    x.push_back(std::make_unique<DeviceBuffer<float>>(upload(s, hx.back())));
    w.push_back(std::make_unique<DeviceBuffer<float>>(upload(s, hw.back())));
    shifted.push_back(std::make_unique<DeviceBuffer<float>>(s, m * k, uninitialized));
    products.push_back(std::make_unique<DeviceBuffer<float>>(s, m * n, uninitialized));
    sums.push_back(std::make_unique<DeviceBuffer<float>>(s, m * n, uninitialized));
  }
  auto zero = std::make_unique<DeviceBuffer<float>>(s, m * n, zeroed);
  PinnedBuffer<float> result(m * n, uninitialized);
  // Per GEMM: x+1 (a kernel), the GEMM, then a running sum (a kernel); the sum goes home.
  Graph graph = capture_nonempty(s, [&] {
    for (int i = 0; i < gemms; ++i) {
      copy_scaled(*x[i], *shifted[i], 1.0f, 1.0f, s);
      blas.gemm(*shifted[i], *w[i], *products[i], {.m = m, .n = n, .k = k});
      add(*products[i], i == 0 ? *zero : *sums[i - 1], *sums[i], s);
    }
    copy(s, *sums.back(), result);
  });
  for (const GraphNode& node : graph.nodes())
    EXPECT_NE(node.type(), CU_GRAPH_NODE_TYPE_MEM_ALLOC) << "the workspace was set before the capture";
  GraphExec exec = graph.instantiate();
  x.clear(), w.clear(), shifted.clear(), products.clear(), sums.clear(), zero.reset();  // every owner dropped

  std::vector<double> want(m * n, 0.0);
  for (int i = 0; i < gemms; ++i) {
    std::vector<float> xi = hx[i];
    for (float& v : xi) v += 1.0f;
    auto r = reference(Gemm{.m = m, .n = n, .k = k}, xi, hw[i], std::vector<float>{});
    for (std::size_t j = 0; j < want.size(); ++j) want[j] += r.value[j];
  }
  int wrong_replays = 0;
  for (int replay = 0; replay < 1000; ++replay) {
    std::fill(result.begin(), result.end(), -777.0f);
    exec.launch(s);
    s.synchronize();
    bool exact = true;
    for (std::size_t j = 0; j < want.size(); ++j) exact &= static_cast<double>(result[j]) == want[j];
    if (!exact && wrong_replays++ < 3) ADD_FAILURE() << "replay " << replay << " is not exact (seed " << seed_ << ")";
  }
  EXPECT_EQ(wrong_replays, 0);
}

TEST_F(BlasWithKernelsGpuTest, TheFirstCaptureOnABrandNewStreamAndHandleWorks) {
  // Eight handles of each kind held on another stream: the pools have no idle one left,
  // so the handles below are made while the capture runs.
  Stream side(device());
  std::vector<Blas> held;
  std::vector<BlasLt> held_lt;
  for (int i = 0; i < 8; ++i) {
    held.emplace_back(side);
    held_lt.emplace_back(side);
  }
  constexpr std::int64_t m = 33, n = 17, k = 9;
  auto hx = random<float>(m * k), hw = random<float>(k * n), hbias = random<float>(n);
  Stream setup(device());
  auto x = upload(setup, hx), w = upload(setup, hw), bias = upload(setup, hbias);
  DeviceBuffer<float> y(setup, m * n, uninitialized), h(setup, m * n, uninitialized);
  setup.synchronize();

  Stream fresh(device());
  Graph graph = capture_nonempty(fresh, [&] {
    Blas blas(fresh);
    blas.gemm(x, w, y, {.m = m, .n = n, .k = k});
    BlasLt lt(fresh);
    lt.matmul(x, w, bias, h, {.m = m, .n = n, .k = k}, Epilogue::gelu_bias);
  });
  for (const GraphNode& node : graph.nodes()) EXPECT_NE(node.type(), CU_GRAPH_NODE_TYPE_MEM_ALLOC);
  GraphExec exec = graph.instantiate();
  exec.launch(fresh);
  auto r = reference(Gemm{.m = m, .n = n, .k = k}, hx, hw, std::vector<float>{});
  expect_close(download(fresh, y), r.value, r.magnitude, 2e-5, "the captured GEMM");
  std::vector<double> want(m * n), magnitude(m * n);
  for (std::int64_t i = 0; i < m * n; ++i) {
    want[i] = gelu(r.value[i] + hbias[i % n]);
    magnitude[i] = r.magnitude[i] + std::fabs(hbias[i % n]);
  }
  expect_close(download(fresh, h), want, magnitude, 3e-5, "the captured GELU matmul");
}

#endif  // CUDAKIT_HAVE_TEST_KERNELS

}  // namespace
}  // namespace cudakit
