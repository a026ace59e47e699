// Declared work benchmark: the CPU cost that enqueue() adds around outside code on one
// stream. The outside code is one raw cuLaunchKernel of an empty kernel (what a library
// call submits at the least); the cudakit side wraps it in enqueue(stream, reads(a, b),
// writes(c), ...), the raw side makes the same call bare. On one stream the declarations
// record and wait for nothing, so what is measured is the checks (stream, poison,
// capture, current context) and three single-stream tracker checks. Target: at most 2%
// over the bare call.
#include <vector>

#include "bench/harness.hpp"
#include "cudakit/cudakit.hpp"

#ifdef CUDAKIT_HAVE_TEST_KERNELS
#include "test_kernels.hpp"
#endif

#ifdef CUDAKIT_HAVE_TEST_KERNELS
namespace cudakit::tool::bench {
namespace {

using driver::EntryId;

constexpr double declared_work_target = 1.02;
constexpr int calls_per_batch = 2000;

std::vector<Result> declared_work_around_a_launch(const Context& c) {
  RawPrimaryContext raw_context(c.device);
  Module module = Module::load(c.device, cudakit_kernels::test_fatbin());
  const CUfunction empty = module.function("empty_kernel").handle();
  auto launch_kernel = raw_entry<EntryId::LaunchKernel>();
  Stream stream(c.device);
  RawStream raw_stream;
  DeviceBuffer<float> a(stream, 256, zeroed), b(stream, 256, zeroed), out(stream, 256, zeroed);
  stream.synchronize();
  const StreamRef s = stream;

  auto raw_call = [launch_kernel, empty](CUstream h) {
    check_raw(launch_kernel(empty, 1, 1, 1, 1, 1, 1, 0, h, nullptr, nullptr), "cuLaunchKernel");
  };
  Interleave plan = c.interleave(calls_per_batch);
  auto synchronize = raw_entry<EntryId::StreamSynchronize>();
  CUstream x = stream.handle(), y = raw_stream.handle();
  plan.between_batches = [synchronize, x, y] {
    check_raw(synchronize(x), "cuStreamSynchronize");
    check_raw(synchronize(y), "cuStreamSynchronize");
  };
  const CUstream bare = raw_stream.handle();
  auto samples = time_host(
      plan,
      [&](int ops) {
        for (int i = 0; i < ops; ++i) enqueue(s, reads(a, b), writes(out), raw_call);
      },
      [&](int ops) {
        for (int i = 0; i < ops; ++i) raw_call(bare);
      });
  return {cost_result("declared work around a raw launch, 3 buffers, one stream", "declared work", samples,
                      declared_work_target)};
}

CUDAKIT_BENCHMARK("declared work around a raw launch, 3 buffers, one stream", "declared work", QuickRun::skip,
                  declared_work_around_a_launch);

}  // namespace
}  // namespace cudakit::tool::bench
#endif  // CUDAKIT_HAVE_TEST_KERNELS
