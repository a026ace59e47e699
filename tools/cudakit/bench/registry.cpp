#include "bench/registry.hpp"

#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "cudakit/error.hpp"

namespace cudakit::tool::bench {

Interleave Context::interleave(int ops_per_batch) const {
  Interleave plan;
  plan.ops_per_batch = ops_per_batch;
  if (quick) {
    plan.rounds = 7;
    plan.warmup_rounds = 1;
    plan.ops_per_batch = std::max(1, ops_per_batch / 4);
  }
  if (rounds > 0) plan.rounds = rounds;
  if (smoke) {
    plan.rounds = 2;
    plan.warmup_rounds = 1;
    plan.ops_per_batch = 1;
  }
  return plan;
}

std::vector<Benchmark>& benchmarks() {
  static std::vector<Benchmark> registry;
  return registry;
}

BenchmarkRegistrar::BenchmarkRegistrar(std::string name, std::string group, QuickRun quick_run,
                                       std::function<std::vector<Result>(const Context&)> run) {
  benchmarks().push_back({std::move(name), std::move(group), quick_run, std::move(run)});
}

namespace {
// Each benchmark is a range "bench: GROUP / NAME" in the profiler, in cudakit's NVTX domain
// beside the library's own names (docs/profiling.md); CUDAKIT_NVTX=0 leaves it out.
class BenchRange {
 public:
  explicit BenchRange(const Benchmark& benchmark) {
    const char* off = std::getenv("CUDAKIT_NVTX");
    if (off != nullptr && std::strcmp(off, "0") == 0) return;
    static nvtxDomainHandle_t domain = nvtxDomainCreateA("cudakit");
    domain_ = domain;
    std::string text = "bench: " + benchmark.group + " / " + benchmark.name;
    nvtxEventAttributes_t a{};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = text.c_str();
    nvtxDomainRangePushEx(domain_, &a);
    open_ = true;
  }
  ~BenchRange() {
    if (open_) nvtxDomainRangePop(domain_);
  }
  BenchRange(const BenchRange&) = delete;
  BenchRange& operator=(const BenchRange&) = delete;

 private:
  nvtxDomainHandle_t domain_ = nullptr;
  bool open_ = false;
};
}  // namespace

std::vector<Result> run_guarded(const Benchmark& benchmark, const Context& context) {
  std::vector<Result> results;
  BenchRange range(benchmark);
  try {
    results = benchmark.run(context);
  } catch (const DriverUnavailable&) {
    throw;
  } catch (const std::exception& e) {
    results.push_back(error_result(benchmark.name, benchmark.group, e.what()));
  } catch (...) {
    results.push_back(error_result(benchmark.name, benchmark.group, "an exception that is not a std::exception"));
  }
  std::string parked;
  for (const ParkedError& p : drain_parked_errors()) parked += (parked.empty() ? "" : "; ") + p.origin + ": " + p.message;
  if (!parked.empty()) results.push_back(error_result(benchmark.name + " (cleanup)", benchmark.group, parked));
  return results;
}

bool contains_ignoring_case(std::string_view text, std::string_view part) {
  auto lower = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
  auto hit = std::search(text.begin(), text.end(), part.begin(), part.end(),
                         [&](char a, char b) { return lower(a) == lower(b); });
  return hit != text.end() || part.empty();
}

namespace {
// Group names have no spaces ("idiom-phases"); "idiom phases" names the group too.
std::string spaces_as_dashes(std::string text) {
  std::replace(text.begin(), text.end(), ' ', '-');
  return text;
}
}  // namespace

std::vector<Benchmark> select(const std::vector<Benchmark>& all, const std::vector<std::string>& filters,
                              bool quick_only) {
  std::vector<Benchmark> chosen;
  for (const Benchmark& b : all) {
    if (quick_only && b.quick_run != QuickRun::include) continue;
    bool wanted = filters.empty() || std::any_of(filters.begin(), filters.end(), [&](const std::string& f) {
                    return contains_ignoring_case(b.name, f) || contains_ignoring_case(b.group, f) ||
                           contains_ignoring_case(b.group, spaces_as_dashes(f));
                  });
    if (wanted) chosen.push_back(b);
  }
  std::stable_sort(chosen.begin(), chosen.end(), [](const Benchmark& a, const Benchmark& b) { return a.group < b.group; });
  return chosen;
}

}  // namespace cudakit::tool::bench
