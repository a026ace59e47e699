// The fixture of every fake-driver unit test: installs a fresh fake driver, and at the
// end fails the test on a leaked or doubly destroyed handle, on an unexpected parked
// error, and on an unordered pair of memory accesses (a hazard).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "cudakit/context.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "device/device_state.hpp"
#include "driver/driver_testing.hpp"
#include "fake_driver.hpp"
#include "library_reset.hpp"

namespace cudakit::testing {

inline std::string join_lines(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += "  " + l + "\n";
  return s;
}

class FakeDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_ = std::make_unique<fake::Driver>();
    configure(*fake_);
    fake_->install();
    detail::clear_poison_for_testing();
    drain_parked_errors();
    forget_cached_current_context();
  }

  void TearDown() override {
    cudakit::testing::reset_library_state();
    auto problems = fake_->ledger_problems();
    EXPECT_TRUE(problems.empty()) << "the fake driver's ledger:\n" << join_lines(problems);
    if (check_hazards_) {
      std::vector<std::string> hazards;
      for (const auto& h : fake_->hazards()) hazards.push_back(h.description);
      EXPECT_TRUE(hazards.empty()) << "unordered memory accesses:\n" << join_lines(hazards);
    }
    auto parked = drain_parked_errors();
    if (!parked_errors_expected_) {
      std::vector<std::string> lines;
      for (const auto& p : parked) lines.push_back(p.origin + ": " + p.message);
      EXPECT_TRUE(parked.empty()) << "errors parked and never drained:\n" << join_lines(lines);
    }
    driver::testing::reset();
    detail::clear_poison_for_testing();
    forget_cached_current_context();
    fake_.reset();
  }

  /// Override to change the fake before it is installed (devices, version, missing entries).
  virtual void configure(fake::Driver&) {}

  fake::Driver& fake() { return *fake_; }
  /// The test drains (and checks) parked errors itself.
  void expect_parked_errors() { parked_errors_expected_ = true; }
  /// The test provokes hazards on purpose.
  void ignore_hazards() { check_hazards_ = false; }

 private:
  std::unique_ptr<fake::Driver> fake_;
  bool parked_errors_expected_ = false;
  bool check_hazards_ = true;
};

/// Runs `fn` and returns the message of the exception of type E it throws; fails the
/// test if it throws nothing or something else.
template <class E, class F>
std::string message_of(F&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw the wrong exception type: " << e.what();
    return {};
  }
  ADD_FAILURE() << "threw nothing";
  return {};
}

}  // namespace cudakit::testing
