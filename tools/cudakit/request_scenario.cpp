// The request of the concurrency and idiom-phases benchmarks (request_scenario.hpp).
#include "request_scenario.hpp"

#ifdef CUDAKIT_HAVE_TEST_KERNELS
#include <cstring>
#include <utility>

#include "bench/harness.hpp"
#include "test_kernels.hpp"

namespace cudakit::tool::bench::requests {

using driver::EntryId;

namespace {
constexpr int block = 256;
std::vector<unsigned char> image_for_testing;
constexpr int grid = (elements + block - 1) / block;
// scale 0.5 is exact, so in * 0.5 + 1 rounds once whether or not the compiler fuses it.
constexpr float scale = 0.5f;
constexpr float offset = 1.0f;
}  // namespace

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

std::span<const unsigned char> kernel_image() {
  if (!image_for_testing.empty()) return image_for_testing;
  return cudakit_kernels::test_fatbin();
}

void set_kernel_image_for_testing(std::vector<unsigned char> image) { image_for_testing = std::move(image); }

Kernels::Kernels(const Device& device)
    : module(Module::load(device, kernel_image())),
      add_arrays(module.kernel<void(const float*, const float*, float*, int)>("add_arrays")),
      scale_offset(module.kernel<void(const float*, float*, float, float, int)>("scale_offset")),
      add_function(add_arrays.handle()),
      scale_function(scale_offset.handle()) {}

void launch_request(StreamRef stream, const Kernels& k, const DeviceBuffer<float>& weights,
                    const DeviceBuffer<float>& in, DeviceBuffer<float>& temp, DeviceBuffer<float>& x) {
  const LaunchConfig config{grid, block};
  for (int i = 0; i < kernels_per_request; i += 2) {
    if (i == 0) launch(stream, k.add_arrays, config, in, weights, temp, elements);
    else launch(stream, k.add_arrays, config, std::as_const(x), weights, temp, elements);
    launch(stream, k.scale_offset, config, std::as_const(temp), x, scale, offset, elements);
  }
}

void launch_request_raw(CUstream stream, const Kernels& k, CUdeviceptr weights, CUdeviceptr in, CUdeviceptr temp,
                        CUdeviceptr x) {
  static const auto launch_kernel = raw_entry<EntryId::LaunchKernel>();
  int n = elements;
  float sc = scale, of = offset;
  for (int i = 0; i < kernels_per_request; i += 2) {
    CUdeviceptr source = i == 0 ? in : x;
    void* add_params[] = {&source, &weights, &temp, &n};
    check_raw(launch_kernel(k.add_function, grid, 1, 1, block, 1, 1, 0, stream, add_params, nullptr),
              "cuLaunchKernel");
    void* scale_params[] = {&temp, &x, &sc, &of, &n};
    check_raw(launch_kernel(k.scale_function, grid, 1, 1, block, 1, 1, 0, stream, scale_params, nullptr),
              "cuLaunchKernel");
  }
}

std::vector<float> idiom_request(StreamRef stream, const Kernels& k, const DeviceBuffer<float>& weights,
                                 const std::vector<float>& input) {
  DeviceBuffer<float> in = upload(stream, input);
  DeviceBuffer<float> temp(stream, input.size(), uninitialized), x(stream, input.size(), uninitialized);
  launch_request(stream, k, weights, in, temp, x);
  return download(stream, x);
}

namespace {

// The raw driver's calls of a request made on pageable memory, resolved once.
struct RawRequestCalls {
  decltype(raw_entry<EntryId::MemAllocAsync>()) alloc = raw_entry<EntryId::MemAllocAsync>();
  decltype(raw_entry<EntryId::MemFreeAsync>()) release = raw_entry<EntryId::MemFreeAsync>();
  decltype(raw_entry<EntryId::MemcpyHtoDAsync>()) h2d = raw_entry<EntryId::MemcpyHtoDAsync>();
  decltype(raw_entry<EntryId::MemcpyDtoHAsync>()) d2h = raw_entry<EntryId::MemcpyDtoHAsync>();
  decltype(raw_entry<EntryId::StreamSynchronize>()) synchronize = raw_entry<EntryId::StreamSynchronize>();
};
const RawRequestCalls& raw_calls() {
  static const RawRequestCalls calls;
  return calls;
}

// The three device buffers of one raw request, from the stream's memory pool.
struct RawRequestBuffers {
  explicit RawRequestBuffers(CUstream s) : stream(s) {
    for (CUdeviceptr* p : {&in, &temp, &x}) check_raw(raw_calls().alloc(p, bytes, stream), "cuMemAllocAsync");
  }
  // Called after the request's wait: the frees are checked, so they are not in a destructor.
  void free() const {
    for (CUdeviceptr p : {in, temp, x}) check_raw(raw_calls().release(p, stream), "cuMemFreeAsync");
  }
  CUstream stream;
  CUdeviceptr in = 0, temp = 0, x = 0;
};

}  // namespace

std::vector<float> raw_pageable_request(CUstream stream, const Kernels& k, CUdeviceptr weights,
                                        const std::vector<float>& input) {
  const RawRequestCalls& raw = raw_calls();
  RawRequestBuffers b(stream);
  check_raw(raw.h2d(b.in, input.data(), bytes, stream), "cuMemcpyHtoDAsync");
  launch_request_raw(stream, k, weights, b.in, b.temp, b.x);
  std::vector<float> out(input.size());
  check_raw(raw.d2h(out.data(), b.x, bytes, stream), "cuMemcpyDtoHAsync");
  check_raw(raw.synchronize(stream), "cuStreamSynchronize");
  b.free();
  return out;
}

std::vector<float> raw_staged_request(CUstream stream, const Kernels& k, CUdeviceptr weights,
                                      const std::vector<float>& input, float* staging_in, float* staging_out) {
  const RawRequestCalls& raw = raw_calls();
  RawRequestBuffers b(stream);
  std::memcpy(staging_in, input.data(), bytes);  // the previous request's copy finished: it waited
  check_raw(raw.h2d(b.in, staging_in, bytes, stream), "cuMemcpyHtoDAsync");
  launch_request_raw(stream, k, weights, b.in, b.temp, b.x);
  check_raw(raw.d2h(staging_out, b.x, bytes, stream), "cuMemcpyDtoHAsync");
  std::vector<float> out(input.size());  // made and zeroed while the device works
  check_raw(raw.synchronize(stream), "cuStreamSynchronize");
  std::memcpy(out.data(), staging_out, bytes);
  b.free();
  return out;
}

RawDeviceMemory::RawDeviceMemory(std::size_t size) {
  check_raw(raw_entry<EntryId::MemAlloc>()(&pointer_, size), "cuMemAlloc");
}

RawDeviceMemory::~RawDeviceMemory() {
  if (pointer_ == 0) return;
  if (CUresult status = raw_entry<EntryId::MemFree>()(pointer_); status != CUDA_SUCCESS)
    park_driver_error(status, "cuMemFree", Resource::none(), "raw benchmark");
}

void make_raw_context_current(CUcontext context) {
  static const auto set = raw_entry<EntryId::CtxSetCurrent>();
  thread_local CUcontext current = nullptr;
  if (current == context) return;
  check_raw(set(context), "cuCtxSetCurrent");
  current = context;
}

RawDeviceMemory upload_raw_weights(const std::vector<float>& weights) {
  RawDeviceMemory memory(weights.size() * sizeof(float));
  RawStream s;
  check_raw(raw_entry<EntryId::MemcpyHtoDAsync>()(memory.pointer(), weights.data(), weights.size() * sizeof(float),
                                                   s.handle()),
            "cuMemcpyHtoDAsync");
  check_raw(raw_entry<EntryId::StreamSynchronize>()(s.handle()), "cuStreamSynchronize");
  return memory;
}

void Outputs::check(const float* output) {
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

long Outputs::wrong() const {
  std::lock_guard lock(mutex_);
  return wrong_;
}

long Outputs::distinct() const {
  std::lock_guard lock(mutex_);
  return static_cast<long>(wrong_hashes_.size()) + (correct_.load() > 0 ? 1 : 0);
}

std::string Outputs::summary() const {
  return std::to_string(distinct()) + " distinct outputs, " + std::to_string(wrong()) + " of " +
         std::to_string(wrong() + correct()) + " wrong";
}

std::string Outputs::failure() const { return wrong() != 0 || correct() == 0 ? summary() : std::string(); }

WorkerThreads::WorkerThreads(int count) : errors_(count) {
  threads_.reserve(count);
  for (int t = 0; t < count; ++t) threads_.emplace_back([this, t] { serve(t); });
}

WorkerThreads::~WorkerThreads() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  start_.notify_all();
  for (auto& t : threads_) t.join();
}

void WorkerThreads::run(const std::function<void(int)>& body) {
  std::unique_lock lock(mutex_);
  body_ = &body;
  running_ = count();
  for (auto& e : errors_) e = nullptr;
  ++generation_;
  start_.notify_all();
  done_.wait(lock, [&] { return running_ == 0; });
  body_ = nullptr;
  for (auto& e : errors_)
    if (e) std::rethrow_exception(e);
}

void WorkerThreads::serve(int t) {
  std::uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* body = nullptr;
    {
      std::unique_lock lock(mutex_);
      start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      body = body_;
    }
    std::exception_ptr error;
    try {
      (*body)(t);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard lock(mutex_);
    errors_[t] = error;
    if (--running_ == 0) done_.notify_all();
  }
}

}  // namespace cudakit::tool::bench::requests
#endif  // CUDAKIT_HAVE_TEST_KERNELS
