// Launch benchmarks: the CPU cost of submitting a kernel launch, cudakit's
// typed launch() against cuLaunchKernel with an argument array the application built
// up front, on kernels with 0, 2 and 8 parameters; the "tracked" variants pass
// DeviceBuffers (tracked, always on one stream) where the raw side passes the same
// device pointers. Target: at most 3% more than the raw call (DESIGN 1, 8). Also the
// cost of declared work around a raw launch (group "declared-work").
//
// Both sides launch the same CUfunction (the cudakit module's, through
// Function::handle()); each side has its own stream, drained between batches.
//
// "launch with an attribute" takes cudakit's other path: a LaunchConfig with a launch
// attribute (a priority) goes through cuLaunchKernelEx, timed against a raw
// cuLaunchKernelEx with the same attribute and a CUlaunchConfig built up front. "launch,
// 0 args, beside cuLaunchKernelEx" sets cudakit's plain launch (cuLaunchKernel) beside a
// raw cuLaunchKernelEx without attributes: reported, not judged, it says whether the
// plain path is the cheaper of the two driver calls.
//
// "launch heap allocations" counts operator new calls per cudakit launch with the tool's
// counting operator new (bench_allocation_counter.cpp); DESIGN 8 says none.
#include <span>
#include <string>
#include <vector>

#include "bench/harness.hpp"
#include "cudakit/cudakit.hpp"

#ifdef CUDAKIT_HAVE_TEST_KERNELS
#include "test_kernels.hpp"
#endif

namespace cudakit::tool::bench {
/// bench_allocation_counter.cpp: heap allocations made on the calling thread so far.
long heap_allocations_on_this_thread() noexcept;
}  // namespace cudakit::tool::bench

#ifdef CUDAKIT_HAVE_TEST_KERNELS
namespace cudakit::tool::bench {
namespace {

using driver::EntryId;

constexpr double launch_target = 1.03;
constexpr double declared_work_target = 1.02;
constexpr int launches_per_batch = 2000;

// One block of one thread: the GPU work is nothing, the cost is the submission.
const LaunchConfig one_thread{1, 1};

// Everything a launch benchmark needs: the module, a stream per side, a small device
// buffer whose pointer the kernels get (they never touch it).
struct LaunchSetup {
  explicit LaunchSetup(const Context& c)
      : raw_context(c.device),
        module(Module::load(c.device, cudakit_kernels::test_fatbin())),
        stream(c.device),
        buffer(stream, 256, zeroed) {
    stream.synchronize();
  }
  Interleave plan(const Context& c) const {
    Interleave p = c.interleave(launches_per_batch);
    auto synchronize = raw_entry<EntryId::StreamSynchronize>();
    CUstream a = stream.handle(), b = raw_stream.handle();
    p.between_batches = [synchronize, a, b] {
      check_raw(synchronize(a), "cuStreamSynchronize");
      check_raw(synchronize(b), "cuStreamSynchronize");
    };
    return p;
  }
  // Raw cuLaunchKernel of `function` with one thread on the raw stream.
  void raw_launch(CUfunction function, void** params) const {
    check_raw(launch_kernel(function, 1, 1, 1, 1, 1, 1, 0, raw_stream.handle(), params, nullptr), "cuLaunchKernel");
  }
  // The comparison every launch benchmark makes: `cudakit_launch()` (one cudakit launch,
  // inlined: a template, not a std::function) against raw_launch(function, params), the
  // same number of times per batch, interleaved.
  template <class CudakitLaunch>
  PairedSamples time(const Context& c, CudakitLaunch cudakit_launch, CUfunction function, void** params) const {
    return time_host(
        plan(c),
        [&](int ops) {
          for (int i = 0; i < ops; ++i) cudakit_launch();
        },
        [&](int ops) {
          for (int i = 0; i < ops; ++i) raw_launch(function, params);
        });
  }

  RawPrimaryContext raw_context;
  Module module;
  Stream stream;
  RawStream raw_stream;
  DeviceBuffer<float> buffer;
  decltype(raw_entry<EntryId::LaunchKernel>()) launch_kernel = raw_entry<EntryId::LaunchKernel>();
};

std::vector<Result> launch_0_args(const Context& c) {
  LaunchSetup s(c);
  auto kernel = s.module.kernel<void()>("empty_kernel");
  const StreamRef stream = s.stream;
  auto samples = s.time(c, [&] { launch(stream, kernel, one_thread); }, kernel.handle(), nullptr);
  return {cost_result("launch, 0 args", "launch", samples, launch_target)};
}

// increment(float* data, int n) with n = 0: two parameters, no work.
std::vector<Result> launch_2_args(const Context& c) {
  LaunchSetup s(c);
  auto kernel = s.module.kernel<void(float*, int)>("increment");
  const CUfunction f = kernel.handle();
  const StreamRef stream = s.stream;
  float* pointer = s.buffer.data();
  CUdeviceptr raw_pointer = s.buffer.device_pointer();
  int n = 0;
  void* params[] = {&raw_pointer, &n};
  auto samples = s.time(c, [&] { launch(stream, kernel, one_thread, pointer, 0); }, f, params);
  return {cost_result("launch, 2 args", "launch", samples, launch_target)};
}

std::vector<Result> launch_2_args_tracked(const Context& c) {
  LaunchSetup s(c);
  auto kernel = s.module.kernel<void(float*, int)>("increment");
  const CUfunction f = kernel.handle();
  const StreamRef stream = s.stream;
  DeviceBuffer<float>& buffer = s.buffer;
  CUdeviceptr raw_pointer = s.buffer.device_pointer();
  int n = 0;
  void* params[] = {&raw_pointer, &n};
  auto samples = s.time(c, [&] { launch(stream, kernel, one_thread, buffer, 0); }, f, params);
  return {cost_result("launch, 2 args, tracked buffer", "launch", samples, launch_target)};
}

using Kernel8 = void(const float*, float*, int, int, float, float, long long, long long);

std::vector<Result> launch_8_args(const Context& c) {
  LaunchSetup s(c);
  auto kernel = s.module.kernel<Kernel8>("empty_kernel_8");
  const CUfunction f = kernel.handle();
  const StreamRef stream = s.stream;
  float* pointer = s.buffer.data();
  const float* const_pointer = pointer;
  CUdeviceptr in = s.buffer.device_pointer(), out = s.buffer.device_pointer();
  int a = 1, b = 2;
  float x = 1.0f, y = 2.0f;
  long long u = 3, v = 4;
  void* params[] = {&in, &out, &a, &b, &x, &y, &u, &v};
  auto samples = s.time(
      c, [&] { launch(stream, kernel, one_thread, const_pointer, pointer, 1, 2, 1.0f, 2.0f, 3LL, 4LL); }, f, params);
  return {cost_result("launch, 8 args", "launch", samples, launch_target)};
}

std::vector<Result> launch_8_args_tracked(const Context& c) {
  LaunchSetup s(c);
  auto kernel = s.module.kernel<Kernel8>("empty_kernel_8");
  const CUfunction f = kernel.handle();
  const StreamRef stream = s.stream;
  // A second buffer on the same stream: one read, one written.
  DeviceBuffer<float> input(s.stream, 256, zeroed);
  s.stream.synchronize();
  const DeviceBuffer<float>& in_buffer = input;
  DeviceBuffer<float>& out_buffer = s.buffer;
  CUdeviceptr in = input.device_pointer(), out = s.buffer.device_pointer();
  int a = 1, b = 2;
  float x = 1.0f, y = 2.0f;
  long long u = 3, v = 4;
  void* params[] = {&in, &out, &a, &b, &x, &y, &u, &v};
  auto samples = s.time(
      c, [&] { launch(stream, kernel, one_thread, in_buffer, out_buffer, 1, 2, 1.0f, 2.0f, 3LL, 4LL); }, f, params);
  return {cost_result("launch, 8 args, tracked buffers", "launch", samples, launch_target)};
}

// An empty kernel through cuLaunchKernelEx on the raw side, with `attributes` (none or
// one) in a CUlaunchConfig built up front; cudakit launches it with `config`.
PairedSamples time_against_launch_kernel_ex(const Context& c, const LaunchSetup& s, const Kernel<void()>& kernel,
                                            const LaunchConfig& config, std::span<CUlaunchAttribute> attributes) {
  const CUfunction f = kernel.handle();
  const StreamRef stream = s.stream;
  CUlaunchConfig raw_config = {};
  raw_config.gridDimX = raw_config.gridDimY = raw_config.gridDimZ = 1;
  raw_config.blockDimX = raw_config.blockDimY = raw_config.blockDimZ = 1;
  raw_config.hStream = s.raw_stream.handle();
  raw_config.attrs = attributes.data();
  raw_config.numAttrs = static_cast<unsigned>(attributes.size());
  auto launch_kernel_ex = raw_entry<EntryId::LaunchKernelEx>();
  return time_host(
      s.plan(c),
      [&](int ops) {
        for (int i = 0; i < ops; ++i) launch(stream, kernel, config);
      },
      [&](int ops) {
        for (int i = 0; i < ops; ++i) check_raw(launch_kernel_ex(&raw_config, f, nullptr, nullptr), "cuLaunchKernelEx");
      });
}

// One launch attribute (the stream's default priority, 0): cuLaunchKernelEx on both sides.
std::vector<Result> launch_with_an_attribute(const Context& c) {
  LaunchSetup s(c);
  LaunchConfig with_priority = one_thread;
  with_priority.priority = 0;
  CUlaunchAttribute priority = {};
  priority.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
  priority.value.priority = 0;
  auto samples =
      time_against_launch_kernel_ex(c, s, s.module.kernel<void()>("empty_kernel"), with_priority, {&priority, 1});
  return {cost_result("launch with an attribute, 0 args", "launch", samples, launch_target)};
}

// No attribute: cudakit's cuLaunchKernel beside a raw cuLaunchKernelEx (reported only).
std::vector<Result> launch_beside_launch_kernel_ex(const Context& c) {
  LaunchSetup s(c);
  auto samples = time_against_launch_kernel_ex(c, s, s.module.kernel<void()>("empty_kernel"), one_thread, {});
  return {cost_result("launch, 0 args, beside cuLaunchKernelEx", "launch", samples, 0)};
}

// Heap allocations (operator new on this thread) per launch: cudakit's typed launches,
// plain and tracked, and the raw launches beside them. Reported (the target is 0); a
// cudakit launch that allocates more than the raw launch makes the result fail.
std::vector<Result> launch_heap_allocations(const Context& c) {
  LaunchSetup s(c);
  auto kernel = s.module.kernel<Kernel8>("empty_kernel_8");
  const CUfunction f = kernel.handle();
  const StreamRef stream = s.stream;
  DeviceBuffer<float> input(s.stream, 256, zeroed);
  s.stream.synchronize();
  CUdeviceptr in = input.device_pointer(), out = s.buffer.device_pointer();
  int a = 1, b = 2;
  float x = 1.0f, y = 2.0f;
  long long u = 3, v = 4;
  void* params[] = {&in, &out, &a, &b, &x, &y, &u, &v};
  const DeviceBuffer<float>& in_buffer = input;
  float* pointer = s.buffer.data();
  const int n = c.quick ? 500 : launches_per_batch;
  // Warm up both paths first (first-use costs are not the steady state).
  for (int i = 0; i < 10; ++i) {
    launch(stream, kernel, one_thread, in_buffer, s.buffer, 1, 2, 1.0f, 2.0f, 3LL, 4LL);
    s.raw_launch(f, params);
  }
  s.stream.synchronize();
  const long before_cudakit = heap_allocations_on_this_thread();
  for (int i = 0; i < n; ++i) {
    launch(stream, kernel, one_thread, in_buffer, s.buffer, 1, 2, 1.0f, 2.0f, 3LL, 4LL);
    launch(stream, kernel, one_thread, static_cast<const float*>(pointer), pointer, 1, 2, 1.0f, 2.0f, 3LL, 4LL);
  }
  const long cudakit_allocations = heap_allocations_on_this_thread() - before_cudakit;
  const long before_raw = heap_allocations_on_this_thread();
  for (int i = 0; i < 2 * n; ++i) s.raw_launch(f, params);
  const long raw_allocations = heap_allocations_on_this_thread() - before_raw;
  s.stream.synchronize();
  check_raw(raw_entry<EntryId::StreamSynchronize>()(s.raw_stream.handle()), "cuStreamSynchronize");

  Result r;
  r.name = "heap allocations per launch (target 0)";
  r.group = "launch";
  r.unit = "allocations";
  r.better = Better::lower;
  r.target_ratio = 0;
  r.cudakit = {static_cast<double>(cudakit_allocations) / (2.0 * n)};
  r.raw = {static_cast<double>(raw_allocations) / (2.0 * n)};
  // The raw side shows what the driver itself allocates through operator new (if
  // anything); only what cudakit adds beyond that counts against it.
  if (cudakit_allocations > raw_allocations)
    r.error = std::to_string(cudakit_allocations) + " heap allocations in " + std::to_string(2 * n) +
              " cudakit launches, " + std::to_string(raw_allocations) + " in as many raw launches (target 0)";
  return {r};
}

// Declared work: the CPU cost enqueue() adds around outside code on one stream. The outside
// code is one raw cuLaunchKernel of an empty kernel (what a library call submits at the
// least); the cudakit side wraps it in enqueue(stream, reads(a, b), writes(c), ...), the
// raw side makes the same launch bare. On one stream the declarations record and wait for
// nothing: what is measured is the checks (stream, poison, capture, current context) and
// three single-stream tracker compares. Target: at most 2% over the bare launch.
std::vector<Result> declared_work_around_a_launch(const Context& c) {
  LaunchSetup s(c);
  const CUfunction empty = s.module.function("empty_kernel").handle();
  const StreamRef stream = s.stream;
  DeviceBuffer<float> a(s.stream, 256, zeroed), b(s.stream, 256, zeroed);
  s.stream.synchronize();
  auto launch_kernel = s.launch_kernel;
  auto raw_call = [launch_kernel, empty](CUstream h) {
    check_raw(launch_kernel(empty, 1, 1, 1, 1, 1, 1, 0, h, nullptr, nullptr), "cuLaunchKernel");
  };
  auto samples = s.time(c, [&] { enqueue(stream, reads(a, b), writes(s.buffer), raw_call); }, empty, nullptr);
  return {cost_result("declared work around a raw launch, 3 buffers, one stream", "declared-work", samples,
                      declared_work_target)};
}

CUDAKIT_BENCHMARK("launch, 0 args", "launch", QuickRun::skip, launch_0_args);
CUDAKIT_BENCHMARK("launch, 2 args", "launch", QuickRun::include, launch_2_args);
CUDAKIT_BENCHMARK("launch, 2 args, tracked buffer", "launch", QuickRun::skip, launch_2_args_tracked);
CUDAKIT_BENCHMARK("launch, 8 args", "launch", QuickRun::skip, launch_8_args);
CUDAKIT_BENCHMARK("launch, 8 args, tracked buffers", "launch", QuickRun::skip, launch_8_args_tracked);
CUDAKIT_BENCHMARK("launch with an attribute, 0 args", "launch", QuickRun::skip, launch_with_an_attribute);
CUDAKIT_BENCHMARK("launch, 0 args, beside cuLaunchKernelEx", "launch", QuickRun::skip,
                  launch_beside_launch_kernel_ex);
CUDAKIT_BENCHMARK("launch heap allocations", "launch", QuickRun::skip, launch_heap_allocations);
CUDAKIT_BENCHMARK("declared work around a raw launch, 3 buffers, one stream", "declared-work", QuickRun::skip,
                  declared_work_around_a_launch);

}  // namespace
}  // namespace cudakit::tool::bench
#endif  // CUDAKIT_HAVE_TEST_KERNELS
