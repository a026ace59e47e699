// Memory benchmarks: copy bandwidth and stream-ordered allocation, cudakit
// against the raw driver.
//
// Bandwidth ("bandwidth" group, a size sweep drawn as GB/s against size): pinned host to
// device, device to host (PinnedBuffer against cuMemHostAlloc memory) and device to
// device (read + write bytes counted), timed with events on one stream (time_device).
// Target: at least 98% of the raw bandwidth at 64 MiB and up; smaller sizes are reported.
// The quick run (`cudakit bench --quick`, the doctor) measures the 64 MiB point only.
//
// "memory" group: a pageable upload through cudakit's staging buffers against the raw
// pageable cuMemcpyHtoDAsync from the same std::vector (reported), and a 1 MiB pool
// allocation + free (DeviceBuffer against cuMemAllocAsync + cuMemFreeAsync; target at
// most 10% more), with raw cuMemAlloc + cuMemFree reported beside it.
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "bench/harness.hpp"
#include "cudakit/cudakit.hpp"

namespace cudakit::tool::bench {
namespace {

using driver::EntryId;

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;
constexpr std::size_t largest = 256 * MiB;
constexpr std::size_t judged_from = 64 * MiB;
constexpr double bandwidth_target = 0.98;

std::string size_label(std::size_t bytes) {
  return bytes >= MiB ? std::to_string(bytes / MiB) + " MiB" : std::to_string(bytes / KiB) + " KiB";
}

// 4 KiB, 16 KiB, ..., 256 MiB; the quick run only the smallest judged size, which moves
// its bytes in a few milliseconds per copy.
std::vector<std::size_t> sweep_sizes(bool quick) {
  if (quick) return {judged_from};
  std::vector<std::size_t> sizes;
  for (std::size_t n = 4 * KiB; n <= largest; n *= 4) sizes.push_back(n);
  return sizes;
}

// About 256 MiB per batch (at least 2 copies, at most 1000).
int copies_per_batch(std::size_t bytes) {
  std::size_t n = largest / bytes;
  if (n < 2) n = 2;
  if (n > 1000) n = 1000;
  return static_cast<int>(n);
}

enum class Direction { h2d, d2h, d2d };

// Raw page-locked host memory and device memory, freed at the end of the scope.
struct RawHostMemory {
  explicit RawHostMemory(std::size_t bytes) {
    check_raw(raw_entry<EntryId::MemHostAlloc>()(&pointer, bytes, CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc");
  }
  ~RawHostMemory() {
    if (pointer != nullptr) {
      CUresult status = raw_entry<EntryId::MemFreeHost>()(pointer);
      if (status != CUDA_SUCCESS) park_driver_error(status, "cuMemFreeHost", Resource::none(), "raw benchmark");
    }
  }
  RawHostMemory(const RawHostMemory&) = delete;
  RawHostMemory& operator=(const RawHostMemory&) = delete;
  void* pointer = nullptr;
};

struct RawDeviceMemory {
  explicit RawDeviceMemory(std::size_t bytes) {
    check_raw(raw_entry<EntryId::MemAlloc>()(&pointer, bytes), "cuMemAlloc");
  }
  ~RawDeviceMemory() {
    if (pointer != 0) {
      CUresult status = raw_entry<EntryId::MemFree>()(pointer);
      if (status != CUDA_SUCCESS) park_driver_error(status, "cuMemFree", Resource::none(), "raw benchmark");
    }
  }
  RawDeviceMemory(const RawDeviceMemory&) = delete;
  RawDeviceMemory& operator=(const RawDeviceMemory&) = delete;
  CUdeviceptr pointer = 0;
};

std::vector<Result> copy_sweep(const Context& c, Direction direction) {
  RawPrimaryContext raw_context(c.device);
  Stream stream(c.device);
  const StreamRef stream_ref = stream;
  const CUstream raw_stream = stream.handle();  // time_device brackets both sides on one stream
  const std::vector<std::size_t> sizes = sweep_sizes(c.quick);
  const std::size_t capacity = sizes.back();

  std::optional<PinnedBuffer<char>> host;
  if (direction != Direction::d2d) host.emplace(capacity, zeroed);
  DeviceBuffer<char> device_a(stream, capacity, zeroed);
  std::optional<DeviceBuffer<char>> device_b;
  if (direction == Direction::d2d) device_b.emplace(stream, capacity, zeroed);
  std::optional<RawHostMemory> raw_host;
  if (direction != Direction::d2d) raw_host.emplace(capacity);
  RawDeviceMemory raw_a(capacity);
  std::optional<RawDeviceMemory> raw_b;
  if (direction == Direction::d2d) raw_b.emplace(capacity);
  stream.synchronize();

  const auto h2d = raw_entry<EntryId::MemcpyHtoDAsync>();
  const auto d2h = raw_entry<EntryId::MemcpyDtoHAsync>();
  const auto d2d = raw_entry<EntryId::MemcpyDtoDAsync>();
  const char* series = direction == Direction::h2d ? "pinned H2D" : direction == Direction::d2h ? "pinned D2H" : "D2D";

  std::vector<Result> results;
  for (std::size_t bytes : sizes) {
    Interleave plan = c.interleave(copies_per_batch(bytes));
    // The quick run keeps fewer rounds but not fewer copies per batch: the stream is
    // idle when a batch starts, so its first copy is submitted after the start event
    // has already run on the GPU, and that gap (host cost, unequal between the sides)
    // must stay a small part of the batch (4 copies of 64 MiB: about 5 ms H2D on an H200).
    plan.ops_per_batch = copies_per_batch(bytes);
    Batch cudakit_batch, raw_batch;
    if (direction == Direction::h2d) {
      std::span<const char> source = std::span<const char>(host->span()).first(bytes);
      DeviceSpan<char> destination = device_a.first(bytes);
      cudakit_batch = [=](int ops) {
        for (int i = 0; i < ops; ++i) copy(stream_ref, source, destination);
      };
      void* raw_source = raw_host->pointer;
      CUdeviceptr raw_destination = raw_a.pointer;
      raw_batch = [=](int ops) {
        for (int i = 0; i < ops; ++i)
          check_raw(h2d(raw_destination, raw_source, bytes, raw_stream), "cuMemcpyHtoDAsync");
      };
    } else if (direction == Direction::d2h) {
      DeviceSpan<const char> source = std::as_const(device_a).first(bytes);
      std::span<char> destination = host->span().first(bytes);
      cudakit_batch = [=](int ops) {
        for (int i = 0; i < ops; ++i) copy(stream_ref, source, destination);
      };
      void* raw_destination = raw_host->pointer;
      CUdeviceptr raw_source = raw_a.pointer;
      raw_batch = [=](int ops) {
        for (int i = 0; i < ops; ++i)
          check_raw(d2h(raw_destination, raw_source, bytes, raw_stream), "cuMemcpyDtoHAsync");
      };
    } else {
      DeviceSpan<const char> source = std::as_const(device_a).first(bytes);
      DeviceSpan<char> destination = device_b->first(bytes);
      cudakit_batch = [=](int ops) {
        for (int i = 0; i < ops; ++i) copy(stream_ref, source, destination);
      };
      CUdeviceptr raw_source = raw_a.pointer, raw_destination = raw_b->pointer;
      raw_batch = [=](int ops) {
        for (int i = 0; i < ops; ++i)
          check_raw(d2d(raw_destination, raw_source, bytes, raw_stream), "cuMemcpyDtoDAsync");
      };
    }
    auto samples = time_device(plan, stream_ref, cudakit_batch, raw_batch);
    const double moved = direction == Direction::d2d ? 2.0 * static_cast<double>(bytes) : static_cast<double>(bytes);
    results.push_back(bandwidth_result(std::string(series) + " " + size_label(bytes), "bandwidth", samples, moved,
                                       bytes >= judged_from ? bandwidth_target : 0.0, series,
                                       static_cast<double>(bytes)));
  }
  stream.synchronize();
  return results;
}

std::vector<Result> pinned_h2d(const Context& c) { return copy_sweep(c, Direction::h2d); }
std::vector<Result> pinned_d2h(const Context& c) { return copy_sweep(c, Direction::d2h); }
std::vector<Result> device_to_device(const Context& c) { return copy_sweep(c, Direction::d2d); }

// 64 MiB from a pageable std::vector: cudakit's copy (through its page-locked staging
// buffers) against the raw pageable cuMemcpyHtoDAsync from the same vector. Reported.
std::vector<Result> pageable_upload(const Context& c) {
  constexpr std::size_t bytes = 64 * MiB;
  RawPrimaryContext raw_context(c.device);
  Stream stream(c.device);
  const StreamRef stream_ref = stream;
  std::vector<char> source(bytes);
  for (std::size_t i = 0; i < bytes; ++i) source[i] = static_cast<char>(i * 7);
  DeviceBuffer<char> destination(stream, bytes, zeroed);
  RawDeviceMemory raw_destination(bytes);
  stream.synchronize();
  const auto h2d = raw_entry<EntryId::MemcpyHtoDAsync>();
  const CUstream raw_stream = stream.handle();
  auto samples = time_device(
      c.interleave(4), stream_ref,
      [&](int ops) {
        for (int i = 0; i < ops; ++i) copy(stream_ref, source, destination);
      },
      [&](int ops) {
        for (int i = 0; i < ops; ++i)
          check_raw(h2d(raw_destination.pointer, source.data(), bytes, raw_stream), "cuMemcpyHtoDAsync");
      });
  stream.synchronize();
  return {bandwidth_result("pageable H2D 64 MiB (staged vs raw pageable)", "memory", samples, bytes, 0.0)};
}

// DeviceBuffer<char>(stream, 1 MiB, uninitialized) made and destroyed, against
// cuMemAllocAsync + cuMemFreeAsync on a raw stream; then the same cudakit side against
// cuMemAlloc + cuMemFree (reported).
std::vector<Result> pool_allocate_free(const Context& c) {
  constexpr std::size_t bytes = 1 * MiB;
  RawPrimaryContext raw_context(c.device);
  Stream stream(c.device);
  RawStream raw_stream;
  const StreamRef stream_ref = stream;
  const auto alloc_async = raw_entry<EntryId::MemAllocAsync>();
  const auto free_async = raw_entry<EntryId::MemFreeAsync>();
  const auto alloc = raw_entry<EntryId::MemAlloc>();
  const auto mem_free = raw_entry<EntryId::MemFree>();
  const auto synchronize = raw_entry<EntryId::StreamSynchronize>();
  Interleave plan = c.interleave(1000);
  const CUstream a = stream.handle(), b = raw_stream.handle();
  plan.between_batches = [synchronize, a, b] {
    check_raw(synchronize(a), "cuStreamSynchronize");
    check_raw(synchronize(b), "cuStreamSynchronize");
  };
  auto cudakit_batch = [&](int ops) {
    for (int i = 0; i < ops; ++i) DeviceBuffer<char> buffer(stream_ref, bytes, uninitialized);
  };
  auto pooled = time_host(plan, cudakit_batch, [&](int ops) {
    for (int i = 0; i < ops; ++i) {
      CUdeviceptr p = 0;
      check_raw(alloc_async(&p, bytes, b), "cuMemAllocAsync");
      check_raw(free_async(p, b), "cuMemFreeAsync");
    }
  });
  Interleave plain_plan = c.interleave(200);
  plain_plan.between_batches = plan.between_batches;
  auto plain = time_host(plain_plan, cudakit_batch, [&](int ops) {
    for (int i = 0; i < ops; ++i) {
      CUdeviceptr p = 0;
      check_raw(alloc(&p, bytes), "cuMemAlloc");
      check_raw(mem_free(p), "cuMemFree");
    }
  });
  return {cost_result("pool allocate+free 1 MiB", "memory", pooled, 1.1),
          cost_result("pool allocate+free 1 MiB vs cuMemAlloc+cuMemFree", "memory", plain, 0.0)};
}

// In the quick run at 64 MiB only: 8 rounds (1 warm-up) of 2 batches of 4 copies, about
// 80 ms for H2D and for D2H on an H200 (55 GB/s in bench/results), a few ms for D2D,
// plus the allocations.
CUDAKIT_BENCHMARK("pinned H2D bandwidth", "bandwidth", QuickRun::include, pinned_h2d);
CUDAKIT_BENCHMARK("pinned D2H bandwidth", "bandwidth", QuickRun::include, pinned_d2h);
CUDAKIT_BENCHMARK("D2D bandwidth", "bandwidth", QuickRun::include, device_to_device);
CUDAKIT_BENCHMARK("pageable H2D 64 MiB", "memory", QuickRun::skip, pageable_upload);
CUDAKIT_BENCHMARK("pool allocate+free 1 MiB", "memory", QuickRun::include, pool_allocate_free);

}  // namespace
}  // namespace cudakit::tool::bench
