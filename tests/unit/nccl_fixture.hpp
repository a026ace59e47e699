// The fixture of the NCCL unit tests: the fake driver (fake_fixture.hpp) with the fake
// NCCL installed; at the end, a leaked or doubly destroyed communicator or registration
// fails the test, as a leaked driver handle does.
#pragma once

#include <chrono>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "cudakit/nccl.hpp"
#include "fake_fixture.hpp"
#include "fake_nccl.hpp"

namespace cudakit::testing {

class NcclTest : public FakeDriverTest {
 protected:
  void SetUp() override {
    FakeDriverTest::SetUp();
    nccl_ = std::make_unique<fake::Nccl>();
    configure_nccl(*nccl_);
    nccl_->install();
  }
  void TearDown() override {
    auto problems = nccl_->ledger_problems();
    EXPECT_TRUE(problems.empty()) << "the fake NCCL's ledger:\n" << join_lines(problems);
    nccl_.reset();
    FakeDriverTest::TearDown();
  }
  /// Override to change the fake NCCL before it is installed.
  virtual void configure_nccl(fake::Nccl&) {}

  fake::Nccl& nccl() { return *nccl_; }

  /// Short deadlines, so that a test of a timeout takes a fraction of a second.
  static nccl::Options quick(std::chrono::milliseconds timeout = std::chrono::milliseconds(150)) {
    nccl::Options o;
    o.timeout = timeout;
    return o;
  }

  /// A one-rank communicator on device 0.
  nccl::Communicator one_rank(const nccl::Options& options = {}) {
    return nccl::Communicator(nccl::UniqueId::generate(), 1, 0, Device::get(0), options);
  }

  /// Waits (at most 5 s) until `done` holds; false when it never did.
  template <class F>
  static bool eventually(F&& done) {
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!done()) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
  }

 private:
  std::unique_ptr<fake::Nccl> nccl_;
};

/// Fresh random values in [1, 9) (never zero, never the poison), rounded to quarters so
/// that sums are exact in float.
inline std::vector<float> random_quarters(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(4, 35);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(d(rng)) / 4.0f;
  return v;
}

}  // namespace cudakit::testing
