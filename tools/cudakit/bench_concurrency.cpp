// Concurrency benchmark: the predecessors' scenario. 1, 4 and 8 host threads,
// each with its own stream, serve identical requests: upload 64 Ki floats, run 48 small
// kernels (add_arrays with a weights buffer every thread shares, read-only, then
// scale_offset, alternating), download 64 Ki floats. Every output is compared with a
// host reference computed once.
//
// Arms, in the same run:
//   cudakit:     a Stream per thread, PinnedBuffer input and output, copy(), typed
//                launch(), download() into the pinned output; the weights DeviceBuffer
//                was uploaded on another stream and is never synchronized by hand.
//   raw async:   non-blocking streams, cuMemcpyHtoDAsync/DtoHAsync from pinned memory,
//                the kernels, cuStreamSynchronize.
//   raw racy:    non-blocking streams with the synchronous legacy copies (cuMemcpyHtoD,
//                cuMemcpyDtoH) from pageable memory: the copies do not wait for the
//                stream's kernels.
//   raw ordered: blocking streams (default flags) with the same synchronous copies.
// The judged result is cudakit against raw async, in requests per second (higher is
// better), target at least 98%, every cudakit output correct; racy and ordered are
// reported, with their distinct and wrong outputs in the result's name.
//
// The synchronous legacy copies are not in cudakit's driver table (cudakit never uses
// the legacy stream), so this file resolves them itself from libcuda.so.1.
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench/harness.hpp"
#include "cudakit/cudakit.hpp"

#ifdef CUDAKIT_HAVE_TEST_KERNELS
#include "test_kernels.hpp"

namespace cudakit::tool::bench {
namespace {

using driver::EntryId;

constexpr int elements = 64 * 1024;
constexpr std::size_t bytes = elements * sizeof(float);
constexpr int kernels_per_request = 48;
constexpr int requests_per_thread = 100;
constexpr int block = 256;
constexpr int grid = (elements + block - 1) / block;
// scale 0.5 is exact, so in * 0.5 + 1 rounds once whether or not the compiler fuses it.
constexpr float scale = 0.5f;
constexpr float offset = 1.0f;
constexpr double target = 0.98;

using AddArrays = void(const float*, const float*, float*, int);
using ScaleOffset = void(const float*, float*, float, float, int);

std::vector<float> make_input() {
  std::vector<float> v(elements);
  for (int i = 0; i < elements; ++i) v[i] = static_cast<float>(i % 1000) * 0.25f;
  return v;
}
std::vector<float> make_weights() {
  std::vector<float> v(elements);
  for (int i = 0; i < elements; ++i) v[i] = static_cast<float>(i % 7) * 0.125f;
  return v;
}
// The request on the host: temp = x + w; x = temp * 0.5 + 1; 24 times.
std::vector<float> reference(const std::vector<float>& input, const std::vector<float>& weights) {
  std::vector<float> x = input;
  for (int k = 0; k < kernels_per_request / 2; ++k)
    for (int i = 0; i < elements; ++i) {
      volatile float temp = x[i] + weights[i];
      volatile float product = temp * scale;
      x[i] = product + offset;
    }
  return x;
}

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

// What an arm's outputs looked like: how many were wrong, and the distinct outputs.
class Outputs {
 public:
  explicit Outputs(const std::vector<float>& expected) : expected_(expected) {}
  // Cheap when right (one memcmp); a wrong output is hashed to count distinct ones.
  void check(const float* output) {
    if (std::memcmp(output, expected_.data(), bytes) == 0) {
      correct_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    std::uint64_t h = 1469598103934665603ull;
    const auto* p = reinterpret_cast<const unsigned char*>(output);
    for (std::size_t i = 0; i < bytes; i += sizeof(std::uint64_t)) {
      std::uint64_t word;
      std::memcpy(&word, p + i, sizeof word);
      h = (h ^ word) * 1099511628211ull;
    }
    std::lock_guard lock(mutex_);
    ++wrong_;
    wrong_hashes_.insert(h);
  }
  long correct() const { return correct_.load(); }
  long wrong() const {
    std::lock_guard lock(mutex_);
    return wrong_;
  }
  long distinct() const {
    std::lock_guard lock(mutex_);
    return static_cast<long>(wrong_hashes_.size()) + (correct_.load() > 0 ? 1 : 0);
  }
  std::string summary() const {
    return std::to_string(distinct()) + " distinct outputs, " + std::to_string(wrong()) + " of " +
           std::to_string(wrong() + correct()) + " wrong";
  }

 private:
  const std::vector<float>& expected_;
  std::atomic<long> correct_{0};
  mutable std::mutex mutex_;
  long wrong_ = 0;
  std::set<std::uint64_t> wrong_hashes_;
};

// Runs body(t) on `threads` threads at once and rethrows the first exception.
void run_threads(int threads, const std::function<void(int)>& body) {
  std::vector<std::exception_ptr> errors(threads);
  std::vector<std::thread> workers;
  workers.reserve(threads);
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      try {
        body(t);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  for (auto& w : workers) w.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// The cudakit arm: one Stream and its buffers per thread.
struct CudakitWorker {
  CudakitWorker(Device device, const std::vector<float>& input)
      : stream(device),
        host_input(elements, uninitialized),
        host_output(elements, zeroed),
        in(stream, elements, zeroed),
        temp(stream, elements, zeroed),
        x(stream, elements, zeroed) {
    std::memcpy(host_input.data(), input.data(), bytes);
  }
  Stream stream;
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

enum class RawArm { async, racy, ordered };

std::vector<Result> concurrent_requests(const Context& c, int threads) {
  const std::vector<float> input = make_input();
  const std::vector<float> weights_host = make_weights();
  const std::vector<float> expected = reference(input, weights_host);

  RawPrimaryContext raw_context(c.device);
  const CUcontext context = raw_context.handle();
  LegacyCopies legacy;
  Module module = Module::load(c.device, cudakit_kernels::test_fatbin());
  auto add_arrays = module.kernel<AddArrays>("add_arrays");
  auto scale_offset = module.kernel<ScaleOffset>("scale_offset");
  const CUfunction add_function = add_arrays.handle();
  const CUfunction scale_function = scale_offset.handle();
  const LaunchConfig config{grid, block};

  // cudakit's weights: uploaded on another stream, never synchronized by hand; the
  // workers' launches are ordered after the upload by the buffer's tracking.
  Stream upload_stream(c.device);
  const DeviceBuffer<float> weights = upload(upload_stream, weights_host);

  // The raw arms' weights: uploaded and waited for up front.
  CUdeviceptr raw_weights = 0;
  check_raw(raw_entry<EntryId::MemAlloc>()(&raw_weights, bytes), "cuMemAlloc");
  struct FreeWeights {
    CUdeviceptr p;
    ~FreeWeights() {
      CUresult status = raw_entry<EntryId::MemFree>()(p);
      if (status != CUDA_SUCCESS) park_driver_error(status, "cuMemFree", Resource::none(), "raw benchmark");
    }
  } free_weights{raw_weights};
  {
    RawStream s;
    check_raw(raw_entry<EntryId::MemcpyHtoDAsync>()(raw_weights, weights_host.data(), bytes, s.handle()),
              "cuMemcpyHtoDAsync");
    check_raw(raw_entry<EntryId::StreamSynchronize>()(s.handle()), "cuStreamSynchronize");
  }

  std::vector<std::unique_ptr<CudakitWorker>> cudakit_workers;
  std::vector<std::unique_ptr<RawWorker>> async_workers, racy_workers, ordered_workers;
  for (int t = 0; t < threads; ++t) {
    cudakit_workers.push_back(std::make_unique<CudakitWorker>(c.device, input));
    async_workers.push_back(std::make_unique<RawWorker>(CU_STREAM_NON_BLOCKING, true, input));
    racy_workers.push_back(std::make_unique<RawWorker>(CU_STREAM_NON_BLOCKING, false, input));
    ordered_workers.push_back(std::make_unique<RawWorker>(CU_STREAM_DEFAULT, false, input));
  }
  for (auto& w : cudakit_workers) w->stream.synchronize();

  Outputs cudakit_outputs(expected), async_outputs(expected), racy_outputs(expected), ordered_outputs(expected);

  const auto launch_kernel = raw_entry<EntryId::LaunchKernel>();
  const auto h2d_async = raw_entry<EntryId::MemcpyHtoDAsync>();
  const auto d2h_async = raw_entry<EntryId::MemcpyDtoHAsync>();
  const auto stream_synchronize = raw_entry<EntryId::StreamSynchronize>();
  const auto set_current = raw_entry<EntryId::CtxSetCurrent>();

  // The cudakit arm: `ops` requests over all threads.
  Batch cudakit_batch = [&](int ops) {
    const int per_thread = ops / threads > 0 ? ops / threads : 1;
    run_threads(threads, [&](int t) {
      CudakitWorker& w = *cudakit_workers[t];
      const StreamRef s = w.stream;
      for (int r = 0; r < per_thread; ++r) {
        copy(s, w.host_input, w.in);
        for (int k = 0; k < kernels_per_request; k += 2) {
          if (k == 0) launch(s, add_arrays, config, std::as_const(w.in), weights, w.temp, elements);
          else launch(s, add_arrays, config, std::as_const(w.x), weights, w.temp, elements);
          launch(s, scale_offset, config, std::as_const(w.temp), w.x, scale, offset, elements);
        }
        download(s, w.x, w.host_output);
        cudakit_outputs.check(w.host_output.data());
      }
    });
  };

  // The raw kernels of one request on `w.stream`.
  auto raw_kernels = [&](RawWorker& w) {
    int n = elements;
    float sc = scale, of = offset;
    for (int k = 0; k < kernels_per_request; k += 2) {
      CUdeviceptr source = k == 0 ? w.in : w.x;
      void* add_params[] = {&source, &raw_weights, &w.temp, &n};
      check_raw(launch_kernel(add_function, grid, 1, 1, block, 1, 1, 0, w.stream, add_params, nullptr),
                "cuLaunchKernel");
      void* scale_params[] = {&w.temp, &w.x, &sc, &of, &n};
      check_raw(launch_kernel(scale_function, grid, 1, 1, block, 1, 1, 0, w.stream, scale_params, nullptr),
                "cuLaunchKernel");
    }
  };

  auto raw_batch = [&](RawArm arm) -> Batch {
    std::vector<std::unique_ptr<RawWorker>>* workers =
        arm == RawArm::async ? &async_workers : arm == RawArm::racy ? &racy_workers : &ordered_workers;
    Outputs* outputs = arm == RawArm::async ? &async_outputs : arm == RawArm::racy ? &racy_outputs : &ordered_outputs;
    return [&, arm, workers, outputs](int ops) {
      const int per_thread = ops / threads > 0 ? ops / threads : 1;
      run_threads(threads, [&](int t) {
        RawWorker& w = *(*workers)[t];
        check_raw(set_current(context), "cuCtxSetCurrent");
        for (int r = 0; r < per_thread; ++r) {
          if (arm == RawArm::async) {
            check_raw(h2d_async(w.in, w.host_input, bytes, w.stream), "cuMemcpyHtoDAsync");
            raw_kernels(w);
            check_raw(d2h_async(w.host_output, w.x, bytes, w.stream), "cuMemcpyDtoHAsync");
            check_raw(stream_synchronize(w.stream), "cuStreamSynchronize");
          } else {
            check_raw(legacy.h2d(w.in, w.host_input, bytes), "cuMemcpyHtoD");
            raw_kernels(w);
            check_raw(legacy.d2h(w.host_output, w.x, bytes), "cuMemcpyDtoH");
          }
          outputs->check(w.host_output);
        }
      });
    };
  };

  // Every batch ends with idle streams.
  auto drain = [&] {
    for (auto& w : cudakit_workers) w->stream.synchronize();
    for (auto* list : {&async_workers, &racy_workers, &ordered_workers})
      for (auto& w : *list) check_raw(stream_synchronize(w->stream), "cuStreamSynchronize");
  };

  const std::string prefix = std::to_string(threads) + (threads == 1 ? " thread" : " threads");
  auto requests_result = [&](std::string name, const PairedSamples& samples, double target_ratio) {
    Result r;
    r.name = std::move(name);
    r.group = "concurrency";
    r.unit = "requests/s";
    r.better = Better::higher;
    r.target_ratio = target_ratio;
    for (double s : samples.cudakit) r.cudakit.push_back(1.0 / s);
    for (double s : samples.raw) r.raw.push_back(1.0 / s);
    return r;
  };

  Interleave plan = c.interleave(threads * requests_per_thread);
  plan.between_batches = drain;
  auto async_samples = time_host(plan, cudakit_batch, raw_batch(RawArm::async));

  // The reported arms: fewer rounds.
  Interleave short_plan = plan;
  if (short_plan.rounds > 11) short_plan.rounds = 11;
  if (short_plan.warmup_rounds > 1) short_plan.warmup_rounds = 1;
  auto racy_samples = time_host(short_plan, cudakit_batch, raw_batch(RawArm::racy));
  auto ordered_samples = time_host(short_plan, cudakit_batch, raw_batch(RawArm::ordered));
  drain();

  std::vector<Result> results;
  Result judged = requests_result(prefix + ": cudakit vs raw async (cudakit " + cudakit_outputs.summary() + ")",
                                  async_samples, target);
  if (cudakit_outputs.wrong() != 0 || cudakit_outputs.correct() == 0)
    judged.error = "cudakit: " + cudakit_outputs.summary();
  else if (async_outputs.wrong() != 0 || async_outputs.correct() == 0)
    judged.error = "raw async (the benchmark itself is wrong): " + async_outputs.summary();
  results.push_back(std::move(judged));
  results.push_back(requests_result(prefix + ": cudakit vs raw racy (racy " + racy_outputs.summary() + ")",
                                    racy_samples, 0.0));
  results.push_back(requests_result(prefix + ": cudakit vs raw ordered (ordered " + ordered_outputs.summary() + ")",
                                    ordered_samples, 0.0));
  return results;
}

std::vector<Result> requests_1(const Context& c) { return concurrent_requests(c, 1); }
std::vector<Result> requests_4(const Context& c) { return concurrent_requests(c, 4); }
std::vector<Result> requests_8(const Context& c) { return concurrent_requests(c, 8); }

CUDAKIT_BENCHMARK("concurrent requests, 1 thread", "concurrency", QuickRun::skip, requests_1);
CUDAKIT_BENCHMARK("concurrent requests, 4 threads", "concurrency", QuickRun::skip, requests_4);
CUDAKIT_BENCHMARK("concurrent requests, 8 threads", "concurrency", QuickRun::skip, requests_8);

}  // namespace
}  // namespace cudakit::tool::bench
#endif  // CUDAKIT_HAVE_TEST_KERNELS
