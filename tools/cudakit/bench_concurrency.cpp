// Concurrency benchmark: the predecessors' scenario (request_scenario.hpp). 1, 4 and 8
// worker threads, each with its own stream, serve identical requests; the threads live
// for the whole scenario, as a server's do, and every output is checked.
//
// Arms, interleaved in the same run (request_scenario.hpp says what each does):
//   README idiom, raw pageable, cudakit pinned, raw pinned (async), raw staged (the
//   idiom's work staged by hand), and the README idiom, raw pageable and raw staged arms
//   again with every output kept: a server that hands each result on keeps its vector,
//   so each request's output lands in fresh host memory (the kept outputs are let go
//   between batches, outside the timing).
// Each runs in two variants of the weights the kernels read:
//   shared weights:     one read-only buffer, uploaded once on another stream and read by
//                       every worker's stream (cudakit orders the first read on each
//                       stream after the upload; the raw arms waited for it up front);
//   weights per thread: each worker's cudakit weights uploaded on its own stream (no
//                       buffer is shared across streams); the raw arms read one buffer,
//                       which costs them nothing more.
// Judged, in requests per second (higher is better), with every output correct:
//   README idiom vs raw pageable         at least 1.00 (the same calls of the raw driver)
//   README idiom vs raw staged           at least 0.95 (the same work done by hand: the
//                                        floor for pageable memory)
//   cudakit pinned vs raw pinned (async) at least 0.98
//   README idiom, every output kept, vs raw staged, every output kept   at least 0.95
//                                        (first-touch page faults of the fresh output:
//                                        cudakit maps its pages in one call while the
//                                        device works, as careful code zeroes them then)
// Reported: the README idiom (each output kept or not), raw staged and raw pageable
// (every output kept) against raw pinned: what pageable memory costs over the fastest
// pattern. That cost is the host's (two host copies of 256 KiB and a new vector's pages:
// 6.8 us for the vector on one host, 41 to 51 us on a virtual machine), so it is shown,
// with raw staged against raw pinned beside it, and not judged.
// Reported: the first request of each arm on fresh worker threads, after cudakit's
// staging buffers were released and the memory pool trimmed (its cold cost, once per
// thread), and two raw arms that order copies wrongly or slowly (shared weights only):
//   raw racy:    non-blocking streams with the synchronous legacy copies (cuMemcpyHtoD,
//                cuMemcpyDtoH) from pageable memory: the copies do not wait for the
//                stream's kernels;
//   raw ordered: blocking streams (default flags) with the same synchronous copies.
//
// The synchronous legacy copies are not in cudakit's driver table (cudakit never uses
// the legacy stream), so this file resolves them itself from libcuda.so.1.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
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

// Requests per thread in a batch: enough for a steady state; the quick run (the doctor)
// does a quarter of 40 per batch.
constexpr int requests_per_thread = 150;
constexpr int quick_requests_per_thread = 40;
constexpr double idiom_vs_pageable_target = 1.0;
constexpr double idiom_vs_staged_target = 0.95;
constexpr double pinned_target = 0.98;
constexpr double idiom_kept_vs_staged_kept_target = 0.95;
constexpr double reported = 0.0;

// The synchronous legacy copies, resolved from libcuda.so.1.
struct LegacyCopies {
  using HtoD = CUresult (*)(CUdeviceptr, const void*, std::size_t);
  using DtoH = CUresult (*)(void*, CUdeviceptr, std::size_t);
  LegacyCopies() {
    library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) throw Error(std::string("dlopen(libcuda.so.1) failed: ") + dlerror());
    h2d = reinterpret_cast<HtoD>(dlsym(library, "cuMemcpyHtoD_v2"));
    d2h = reinterpret_cast<DtoH>(dlsym(library, "cuMemcpyDtoH_v2"));
    if (h2d == nullptr || d2h == nullptr) {
      dlclose(library);
      throw Error("libcuda.so.1 has no cuMemcpyHtoD_v2 or cuMemcpyDtoH_v2");
    }
  }
  ~LegacyCopies() { dlclose(library); }
  LegacyCopies(const LegacyCopies&) = delete;
  LegacyCopies& operator=(const LegacyCopies&) = delete;
  void* library = nullptr;
  HtoD h2d = nullptr;
  DtoH d2h = nullptr;
};

// A cudakit worker's stream, its weights (uploaded on that stream), and the buffers of
// the pinned arm, made once.
struct CudakitWorker {
  CudakitWorker(Device device, const std::vector<float>& input, const std::vector<float>& weights)
      : stream(device),
        own_weights(upload(stream, weights)),
        host_input(elements, uninitialized),
        host_output(elements, zeroed),
        in(stream, elements, zeroed),
        temp(stream, elements, zeroed),
        x(stream, elements, zeroed) {
    std::memcpy(host_input.data(), input.data(), bytes);
  }
  Stream stream;
  DeviceBuffer<float> own_weights;
  PinnedBuffer<float> host_input;
  PinnedBuffer<float> host_output;
  DeviceBuffer<float> in, temp, x;
};

// A raw arm's per-thread state: a stream, device buffers, and host memory (pinned for
// the async arm, pageable for the others).
struct RawWorker {
  RawWorker(unsigned stream_flags, bool pinned, const std::vector<float>& input) {
    check_raw(raw_entry<EntryId::StreamCreateWithPriority>()(&stream, stream_flags, 0), "cuStreamCreateWithPriority");
    for (CUdeviceptr* p : {&in, &temp, &x}) check_raw(raw_entry<EntryId::MemAlloc>()(p, bytes), "cuMemAlloc");
    if (pinned) {
      void* a = nullptr;
      void* b = nullptr;
      check_raw(raw_entry<EntryId::MemHostAlloc>()(&a, bytes, CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc");
      pinned_input = static_cast<float*>(a);
      check_raw(raw_entry<EntryId::MemHostAlloc>()(&b, bytes, CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc");
      pinned_output = static_cast<float*>(b);
      host_input = pinned_input;
      host_output = pinned_output;
    } else {
      pageable_input = input;
      pageable_output.assign(elements, 0.0f);
      host_input = pageable_input.data();
      host_output = pageable_output.data();
    }
    std::memcpy(host_input, input.data(), bytes);
  }
  ~RawWorker() {
    auto park = [](CUresult status, const char* call) {
      if (status != CUDA_SUCCESS) park_driver_error(status, call, Resource::none(), "raw benchmark");
    };
    if (stream != nullptr) park(raw_entry<EntryId::StreamSynchronize>()(stream), "cuStreamSynchronize");
    for (CUdeviceptr p : {in, temp, x})
      if (p != 0) park(raw_entry<EntryId::MemFree>()(p), "cuMemFree");
    for (float* p : {pinned_input, pinned_output})
      if (p != nullptr) park(raw_entry<EntryId::MemFreeHost>()(p), "cuMemFreeHost");
    if (stream != nullptr) park(raw_entry<EntryId::StreamDestroy>()(stream), "cuStreamDestroy");
  }
  RawWorker(const RawWorker&) = delete;
  RawWorker& operator=(const RawWorker&) = delete;

  CUstream stream = nullptr;
  CUdeviceptr in = 0, temp = 0, x = 0;
  float* pinned_input = nullptr;
  float* pinned_output = nullptr;
  std::vector<float> pageable_input, pageable_output;
  float* host_input = nullptr;
  float* host_output = nullptr;
};

enum class Arm {
  idiom,
  raw_pageable,
  cudakit_pinned,
  raw_pinned,
  raw_racy,
  raw_ordered,
  idiom_kept,
  raw_pageable_kept,
  raw_staged,
  raw_staged_kept
};
constexpr int arm_count = static_cast<int>(Arm::raw_staged_kept) + 1;  // every arm, timed or not
constexpr Arm timed_arms[] = {Arm::idiom,      Arm::raw_pageable,      Arm::cudakit_pinned, Arm::raw_pinned,
                              Arm::idiom_kept, Arm::raw_pageable_kept, Arm::raw_staged,     Arm::raw_staged_kept};

const char* arm_name(Arm arm) {
  switch (arm) {
    case Arm::idiom: return "README idiom";
    case Arm::raw_pageable: return "raw pageable";
    case Arm::cudakit_pinned: return "cudakit pinned";
    case Arm::raw_pinned: return "raw pinned";
    case Arm::raw_racy: return "raw racy";
    case Arm::raw_ordered: return "raw ordered";
    case Arm::idiom_kept: return "README idiom, every output kept";
    case Arm::raw_pageable_kept: return "raw pageable, every output kept";
    case Arm::raw_staged: return "raw staged";
    case Arm::raw_staged_kept: return "raw staged, every output kept";
  }
  return "";
}

class Scenario {
 public:
  Scenario(const Context& c, int threads)
      : c_(c),
        threads_(threads),
        input_(make_input()),
        weights_host_(make_weights()),
        expected_(reference(input_, weights_host_)),
        raw_context_(c.device),
        kernels_(c.device),
        upload_stream_(c.device),
        shared_weights_(upload(upload_stream_, weights_host_)),  // never synchronized by hand
        raw_weights_(upload_raw_weights(weights_host_)),
        kept_(threads),
        workers_(threads) {
    for (int t = 0; t < threads; ++t) {
      cudakit_.push_back(std::make_unique<CudakitWorker>(c.device, input_, weights_host_));
      pinned_.push_back(std::make_unique<RawWorker>(CU_STREAM_NON_BLOCKING, true, input_));
      staged_.push_back(std::make_unique<RawWorker>(CU_STREAM_NON_BLOCKING, true, input_));
      pageable_.push_back(std::make_unique<RawWorker>(CU_STREAM_NON_BLOCKING, false, input_));
      racy_.push_back(std::make_unique<RawWorker>(CU_STREAM_NON_BLOCKING, false, input_));
      ordered_.push_back(std::make_unique<RawWorker>(CU_STREAM_DEFAULT, false, input_));
    }
    for (auto& w : cudakit_) w->stream.synchronize();
    for (int a = 0; a < arm_count; ++a) outputs_.push_back(std::make_unique<Outputs>(expected_));
  }

  std::vector<Result> run() {
    std::vector<Result> results;
    cold_first_requests(results);
    timed(/*shared=*/true, results);
    timed(/*shared=*/false, results);
    if (!c_.quick) racy_and_ordered(results);
    return results;
  }

 private:
  // One request of `arm` on worker thread `t`.
  void request(Arm arm, int t, bool shared) {
    CudakitWorker& w = *cudakit_[t];
    const DeviceBuffer<float>& weights = shared ? shared_weights_ : w.own_weights;
    Outputs& out = *outputs_[static_cast<int>(arm)];
    switch (arm) {
      case Arm::idiom: {
        std::vector<float> result = idiom_request(w.stream, kernels_, weights, input_);
        out.check(result.data());
        return;
      }
      case Arm::cudakit_pinned:
        copy(w.stream, w.host_input, w.in);
        launch_request(w.stream, kernels_, weights, w.in, w.temp, w.x);
        download(w.stream, w.x, w.host_output);
        out.check(w.host_output.data());
        return;
      case Arm::raw_pageable: {
        set_current();
        std::vector<float> result = raw_pageable_request(pageable_[t]->stream, kernels_, raw_weights_.pointer(), input_);
        out.check(result.data());
        return;
      }
      case Arm::idiom_kept: {
        std::vector<float> result = idiom_request(w.stream, kernels_, weights, input_);
        out.check(result.data());
        kept_[t].push_back(std::move(result));
        return;
      }
      case Arm::raw_pageable_kept: {
        set_current();
        std::vector<float> result = raw_pageable_request(pageable_[t]->stream, kernels_, raw_weights_.pointer(), input_);
        out.check(result.data());
        kept_[t].push_back(std::move(result));
        return;
      }
      case Arm::raw_staged:
      case Arm::raw_staged_kept: {
        set_current();
        RawWorker& r = *staged_[t];
        std::vector<float> result =
            raw_staged_request(r.stream, kernels_, raw_weights_.pointer(), input_, r.pinned_input, r.pinned_output);
        out.check(result.data());
        if (arm == Arm::raw_staged_kept) kept_[t].push_back(std::move(result));
        return;
      }
      case Arm::raw_pinned: {
        set_current();
        RawWorker& r = *pinned_[t];
        static const auto h2d = raw_entry<EntryId::MemcpyHtoDAsync>();
        static const auto d2h = raw_entry<EntryId::MemcpyDtoHAsync>();
        static const auto synchronize = raw_entry<EntryId::StreamSynchronize>();
        check_raw(h2d(r.in, r.host_input, bytes, r.stream), "cuMemcpyHtoDAsync");
        launch_request_raw(r.stream, kernels_, raw_weights_.pointer(), r.in, r.temp, r.x);
        check_raw(d2h(r.host_output, r.x, bytes, r.stream), "cuMemcpyDtoHAsync");
        check_raw(synchronize(r.stream), "cuStreamSynchronize");
        out.check(r.host_output);
        return;
      }
      case Arm::raw_racy:
      case Arm::raw_ordered: {
        set_current();
        RawWorker& r = arm == Arm::raw_racy ? *racy_[t] : *ordered_[t];
        check_raw(legacy_->h2d(r.in, r.host_input, bytes), "cuMemcpyHtoD");
        launch_request_raw(r.stream, kernels_, raw_weights_.pointer(), r.in, r.temp, r.x);
        check_raw(legacy_->d2h(r.host_output, r.x, bytes), "cuMemcpyDtoH");
        out.check(r.host_output);
        return;
      }
    }
  }

  // The raw arms make the primary context current themselves (once per thread).
  void set_current() { make_raw_context_current(raw_context_.handle()); }

  Batch batch(Arm arm, bool shared) {
    return [this, arm, shared](int ops) {
      const int per_thread = std::max(1, ops / threads_);
      workers_.run([&](int t) {
        for (int r = 0; r < per_thread; ++r) request(arm, t, shared);
      });
    };
  }

  // Every batch ends with idle streams.
  void drain() {
    static const auto synchronize = raw_entry<EntryId::StreamSynchronize>();
    for (auto& w : cudakit_) w->stream.synchronize();
    for (auto* list : {&pinned_, &staged_, &pageable_, &racy_, &ordered_})
      for (auto& w : *list) check_raw(synchronize(w->stream), "cuStreamSynchronize");
    for (auto& outputs : kept_) outputs = {};  // the kept outputs go back to the OS here, untimed
  }

  std::string prefix(bool shared) const {
    return std::to_string(threads_) + (threads_ == 1 ? " thread" : " threads") +
           (shared ? ", shared weights" : ", weights per thread");
  }

  static Result requests_result(std::string name, const std::vector<double>& cudakit, const std::vector<double>& raw,
                                double target) {
    Result r;
    r.name = std::move(name);
    r.group = "concurrency";
    r.unit = "requests/s";
    r.better = Better::higher;
    r.target_ratio = target;
    for (double s : cudakit) r.cudakit.push_back(1.0 / s);
    for (double s : raw) r.raw.push_back(1.0 / s);
    return r;
  }

  Result compared(bool shared, Arm a, Arm b, const std::vector<std::vector<double>>& samples, double target) {
    const Outputs& oa = *outputs_[static_cast<int>(a)];
    const Outputs& ob = *outputs_[static_cast<int>(b)];
    auto index = [](Arm arm) {
      return static_cast<std::size_t>(std::find(std::begin(timed_arms), std::end(timed_arms), arm) -
                                      std::begin(timed_arms));
    };
    Result r = requests_result(prefix(shared) + ": " + arm_name(a) + " vs " + arm_name(b) + " (" + arm_name(a) + " " +
                                   oa.summary() + ")",
                               samples[index(a)], samples[index(b)], target);
    if (std::string f = oa.failure(); !f.empty()) r.error = std::string(arm_name(a)) + ": " + f;
    else if (std::string g = ob.failure(); !g.empty())
      r.error = std::string(arm_name(b)) + " (the benchmark itself is wrong): " + g;
    return r;
  }

  void timed(bool shared, std::vector<Result>& results) {
    Interleave plan = c_.interleave(threads_ * (c_.quick ? quick_requests_per_thread : requests_per_thread));
    if (!c_.quick && c_.rounds == 0) {  // long batches: fewer rounds than the default 41
      plan.rounds = std::min(plan.rounds, 21);
      plan.warmup_rounds = std::min(plan.warmup_rounds, 3);
    }
    plan.between_batches = [this] { drain(); };
    std::vector<Batch> arms;
    for (Arm a : timed_arms) arms.push_back(batch(a, shared));
    for (auto& o : outputs_) o = std::make_unique<Outputs>(expected_);
    auto samples = time_host_arms(plan, arms);
    results.push_back(compared(shared, Arm::idiom, Arm::raw_pageable, samples, idiom_vs_pageable_target));
    results.push_back(compared(shared, Arm::idiom, Arm::raw_staged, samples, idiom_vs_staged_target));
    results.push_back(compared(shared, Arm::idiom, Arm::raw_pinned, samples, reported));
    results.push_back(compared(shared, Arm::raw_staged, Arm::raw_pinned, samples, reported));
    results.push_back(compared(shared, Arm::cudakit_pinned, Arm::raw_pinned, samples, pinned_target));
    results.push_back(
        compared(shared, Arm::idiom_kept, Arm::raw_staged_kept, samples, idiom_kept_vs_staged_kept_target));
    results.push_back(compared(shared, Arm::idiom_kept, Arm::raw_pinned, samples, reported));
    results.push_back(compared(shared, Arm::raw_pageable_kept, Arm::raw_pinned, samples, reported));
  }

  void racy_and_ordered(std::vector<Result>& results) {
    legacy_.emplace();
    Interleave plan = c_.interleave(threads_ * 100);
    if (c_.rounds == 0) plan.rounds = std::min(plan.rounds, 11);
    plan.warmup_rounds = std::min(plan.warmup_rounds, 1);
    plan.between_batches = [this] { drain(); };
    for (Arm raw : {Arm::raw_racy, Arm::raw_ordered}) {
      auto samples = time_host_arms(plan, {batch(Arm::cudakit_pinned, true), batch(raw, true)});
      const Outputs& o = *outputs_[static_cast<int>(raw)];
      results.push_back(requests_result(prefix(true) + ": cudakit pinned vs " + arm_name(raw) + " (" + arm_name(raw) +
                                            " " + o.summary() + ")",
                                        samples[0], samples[1], 0.0));
    }
    drain();
  }

  // Each worker thread's first request of each arm, with cudakit's staging buffers
  // released and the pool's unused memory handed back before each arm: what the first
  // request on a fresh thread costs. Microseconds, one sample per thread.
  void cold_first_requests(std::vector<Result>& results) {
    std::vector<std::vector<double>> seconds(std::size(timed_arms), std::vector<double>(threads_));
    for (std::size_t a = 0; a < std::size(timed_arms); ++a) {
      drain();
      release_idle_staging(c_.device);
      MemoryPoolRef::device_default(c_.device).trim_to(0);
      workers_.run([&](int t) {
        auto start = std::chrono::steady_clock::now();
        request(timed_arms[a], t, true);
        seconds[a][t] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      });
    }
    drain();
    auto result = [&](std::size_t a, std::size_t b) {
      PairedSamples s{seconds[a], seconds[b]};
      return cost_result(std::to_string(threads_) + (threads_ == 1 ? " thread" : " threads") +
                             ": first request on a fresh thread, staging released: " + arm_name(timed_arms[a]) +
                             " vs " + arm_name(timed_arms[b]),
                         "concurrency", s, 0.0);
    };
    results.push_back(result(0, 1));
    results.push_back(result(2, 3));
  }

  const Context& c_;
  const int threads_;
  const std::vector<float> input_, weights_host_, expected_;
  RawPrimaryContext raw_context_;
  Kernels kernels_;
  std::optional<LegacyCopies> legacy_;  // only the racy and ordered arms use them
  Stream upload_stream_;
  const DeviceBuffer<float> shared_weights_;
  RawDeviceMemory raw_weights_;
  std::vector<std::unique_ptr<CudakitWorker>> cudakit_;
  std::vector<std::unique_ptr<RawWorker>> pinned_, staged_, pageable_, racy_, ordered_;
  std::vector<std::unique_ptr<Outputs>> outputs_;
  std::vector<std::vector<std::vector<float>>> kept_;  // per worker thread: the outputs a kept arm holds
  WorkerThreads workers_;  // last: its threads end before the state they use goes
};

std::vector<Result> requests_1(const Context& c) { return Scenario(c, 1).run(); }
std::vector<Result> requests_4(const Context& c) { return Scenario(c, 4).run(); }
std::vector<Result> requests_8(const Context& c) { return Scenario(c, 8).run(); }

// The 1-thread scenario is in the quick run (`cudakit bench --quick`, the doctor): fewer
// requests per batch and rounds, and without the racy and ordered arms.
CUDAKIT_BENCHMARK("concurrent requests, 1 thread", "concurrency", QuickRun::include, requests_1);
CUDAKIT_BENCHMARK("concurrent requests, 4 threads", "concurrency", QuickRun::skip, requests_4);
CUDAKIT_BENCHMARK("concurrent requests, 8 threads", "concurrency", QuickRun::skip, requests_8);

}  // namespace
}  // namespace cudakit::tool::bench
#endif  // CUDAKIT_HAVE_TEST_KERNELS
