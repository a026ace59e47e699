// The fault sweep over cuBLAS and cuBLASLt (blas.hpp, blas_lt.hpp), in two parts.
//
// The driver calls: Blas and BlasLt operations join the driver sweep (fault_sweep.hpp's
// rules, tests Call/FaultSweep.*/<name>), with the fake cuBLAS as a scene input.
//
// The library's own calls: every cuBLAS and cuBLASLt call an operation makes, failed in
// turn with each status below, from a fresh fake driver and fake cuBLAS each time
// (tests BlasCall/BlasFaultSweep.*/<name>). Each run must end in one of two ways:
//   - a BlasError carrying the injected status and naming the failed call;
//   - for a release (cublasDestroy, cublasLtDestroy, a descriptor's destroy), nothing
//     thrown and an error parked with the call and the status;
// and afterwards the operation, run again, succeeds; nothing leaks (the fake cuBLAS's
// ledger, less what a failed release kept, and the fake driver's); nothing is misused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cudakit/blas.hpp"
#include "cudakit/blas_lt.hpp"
#include "cudakit/capture.hpp"
#include "driver/driver_testing.hpp"
#include "fake_blas.hpp"
#include "fault_sweep.hpp"
#include "library_reset.hpp"
#include "libraries/libraries_testing.hpp"

namespace cudakit {
namespace {

namespace sweep = testing::sweep;
using sweep::Scene;
using cublas::Entry;
using Buf = DeviceBuffer<float>;

constexpr int n = 8;  // every matrix is n×n

// The fake cuBLAS as a scene input: installed first, and its pooled handles released
// before it goes (the scene destroys its inputs newest first, this one last).
struct InstalledFakeBlas {
  std::unique_ptr<fake::Blas> blas = std::make_unique<fake::Blas>();
  InstalledFakeBlas() { blas->install(); }
  InstalledFakeBlas(InstalledFakeBlas&&) = default;
  ~InstalledFakeBlas() {
    if (blas == nullptr) return;
    detail::reset_libraries_for_testing();
    for (const auto& p : blas->problems()) ADD_FAILURE() << "the fake cuBLAS: " << p;
  }
};

// The driver sweep's operations install the fake cuBLAS as their first input.
void install_fake_blas(Scene& s) { s.given<InstalledFakeBlas>("fake cuBLAS", [] { return InstalledFakeBlas(); }); }

Buf& matrix(Scene& s, const std::string& key, int on = 0) {
  StreamRef st = s.stream(on);
  return s.given<Buf>(key, [&] { return Buf(st, n * n, zeroed); });
}
Blas& blas(Scene& s, int on = 0) {
  StreamRef st = s.stream(on);
  return s.given<Blas>("blas " + std::to_string(on), [&] { return Blas(st); });
}
BlasLt& blas_lt(Scene& s) {
  StreamRef st = s.stream();
  return s.given<BlasLt>("blas lt", [&] { return BlasLt(st); });
}

const Gemm square{.m = n, .n = n, .k = n};

// ---- the driver calls ----

const bool driver_calls = sweep::add("cuBLAS", {
    {"Blas (a new handle and its workspace)", [](Scene& s) {
       install_fake_blas(s);
       Blas b(s.stream());
     }},
    {"Blas::gemm (first on the handle)", [](Scene& s) {
       install_fake_blas(s);
       blas(s).gemm(matrix(s, "a"), matrix(s, "b"), matrix(s, "c"), square);
     }},
    {"Blas::gemm on buffers of other streams", [](Scene& s) {
       install_fake_blas(s);
       blas(s, 2).gemm(matrix(s, "a", 0), matrix(s, "b", 1), matrix(s, "c", 1), square);
     }},
    {"Blas::gemm_strided_batched", [](Scene& s) {
       install_fake_blas(s);
       blas(s).gemm_strided_batched(matrix(s, "a").first(n * n / 2), matrix(s, "b"), matrix(s, "c"),
                                    {.m = n / 2, .n = n, .k = n / 2}, {.count = 2});
     }},
    {"Blas::gemv", [](Scene& s) {
       install_fake_blas(s);
       Buf& a = matrix(s, "a");
       blas(s).gemv(a, matrix(s, "b").first(n), matrix(s, "c").first(n), {.rows = n, .cols = n});
     }},
    {"Blas::gemm captured", [](Scene& s) {
       install_fake_blas(s);
       Blas& b = blas(s);
       Buf &x = matrix(s, "a"), &y = matrix(s, "c");
       Graph g = capture_nonempty(s.stream(), [&] { b.gemm(x, x, y, square); });
     }},
    {"Blas made and used inside a capture", [](Scene& s) {
       install_fake_blas(s);
       Buf &x = matrix(s, "a"), &y = matrix(s, "c");
       StreamRef st = s.stream();
       Graph g = capture_nonempty(st, [&] {
         Blas b(st);
         b.gemm(x, x, y, square);
       });
     }},
    {"BlasLt::matmul (first of its shape)", [](Scene& s) {
       install_fake_blas(s);
       blas_lt(s).matmul(matrix(s, "a"), matrix(s, "b"), matrix(s, "bias").first(n), matrix(s, "c"), square,
                         Epilogue::gelu_bias);
     }},
});

// ---- the library's own calls ----

struct BlasOperation {
  std::string name;
  std::function<void(Scene&)> prepare;  // inputs, made before the calls are counted
  std::function<void(Scene&)> run;
};

const std::vector<BlasOperation>& blas_operations() {
  static const std::vector<BlasOperation> ops = {
      {"Blas and gemm", [](Scene& s) { matrix(s, "a"), matrix(s, "c"); },
       [](Scene& s) {
         Blas b(s.stream());
         b.gemm(matrix(s, "a"), matrix(s, "a"), matrix(s, "c"), square);
       }},
      {"Blas on another stream than its handle's last", [](Scene& s) {
         matrix(s, "a"), matrix(s, "c");
         Blas first(s.stream(1));  // the pool now holds a handle bound to stream 1
       },
       [](Scene& s) {
         Blas b(s.stream(0));
         b.gemm(matrix(s, "a"), matrix(s, "a"), matrix(s, "c"), square);
       }},
      {"Blas::gemm_strided_batched", [](Scene& s) { blas(s), matrix(s, "a"), matrix(s, "c"); },
       [](Scene& s) {
         blas(s).gemm_strided_batched(matrix(s, "a").first(16), matrix(s, "a"), matrix(s, "c"), {.m = 2, .n = n, .k = 2},
                                      {.count = 4});
       }},
      {"Blas::gemv", [](Scene& s) { blas(s), matrix(s, "a"), matrix(s, "c"); },
       [](Scene& s) {
         blas(s).gemv(matrix(s, "a"), matrix(s, "a").first(n), matrix(s, "c").first(n), {.rows = n, .cols = n});
       }},
      {"BlasLt and matmul with a bias (first of its shape)", [](Scene& s) { matrix(s, "a"), matrix(s, "c"); },
       [](Scene& s) {
         BlasLt lt(s.stream());
         lt.matmul(matrix(s, "a"), matrix(s, "a"), matrix(s, "a").first(n), matrix(s, "c"), square, Epilogue::relu_bias);
       }},
      {"BlasLt::matmul (planned)", [](Scene& s) {
         blas_lt(s).matmul(matrix(s, "a"), matrix(s, "a"), matrix(s, "a").first(n), matrix(s, "c"), square,
                           Epilogue::bias);
       },
       [](Scene& s) {
         blas_lt(s).matmul(matrix(s, "a"), matrix(s, "a"), matrix(s, "a").last(n), matrix(s, "c"), square,
                           Epilogue::bias);
       }},
      {"the pools' release of idle handles and plans", [](Scene& s) {
         Blas b(s.stream());
         BlasLt lt(s.stream());
         lt.matmul(matrix(s, "a"), matrix(s, "a"), matrix(s, "c"), square);
       },
       [](Scene&) {
         detail::reset_libraries_for_testing();
       }},
  };
  return ops;
}

bool is_release(Entry e) {
  return e == Entry::Destroy || e == Entry::LtDestroy || e == Entry::LtMatmulDescDestroy ||
         e == Entry::LtMatrixLayoutDestroy || e == Entry::LtMatmulPreferenceDestroy;
}

const cublasStatus_t swept_statuses[] = {CUBLAS_STATUS_NOT_INITIALIZED, CUBLAS_STATUS_ALLOC_FAILED,
                                         CUBLAS_STATUS_INVALID_VALUE,   CUBLAS_STATUS_EXECUTION_FAILED,
                                         CUBLAS_STATUS_INTERNAL_ERROR,  CUBLAS_STATUS_NOT_SUPPORTED};

// A fresh fake driver and fake cuBLAS for one run, with the library's per-device state
// reset around it; the scene of inputs lives inside it.
class FreshRun {
 public:
  FreshRun() {
    driver_.install();
    blas_.install();
    detail::clear_poison_for_testing();
    drain_parked_errors();
    forget_cached_current_context();
    scene_ = std::make_unique<Scene>(driver_);
  }
  ~FreshRun() {
    scene_.reset();
    testing::reset_library_state();
    driver::testing::reset();
    detail::clear_poison_for_testing();
    drain_parked_errors();
    forget_cached_current_context();
  }
  Scene& scene() { return *scene_; }
  fake::Blas& blas() { return blas_; }

  // Ends the run: the inputs and the pools go, then the ledgers are read. A failed release
  // keeps its object live in the fake cuBLAS: those are not leaks.
  void finish(int failed_releases, std::vector<std::string>& problems, const std::string& label) {
    scene_.reset();
    detail::reset_libraries_for_testing();
    std::size_t live = 0;
    for (const char* kind : {"handle", "lt handle", "matmul desc", "layout", "preference"}) live += blas_.live(kind);
    if (live != static_cast<std::size_t>(failed_releases))
      problems.push_back(label + ": " + std::to_string(live) + " cuBLAS object(s) live at the end but " +
                         std::to_string(failed_releases) + " release(s) failed: a leak");
    {
      std::lock_guard l(blas_.mutex);
      for (const auto& m : blas_.misuse) problems.push_back(label + ": the fake cuBLAS saw: " + m);
    }
    testing::reset_library_state();
    if (auto parked = drain_parked_errors(); !parked.empty())
      problems.push_back(label + ": errors parked during cleanup:" + parked_lines(parked));
    for (const auto& p : driver_.ledger_problems()) problems.push_back(label + ": the fake driver's ledger: " + p);
  }

  static std::string parked_lines(const std::vector<ParkedError>& parked) {
    std::string s;
    for (const auto& p : parked) s += "\n      parked by " + p.origin + ": " + p.message;
    return s;
  }

 private:
  fake::Driver driver_;
  fake::Blas blas_;
  std::unique_ptr<Scene> scene_;
};

// The cuBLAS calls `op` makes after its inputs, from a fresh state.
std::vector<Entry> calls_of(const BlasOperation& op, std::vector<std::string>& problems) {
  FreshRun run;
  std::vector<Entry> calls;
  try {
    op.prepare(run.scene());
    run.blas().clear_log();
    op.run(run.scene());
    calls = run.blas().log();
  } catch (const std::exception& e) {
    problems.push_back(op.name + ": fails without a fault: " + e.what());
  }
  if (auto parked = drain_parked_errors(); !parked.empty())
    problems.push_back(op.name + ": parks errors without a fault:" + FreshRun::parked_lines(parked));
  run.finish(0, problems, op.name + " (without faults)");
  return calls;
}

void run_case(const BlasOperation& op, Entry entry, int nth, cublasStatus_t status, const std::string& label,
              std::vector<std::string>& problems) {
  FreshRun run;
  fake::Blas& blas = run.blas();
  op.prepare(run.scene());
  blas.clear_log();
  blas.fail(entry, nth, status);
  const std::string call = cublas::name_of(entry);
  std::string outcome = "completed";
  bool ok = false;
  try {
    op.run(run.scene());
  } catch (const BlasError& e) {
    outcome = std::string("threw BlasError: ") + e.what();
    ok = e.status() == status && e.call() == call && std::string(e.what()).find(blas_status_name(status)) != std::string::npos;
  } catch (const std::exception& e) {
    outcome = std::string("threw something else than BlasError: ") + e.what();
  }
  auto parked = drain_parked_errors();
  int failed_releases = 0;
  for (const auto& [e, s] : blas.failed_calls()) failed_releases += is_release(e) ? 1 : 0;
  if (outcome == "completed") {
    bool parked_it = std::any_of(parked.begin(), parked.end(), [&](const ParkedError& p) {
      return p.message.find(call) != std::string::npos && p.message.find(blas_status_name(status)) != std::string::npos;
    });
    ok = is_release(entry) && parked_it && parked.size() == 1;
    if (blas.failed_calls().empty()) outcome += " (the call was never made: is the operation deterministic?)";
  } else if (!parked.empty()) {
    ok = false;
    outcome += ", and parked errors besides";
  }
  if (!ok) problems.push_back(label + ": " + outcome + FreshRun::parked_lines(parked));

  blas.clear_faults();
  try {
    op.run(run.scene());
  } catch (const std::exception& e) {
    problems.push_back(label + ": run again afterwards, it must succeed; it threw: " + e.what());
  }
  if (auto again = drain_parked_errors(); !again.empty())
    problems.push_back(label + ": run again afterwards, it parked:" + FreshRun::parked_lines(again));
  run.finish(failed_releases, problems, label);
}

class BlasFaultSweep : public ::testing::TestWithParam<BlasOperation> {};

TEST_P(BlasFaultSweep, EndsCleanlyWhateverCuBlasAnswers) {
  const BlasOperation& op = GetParam();
  std::vector<std::string> problems;
  std::vector<Entry> calls = calls_of(op, problems);
  if (calls.empty() && problems.empty()) problems.push_back(op.name + ": makes no cuBLAS call (nothing to sweep)");
  for (std::size_t i = 0; i < calls.size() && problems.size() < 25; ++i) {
    Entry entry = calls[i];
    int nth = static_cast<int>(std::count(calls.begin(), calls.begin() + static_cast<std::ptrdiff_t>(i) + 1, entry));
    for (cublasStatus_t status : swept_statuses)
      run_case(op, entry, nth, status,
               op.name + ": call " + std::to_string(i + 1) + "/" + std::to_string(calls.size()) + ", " +
                   cublas::name_of(entry) + " #" + std::to_string(nth) + " failing with " + blas_status_name(status),
               problems);
  }
  std::string all;
  for (const auto& p : problems) all += "\n  " + p;
  EXPECT_TRUE(problems.empty()) << all;
}

std::string test_name(const ::testing::TestParamInfo<BlasOperation>& info) {
  std::string s = info.param.name;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(BlasCall, BlasFaultSweep, ::testing::ValuesIn(blas_operations()), test_name);

TEST(BlasFaultSweepCoverage, EveryEntryCudakitCallsIsSwept) {
  std::vector<std::string> problems;
  std::vector<bool> seen(cublas::entry_count, false);
  for (const auto& op : blas_operations())
    for (Entry e : calls_of(op, problems)) seen[static_cast<std::size_t>(e)] = true;
  EXPECT_TRUE(problems.empty());
  for (std::size_t i = 0; i < cublas::entry_count; ++i) {
    if (static_cast<Entry>(i) == Entry::LtGetVersion) continue;  // read once at load; it cannot fail
    EXPECT_TRUE(seen[i]) << cublas::entry_names[i] << " is called by no swept operation";
  }
}

}  // namespace
}  // namespace cudakit
