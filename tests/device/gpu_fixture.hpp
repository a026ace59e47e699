// The fixture of every device test: skips without a GPU, or fails when
// CUDAKIT_REQUIRE_GPU=1 (runs on the GPU machine must not pass by skipping).
// At the end, an error parked and not drained by the test fails it.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "cudakit/cudakit.hpp"

namespace cudakit::testing {

inline bool gpu_required() {
  const char* v = std::getenv("CUDAKIT_REQUIRE_GPU");
  return v != nullptr && std::string(v) == "1";
}

/// Clock cycles of `device` in about `ms` milliseconds, for a spin kernel that keeps a
/// stream busy. Tests that check a stream is still held while they submit work behind
/// it hold it with a gate instead (stream_gate.hpp): a spin ends on its own, however slow
/// the host is.
inline long long spin_cycles(const Device& device, double ms) {
  return static_cast<long long>(device.attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE) * ms);  // kHz * ms
}

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      driver::ensure_loaded();
      if (Device::count() == 0) throw DriverUnavailable(DriverUnavailable::Reason::no_device, "no CUDA device");
    } catch (const DriverUnavailable& e) {
      if (gpu_required()) FAIL() << "CUDAKIT_REQUIRE_GPU=1 but: " << e.what();
      GTEST_SKIP() << e.what();
    }
    drain_parked_errors();
    device_ = Device::get(0);
  }

  void TearDown() override {
    auto parked = drain_parked_errors();
    for (const auto& p : parked) ADD_FAILURE() << "parked error (" << p.origin << "): " << p.message;
  }

  const Device& device() const { return *device_; }

 private:
  std::optional<Device> device_;
};

}  // namespace cudakit::testing
