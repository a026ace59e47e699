// The fixture of the cuBLAS unit tests: the fake driver and the fake cuBLAS (which computes
// on the host), fresh random data, and the row-major host reference (blas_reference.hpp) to
// check results against.
// At the end, the fake cuBLAS's problems (leaks, misuse) fail the test, after the pooled
// handles were released with the device states.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cudakit/blas.hpp"
#include "cudakit/blas_lt.hpp"
#include "cudakit/declared_work.hpp"
#include "blas_reference.hpp"
#include "fake_blas.hpp"
#include "graph_fixture.hpp"

namespace cudakit::testing {

/// The largest relative error a result of T may have against the double reference, for
/// sums of up to a few hundred products of numbers in [-1, 1] (the fake computes in
/// double and rounds once; the device accumulates in fp32).
template <class T>
double tolerance() {
  if constexpr (std::is_same_v<T, __half>) return 2e-3;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return 1.6e-2;
  else if constexpr (std::is_same_v<T, float>) return 1e-5;
  else return 1e-12;
}

class BlasTest : public GraphTestBase {
 protected:
  void SetUp() override {
    GraphTestBase::SetUp();
    blas_ = std::make_unique<fake::Blas>();
    blas_->install();
    seed_ = std::random_device{}();
    rng_.seed(seed_);
  }

  void TearDown() override {
    GraphTestBase::TearDown();  // the device states go, and with them the pooled handles
    auto problems = blas_->problems();
    EXPECT_TRUE(problems.empty()) << "the fake cuBLAS:\n" << join_lines(problems);
    blas_.reset();
  }

  fake::Blas& fake_blas() { return *blas_; }
  /// The seed of this test's random data (printed with a failure by the tests that use it).
  unsigned seed() const { return seed_; }

  /// n values in [-1, 1] from this test's random stream, never all zero.
  template <class T>
  std::vector<T> random(std::size_t n) {
    return random_values<T>(rng_, n);
  }

  /// A buffer holding `host`, written directly (the fake's device memory is host memory).
  template <class T>
  DeviceBuffer<T> make(StreamRef s, const std::vector<T>& host) {
    DeviceBuffer<T> b(s, host.size(), uninitialized);
    s.synchronize();
    if (!host.empty()) std::memcpy(reinterpret_cast<void*>(b.device_pointer()), host.data(), host.size() * sizeof(T));
    return b;
  }
  /// A buffer of n elements of a value no result has (a poison), so a missed write shows.
  template <class T>
  DeviceBuffer<T> poisoned(StreamRef s, std::size_t n) {
    return make(s, std::vector<T>(n, from_double<T>(-777.0)));
  }
  /// What a buffer holds now (after the stream ran the work: the fake runs it at once).
  template <class T>
  static std::vector<T> read(const DeviceBuffer<T>& b) {
    std::vector<T> v(b.size());
    if (!v.empty()) std::memcpy(v.data(), reinterpret_cast<const void*>(b.device_pointer()), b.size_bytes());
    return v;
  }

  /// Checks `got` against `want` within T's tolerance (relative to the largest magnitude).
  template <class T>
  void expect_near(const std::vector<T>& got, const std::vector<double>& want, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    double scale = 1e-30;
    for (double w : want) scale = std::max(scale, std::fabs(w));
    int shown = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      double g = to_double(got[i]);
      if (!(std::fabs(g - want[i]) <= tolerance<T>() * scale) && shown++ < 5)
        ADD_FAILURE() << what << ": element " << i << " is " << g << ", the host says " << want[i] << " (seed "
                      << seed_ << ")";
    }
  }

 private:
  std::unique_ptr<fake::Blas> blas_;
  unsigned seed_ = 0;
  std::mt19937 rng_;
};

}  // namespace cudakit::testing
