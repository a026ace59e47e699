// Host-implemented kernels for the fake driver, shared by the module and launch tests.
// Each body reads its parameters from the packed parameter block, does its work on fake
// device memory (host memory) and records its reads and writes on the launch's stream.
#pragma once

#include <cstdint>
#include <vector>

#include "fake_modules.hpp"

namespace cudakit::testing {

/// The signatures of the standard image's kernels, for typed lookups in tests:
/// module.kernel<SaxpySig>("saxpy"), module.kernel<FillSig>("fill").
using SaxpySig = void(float, const float*, float*, int);
using FillSig = void(float*, float, int);

// y[i] = a * x[i] + y[i]
inline fake::FakeKernel saxpy_kernel() {
  return {"saxpy", fake::params<float, const float*, float*, int>(), [](const fake::FakeLaunch& l) {
            auto a = l.param<float>(0);
            auto* x = l.param<const float*>(1);
            auto* y = l.param<float*>(2);
            auto n = l.param<int>(3);
            l.read(x, n * sizeof(float));
            l.read(y, n * sizeof(float));
            l.write(y, n * sizeof(float));
            for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];
          }};
}

// out[i] = value
inline fake::FakeKernel fill_kernel() {
  return {"fill", fake::params<float*, float, int>(), [](const fake::FakeLaunch& l) {
            auto* out = l.param<float*>(0);
            auto value = l.param<float>(1);
            auto n = l.param<int>(2);
            l.write(out, n * sizeof(float));
            for (int i = 0; i < n; ++i) out[i] = value;
          }};
}

// *out = sum of in[0..n)
inline fake::FakeKernel sum_kernel() {
  return {"sum", fake::params<const float*, float*, int>(), [](const fake::FakeLaunch& l) {
            auto* in = l.param<const float*>(0);
            auto* out = l.param<float*>(1);
            auto n = l.param<int>(2);
            l.read(in, n * sizeof(float));
            l.write(out, sizeof(float));
            float s = 0;
            for (int i = 0; i < n; ++i) s += in[i];
            *out = s;
          }};
}

// Mixed sizes: packing and alignment.
inline fake::FakeKernel mixed_kernel() {
  return {"mixed", fake::params<char, double, short, float*, int, long long>(), {}};
}

inline fake::FakeKernel empty_kernel() { return {"empty", {}, {}}; }

/// The image holding all of the above (plus `extra`); returns its id.
inline int standard_image(std::vector<fake::FakeKernel> extra = {}) {
  fake::FakeImage image;
  image.kernels = {saxpy_kernel(), fill_kernel(), sum_kernel(), mixed_kernel(), empty_kernel()};
  for (auto& k : extra) image.kernels.push_back(std::move(k));
  return fake::add_image(std::move(image));
}

}  // namespace cudakit::testing
