// "idiom-phases" group: where the time of one request goes (request_scenario.hpp), phase
// by phase, for the README idiom and the raw arms, on one thread, warm and cold.
//
// Each request is cut by the steady clock into: allocate (three device buffers), upload
// (256 KiB host to device), launches (48 kernels, submission only), download (256 KiB
// device to host, including the wait for the kernels) and free (the three buffers). The
// arms that reuse their buffers have no allocate and free phases. Every figure is
// microseconds per request, the median over rounds; none is judged (the concurrency
// group judges whole requests).
//
// Warm, every arm interleaved as in the concurrency group, 200 requests per batch:
//   <phase>: README idiom vs raw pageable     the same work, phase by phase
//   <phase>: README idiom vs raw pinned       what pageable memory costs over the fastest pattern
//   <phase>: cudakit pinned vs raw pinned
// Heap trimmed: the idiom and raw pageable with malloc_trim(0) after each request
// (untimed): every new host vector then starts on fresh pages, and each 4 KiB page is
// a page fault at first touch, as in a program whose allocator hands memory back between
// requests. "host: new 256 KiB vector" times that alone: fresh pages against reused ones.
// Cold, one request per round:
//   first request on a new thread with a new stream (cudakit's per-thread state cold);
//   first request after release_idle_staging and the pool trimmed (page-locking a
//   staging buffer, mapping pool memory again); the raw driver keeps its own staging
//   for pageable copies, which nothing can release;
//   page-locking one staging buffer: reserve_staging(1 MiB) against cuMemHostAlloc(1 MiB).
#include <malloc.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench/harness.hpp"
#include "cudakit/cudakit.hpp"
#include "request_scenario.hpp"

#ifdef CUDAKIT_HAVE_TEST_KERNELS

namespace cudakit::tool::bench {
namespace {

using driver::EntryId;
using namespace requests;
using Clock = std::chrono::steady_clock;

enum Phase { allocate, upload_phase, launches, download_phase, release, whole_request, phase_count };
constexpr const char* phase_names[phase_count] = {"allocate 3 buffers", "upload 256 KiB", "48 launches",
                                                  "download 256 KiB", "free 3 buffers", "request"};
constexpr int requests_per_batch = 200;

// Seconds of each phase of one request.
using PhaseSeconds = std::array<double, phase_count>;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Six time points around five phases.
PhaseSeconds phases_of(const std::array<Clock::time_point, 6>& t) {
  PhaseSeconds p{};
  for (int i = 0; i < release + 1; ++i) p[i] = seconds(t[i], t[i + 1]);
  p[whole_request] = seconds(t[0], t[5]);
  return p;
}

// An arm: serves one request and returns its phases.
using Request = std::function<PhaseSeconds()>;

// A batch that runs `request` `ops` times and logs the per-request mean of each phase.
struct PhaseLog {
  std::vector<PhaseSeconds> batches;
  Batch batch(Request request, std::function<void()> after_each = {}) {
    return [this, request = std::move(request), after_each = std::move(after_each)](int ops) {
      PhaseSeconds sum{};
      for (int r = 0; r < ops; ++r) {
        PhaseSeconds p = request();
        for (int i = 0; i < phase_count; ++i) sum[i] += p[i];
        if (after_each) after_each();
      }
      for (double& s : sum) s /= ops;
      batches.push_back(sum);
    };
  }
  // One phase's samples of the timed rounds (the first `warmup` batches were warm-up).
  std::vector<double> samples(Phase phase, int warmup) const {
    std::vector<double> out;
    for (std::size_t i = static_cast<std::size_t>(warmup); i < batches.size(); ++i) out.push_back(batches[i][phase]);
    return out;
  }
};

class PhaseBenchmark {
 public:
  explicit PhaseBenchmark(const Context& c)
      : c_(c),
        input_(make_input()),
        weights_host_(make_weights()),
        expected_(reference(input_, weights_host_)),
        raw_context_(c.device),
        kernels_(c.device),
        stream_(c.device),
        weights_(upload(stream_, weights_host_)),
        raw_weights_(upload_raw_weights(weights_host_)),
        host_in_(elements, uninitialized),
        host_out_(elements, zeroed),
        in_(stream_, elements, zeroed),
        temp_(stream_, elements, zeroed),
        x_(stream_, elements, zeroed),
        raw_pinned_in_(pinned_host(bytes)),
        raw_pinned_out_(pinned_host(bytes)),
        raw_in_(bytes),
        raw_temp_(bytes),
        raw_x_(bytes),
        outputs_(expected_) {
    check_raw(raw_entry<EntryId::StreamCreateWithPriority>()(&raw_stream_, CU_STREAM_NON_BLOCKING, 0),
              "cuStreamCreateWithPriority");
    std::memcpy(host_in_.data(), input_.data(), bytes);
    std::memcpy(raw_pinned_in_, input_.data(), bytes);
    stream_.synchronize();
  }
  ~PhaseBenchmark() {
    auto park = [](CUresult status, const char* call) {
      if (status != CUDA_SUCCESS) park_driver_error(status, call, Resource::none(), "raw benchmark");
    };
    park(raw_entry<EntryId::StreamSynchronize>()(raw_stream_), "cuStreamSynchronize");
    park(raw_entry<EntryId::StreamDestroy>()(raw_stream_), "cuStreamDestroy");
    for (void* p : {raw_pinned_in_, raw_pinned_out_}) park(raw_entry<EntryId::MemFreeHost>()(p), "cuMemFreeHost");
  }
  PhaseBenchmark(const PhaseBenchmark&) = delete;
  PhaseBenchmark& operator=(const PhaseBenchmark&) = delete;

  std::vector<Result> warm() {
    Interleave plan = plan_of(requests_per_batch);
    PhaseLog idiom, pageable, pinned, raw_pinned;
    time_host_arms(plan, {idiom.batch([&] { return idiom_phases(stream_); }),
                          pageable.batch([&] { return raw_pageable_phases(raw_stream_); }),
                          pinned.batch([&] { return cudakit_pinned_phases(); }),
                          raw_pinned.batch([&] { return raw_pinned_phases(); })});
    std::vector<Result> results;
    const int w = plan.warmup_rounds;
    for (int p = 0; p < phase_count; ++p)
      results.push_back(pair(phase_names[p], "README idiom vs raw pageable", idiom, pageable, Phase(p), w));
    for (Phase p : {upload_phase, launches, download_phase, whole_request})
      results.push_back(pair(phase_names[p], "README idiom vs raw pinned", idiom, raw_pinned, p, w));
    for (Phase p : {upload_phase, launches, download_phase, whole_request})
      results.push_back(pair(phase_names[p], "cudakit pinned vs raw pinned", pinned, raw_pinned, p, w));
    return checked(std::move(results));
  }

  std::vector<Result> heap_trimmed() {
    Interleave plan = plan_of(requests_per_batch);
    PhaseLog idiom, pageable;
    auto trim = [] { malloc_trim(0); };
    time_host_arms(plan, {idiom.batch([&] { return idiom_phases(stream_); }, trim),
                          pageable.batch([&] { return raw_pageable_phases(raw_stream_); }, trim)});
    std::vector<Result> results;
    for (Phase p : {upload_phase, download_phase, whole_request})
      results.push_back(pair(phase_names[p], "README idiom vs raw pageable, heap trimmed between requests", idiom,
                             pageable, p, plan.warmup_rounds));
    // The page faults alone: a new vector of 256 KiB, made and first touched, on fresh
    // pages (the heap trimmed before) against pages the heap kept.
    Interleave touch = plan_of(50);
    auto new_vector = [](bool fresh) {
      return [fresh](int ops) {
        for (int r = 0; r < ops; ++r) {
          if (fresh) malloc_trim(0);
          auto start = Clock::now();
          std::vector<float> v(elements);
          asm volatile("" : : "r"(v.data()) : "memory");
          touch_seconds_ += seconds(start, Clock::now());
        }
      };
    };
    auto fresh = timed_inside(touch, new_vector(true));
    auto reused = timed_inside(touch, new_vector(false));
    results.push_back(cost_result("host: new 256 KiB vector: fresh pages (cudakit column) vs reused pages (raw column)",
                                  "idiom-phases", PairedSamples{fresh, reused}, 0.0));
    return checked(std::move(results));
  }

  std::vector<Result> cold() {
    Interleave plan = plan_of(1);
    PhaseLog idiom_thread, pageable_thread, idiom_library, pageable_library;
    // A new thread with a new stream: nothing of cudakit's per-thread state exists yet.
    auto on_new_thread = [&](bool cudakit) {
      PhaseSeconds p{};
      std::exception_ptr error;
      std::thread([&] {
        try {
          if (cudakit) {
            Stream s(c_.device);
            p = idiom_phases(s);
          } else {
            set_current();
            RawStream s;
            p = raw_pageable_phases(s.handle());
          }
        } catch (...) {
          error = std::current_exception();
        }
      }).join();
      if (error) std::rethrow_exception(error);
      return p;
    };
    // cudakit's staging released and the pool's unused memory handed back first.
    auto released = [&](bool cudakit) {
      release_idle_staging(c_.device);
      MemoryPoolRef::device_default(c_.device).trim_to(0);
      return cudakit ? idiom_phases(stream_) : raw_pageable_phases(raw_stream_);
    };
    time_host_arms(plan, {idiom_thread.batch([&] { return on_new_thread(true); }),
                          pageable_thread.batch([&] { return on_new_thread(false); }),
                          idiom_library.batch([&] { return released(true); }),
                          pageable_library.batch([&] { return released(false); })});
    std::vector<Result> results;
    const int w = plan.warmup_rounds;
    for (Phase p : {allocate, upload_phase, download_phase, whole_request})
      results.push_back(pair(phase_names[p], "cold, first on a new thread and stream: README idiom vs raw pageable",
                             idiom_thread, pageable_thread, p, w));
    for (Phase p : {allocate, upload_phase, download_phase, whole_request})
      results.push_back(pair(phase_names[p],
                             "cold, first after staging released and pool trimmed: README idiom vs raw pageable",
                             idiom_library, pageable_library, p, w));
    results.push_back(page_locking(plan));
    return checked(std::move(results));
  }

 private:
  Interleave plan_of(int ops) const {
    Interleave plan = c_.interleave(ops);
    if (!c_.quick && c_.rounds == 0) {  // long batches: fewer rounds than the default 41
      plan.rounds = std::min(plan.rounds, 21);
      plan.warmup_rounds = std::min(plan.warmup_rounds, 3);
    }
    return plan;
  }

  static void* pinned_host(std::size_t size) {
    void* p = nullptr;
    check_raw(raw_entry<EntryId::MemHostAlloc>()(&p, size, CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc");
    return p;
  }

  // The README idiom, `in` made and filled as upload() does, on `s`.
  PhaseSeconds idiom_phases(StreamRef s) {
    std::array<Clock::time_point, 6> t;
    t[0] = Clock::now();
    DeviceBuffer<float> in(s, elements, uninitialized), temp(s, elements, uninitialized), x(s, elements, uninitialized);
    t[1] = Clock::now();
    copy(s, input_, in);
    t[2] = Clock::now();
    launch_request(s, kernels_, weights_, in, temp, x);
    t[3] = Clock::now();
    std::vector<float> out = download(s, x);
    t[4] = Clock::now();
    in.reset();
    temp.reset();
    x.reset();
    t[5] = Clock::now();
    outputs_.check(out.data());
    return phases_of(t);
  }

  PhaseSeconds raw_pageable_phases(CUstream s) {
    static const auto alloc = raw_entry<EntryId::MemAllocAsync>();
    static const auto free_async = raw_entry<EntryId::MemFreeAsync>();
    static const auto h2d = raw_entry<EntryId::MemcpyHtoDAsync>();
    static const auto d2h = raw_entry<EntryId::MemcpyDtoHAsync>();
    static const auto synchronize = raw_entry<EntryId::StreamSynchronize>();
    set_current();
    std::array<Clock::time_point, 6> t;
    CUdeviceptr in = 0, temp = 0, x = 0;
    t[0] = Clock::now();
    for (CUdeviceptr* p : {&in, &temp, &x}) check_raw(alloc(p, bytes, s), "cuMemAllocAsync");
    t[1] = Clock::now();
    check_raw(h2d(in, input_.data(), bytes, s), "cuMemcpyHtoDAsync");
    t[2] = Clock::now();
    launch_request_raw(s, kernels_, raw_weights_.pointer(), in, temp, x);
    t[3] = Clock::now();
    std::vector<float> out(elements);
    check_raw(d2h(out.data(), x, bytes, s), "cuMemcpyDtoHAsync");
    check_raw(synchronize(s), "cuStreamSynchronize");
    t[4] = Clock::now();
    for (CUdeviceptr p : {in, temp, x}) check_raw(free_async(p, s), "cuMemFreeAsync");
    t[5] = Clock::now();
    outputs_.check(out.data());
    return phases_of(t);
  }

  PhaseSeconds cudakit_pinned_phases() {
    std::array<Clock::time_point, 6> t;
    t[0] = t[1] = Clock::now();
    copy(stream_, host_in_, in_);
    t[2] = Clock::now();
    launch_request(stream_, kernels_, weights_, in_, temp_, x_);
    t[3] = Clock::now();
    download(stream_, x_, host_out_);
    t[4] = t[5] = Clock::now();
    outputs_.check(host_out_.data());
    return phases_of(t);
  }

  PhaseSeconds raw_pinned_phases() {
    static const auto h2d = raw_entry<EntryId::MemcpyHtoDAsync>();
    static const auto d2h = raw_entry<EntryId::MemcpyDtoHAsync>();
    static const auto synchronize = raw_entry<EntryId::StreamSynchronize>();
    set_current();
    std::array<Clock::time_point, 6> t;
    t[0] = t[1] = Clock::now();
    check_raw(h2d(raw_in_.pointer(), raw_pinned_in_, bytes, raw_stream_), "cuMemcpyHtoDAsync");
    t[2] = Clock::now();
    launch_request_raw(raw_stream_, kernels_, raw_weights_.pointer(), raw_in_.pointer(), raw_temp_.pointer(),
                       raw_x_.pointer());
    t[3] = Clock::now();
    check_raw(d2h(raw_pinned_out_, raw_x_.pointer(), bytes, raw_stream_), "cuMemcpyDtoHAsync");
    check_raw(synchronize(raw_stream_), "cuStreamSynchronize");
    t[4] = t[5] = Clock::now();
    outputs_.check(static_cast<const float*>(raw_pinned_out_));
    return phases_of(t);
  }

  // The raw arms make the primary context current themselves (once per thread).
  void set_current() { make_raw_context_current(raw_context_.handle()); }

  // reserve_staging of one buffer (after releasing every idle one) against
  // cuMemHostAlloc of the same size; the releases are not timed.
  Result page_locking(const Interleave& plan) {
    std::vector<double> cudakit, raw;
    for (int round = -plan.warmup_rounds; round < plan.rounds; ++round) {
      release_idle_staging(c_.device);
      auto start = Clock::now();
      reserve_staging(c_.device, std::size_t(1) << 20);
      double a = seconds(start, Clock::now());
      void* p = nullptr;
      start = Clock::now();
      check_raw(raw_entry<EntryId::MemHostAlloc>()(&p, std::size_t(1) << 20, CU_MEMHOSTALLOC_PORTABLE),
                "cuMemHostAlloc");
      double b = seconds(start, Clock::now());
      check_raw(raw_entry<EntryId::MemFreeHost>()(p), "cuMemFreeHost");
      if (round < 0) continue;
      cudakit.push_back(a);
      raw.push_back(b);
    }
    return cost_result("page-lock one staging buffer (1 MiB): reserve_staging vs cuMemHostAlloc", "idiom-phases",
                       PairedSamples{cudakit, raw}, 0.0);
  }

  // Rounds of `batch`, each sample the seconds it spent inside its timed part
  // (touch_seconds_) per operation.
  std::vector<double> timed_inside(const Interleave& plan, const Batch& batch) {
    std::vector<double> out;
    const int ops = plan.ops_per_batch > 0 ? plan.ops_per_batch : 1;
    for (int round = -plan.warmup_rounds; round < plan.rounds; ++round) {
      touch_seconds_ = 0;
      batch(ops);
      if (round >= 0) out.push_back(touch_seconds_ / ops);
    }
    return out;
  }

  Result pair(const char* phase, const std::string& arms, const PhaseLog& a, const PhaseLog& b, Phase p,
              int warmup) const {
    return cost_result(std::string(phase) + ": " + arms, "idiom-phases",
                       PairedSamples{a.samples(p, warmup), b.samples(p, warmup)}, 0.0);
  }

  // Every request's output was compared with the host reference: a wrong one fails
  // every result of the run.
  std::vector<Result> checked(std::vector<Result> results) const {
    if (std::string f = outputs_.failure(); !f.empty())
      for (Result& r : results) r.error = "a request gave a wrong output: " + f;
    return results;
  }

  const Context& c_;
  const std::vector<float> input_, weights_host_, expected_;
  RawPrimaryContext raw_context_;
  Kernels kernels_;
  Stream stream_;
  const DeviceBuffer<float> weights_;
  RawDeviceMemory raw_weights_;
  PinnedBuffer<float> host_in_, host_out_;
  DeviceBuffer<float> in_, temp_, x_;
  void* raw_pinned_in_;
  void* raw_pinned_out_;
  RawDeviceMemory raw_in_, raw_temp_, raw_x_;
  CUstream raw_stream_ = nullptr;
  Outputs outputs_;
  static inline double touch_seconds_ = 0;
};

CUDAKIT_BENCHMARK("idiom phases, warm", "idiom-phases", QuickRun::skip,
                  [](const Context& c) { return PhaseBenchmark(c).warm(); });
CUDAKIT_BENCHMARK("idiom phases, heap trimmed between requests", "idiom-phases", QuickRun::skip,
                  [](const Context& c) { return PhaseBenchmark(c).heap_trimmed(); });
CUDAKIT_BENCHMARK("idiom phases, cold", "idiom-phases", QuickRun::skip,
                  [](const Context& c) { return PhaseBenchmark(c).cold(); });

}  // namespace
}  // namespace cudakit::tool::bench
#endif  // CUDAKIT_HAVE_TEST_KERNELS
