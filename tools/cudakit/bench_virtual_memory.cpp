// Benchmarks of growable (virtual-memory) buffers and batched copies, beside the raw
// driver in the same run.
//
// "virtual-memory" group:
//   - growing to 1 GiB in 64 MiB steps (16 steps): a GrowableBuffer against allocating a
//     bigger buffer, copying the old one into it and freeing the old one at each step.
//     Host time from nothing to a 1 GiB buffer that holds the data, waited for; each
//     arm's 1 GiB is given back between batches, untimed, and the give-back of a grown
//     buffer against cuMemFree of 1 GiB is reported apart.
//     Target: at least 10x faster (ratio at most 0.1) than the classic reallocation, raw
//     cuMemAlloc, cuMemcpyDtoDAsync and cuMemFree, whose every step gets fresh memory from
//     the driver as the growth does. Beside it, reported: the same reallocation from a
//     warm stream-ordered pool (raw cuMemAllocAsync/cuMemFreeAsync, and DeviceBuffer), where
//     the pool already holds the memory and only the copies remain (7.5 GiB in all), and
//     the growth through raw virtual-memory calls, its floor.
//   - kernel bandwidth over a grown buffer: a streaming kernel (read + write counted)
//     over 256 MiB grown in 64 MiB chunks against the same kernel over DeviceBuffers.
//     Target: at least 0.99x.
// "batched-copies" group: 1,000 copies of 4 KiB, H2D, D2H and D2D (page-locked host
// memory), GPU time from the first submission to the last copy's end: a CopyBatch
// (filled and submitted each time, on its automatic path: the copy kernel for copies this
// small) against a loop of single cudakit copies (target: at least 3x faster, ratio at
// most 0.333) and against a loop of raw cuMemcpy*Async calls (target: no slower, ratio at
// most 1.0); the same through the driver's batch (BatchPath::driver_batch:
// cuMemcpyBatchAsync), reported.
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "bench/harness.hpp"
#include "cudakit/batched_copy.hpp"
#include "cudakit/cudakit.hpp"
#include "cudakit/growable_buffer.hpp"
#include "test_kernels.hpp"

namespace cudakit::tool::bench {
namespace {

using driver::EntryId;

constexpr std::size_t MiB = std::size_t(1) << 20;

// ---- growth ----

struct Growth {
  std::size_t step = 64 * MiB;
  std::size_t final_bytes = 1024 * MiB;
};

Growth growth_for(const Context& c) {
  Growth g;
  if (c.smoke) {  // the fake driver: a few small steps
    g.step = 4 * MiB;
    g.final_bytes = 16 * MiB;
  }
  return g;
}

// The raw virtual-memory growth: reserve, then per step one chunk created, mapped and
// opened to the device. give_back() unmaps and releases everything and frees the range.
struct RawVirtualGrowth {
  CUdeviceptr base = 0;
  std::size_t step = 0, reserved = 0;
  std::vector<CUmemGenericAllocationHandle> chunks;

  void grow(int device, const Growth& g) {
    const auto reserve = raw_entry<EntryId::MemAddressReserve>();
    const auto create = raw_entry<EntryId::MemCreate>();
    const auto map = raw_entry<EntryId::MemMap>();
    const auto set_access = raw_entry<EntryId::MemSetAccess>();
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    step = g.step;
    reserved = g.final_bytes;
    check_raw(reserve(&base, g.final_bytes, 0, 0, 0), "cuMemAddressReserve");
    for (std::size_t mapped = 0; mapped < g.final_bytes; mapped += g.step) {
      CUmemGenericAllocationHandle h = 0;
      check_raw(create(&h, g.step, &prop, 0), "cuMemCreate");
      check_raw(map(base + mapped, g.step, 0, h, 0), "cuMemMap");
      check_raw(set_access(base + mapped, g.step, &access, 1), "cuMemSetAccess");
      chunks.push_back(h);
    }
  }
  void give_back() {
    if (base == 0) return;
    const auto unmap = raw_entry<EntryId::MemUnmap>();
    const auto release = raw_entry<EntryId::MemRelease>();
    const auto address_free = raw_entry<EntryId::MemAddressFree>();
    for (std::size_t i = chunks.size(); i-- > 0;) {
      check_raw(unmap(base + i * step, step), "cuMemUnmap");
      check_raw(release(chunks[i]), "cuMemRelease");
    }
    check_raw(address_free(base, reserved), "cuMemAddressFree");
    chunks.clear();
    base = 0;
  }
};

// Growing to 1 GiB: each arm's operation ends when its 1 GiB buffer holds the data, and
// that buffer is given back between batches, untimed (the same 1 GiB leaves each arm the
// same way whatever grew it; the give-back is timed apart, below).
std::vector<Result> grow_to_1_gib(const Context& c) {
  RawPrimaryContext raw_context(c.device);
  Stream stream(c.device);
  RawStream raw_stream;
  const Growth g = growth_for(c);
  const int device = c.device.ordinal();
  const auto alloc = raw_entry<EntryId::MemAllocAsync>();
  const auto copy_d2d = raw_entry<EntryId::MemcpyDtoDAsync>();
  const auto free_async = raw_entry<EntryId::MemFreeAsync>();
  const auto synchronize = raw_entry<EntryId::StreamSynchronize>();
  const auto alloc_sync = raw_entry<EntryId::MemAlloc>();
  const auto free_sync = raw_entry<EntryId::MemFree>();
  const CUstream rs = raw_stream.handle();

  // What each arm's last operation grew, given back between batches.
  std::optional<GrowableBuffer<char>> growable_grown;
  DeviceBuffer<char> cudakit_grown;
  CUdeviceptr pool_grown = 0, classic_grown = 0;
  RawVirtualGrowth raw_grown;
  auto give_back_all = [&] {
    growable_grown.reset();
    cudakit_grown.reset();
    if (pool_grown != 0) check_raw(free_async(pool_grown, rs), "cuMemFreeAsync");
    if (classic_grown != 0) check_raw(free_sync(classic_grown), "cuMemFree");
    pool_grown = classic_grown = 0;
    raw_grown.give_back();
    stream.synchronize();
    check_raw(synchronize(rs), "cuStreamSynchronize");
  };

  auto growable = [&](int ops) {
    for (int i = 0; i < ops; ++i) {
      growable_grown.reset();  // only where a batch has several operations
      growable_grown.emplace(c.device, g.final_bytes);
      for (std::size_t n = g.step; n <= g.final_bytes; n += g.step) growable_grown->resize(n);
    }
  };
  // Each step: a bigger buffer, the old contents copied in, the old buffer freed.
  auto pool_reallocate = [&](int ops) {
    for (int i = 0; i < ops; ++i) {
      if (pool_grown != 0) check_raw(free_async(pool_grown, rs), "cuMemFreeAsync");
      CUdeviceptr old = 0;
      for (std::size_t n = g.step; n <= g.final_bytes; n += g.step) {
        CUdeviceptr grown = 0;
        check_raw(alloc(&grown, n, rs), "cuMemAllocAsync");
        if (old != 0) {
          check_raw(copy_d2d(grown, old, n - g.step, rs), "cuMemcpyDtoDAsync");
          check_raw(free_async(old, rs), "cuMemFreeAsync");
        }
        old = grown;
      }
      check_raw(synchronize(rs), "cuStreamSynchronize");
      pool_grown = old;
    }
  };
  auto classic_reallocate = [&](int ops) {
    for (int i = 0; i < ops; ++i) {
      if (classic_grown != 0) check_raw(free_sync(classic_grown), "cuMemFree");
      CUdeviceptr old = 0;
      for (std::size_t n = g.step; n <= g.final_bytes; n += g.step) {
        CUdeviceptr grown = 0;
        check_raw(alloc_sync(&grown, n), "cuMemAlloc");
        if (old != 0) {
          check_raw(copy_d2d(grown, old, n - g.step, rs), "cuMemcpyDtoDAsync");
          check_raw(synchronize(rs), "cuStreamSynchronize");
          check_raw(free_sync(old), "cuMemFree");
        }
        old = grown;
      }
      classic_grown = old;
    }
  };
  auto cudakit_reallocate = [&](int ops) {
    for (int i = 0; i < ops; ++i) {
      DeviceBuffer<char> old;
      for (std::size_t n = g.step; n <= g.final_bytes; n += g.step) {
        DeviceBuffer<char> grown(stream, n, uninitialized);
        if (!old.empty()) copy(stream, old, grown.first(old.size()));
        old = std::move(grown);
      }
      stream.synchronize();
      cudakit_grown = std::move(old);
    }
  };
  auto raw_virtual = [&](int ops) {
    for (int i = 0; i < ops; ++i) {
      raw_grown.give_back();
      raw_grown.grow(device, g);
    }
  };
  Interleave plan = c.interleave(1);
  plan.ops_per_batch = 1;
  // The pool keeps what the reallocations freed (not trimmed): the reallocating sides get
  // their memory back from it after the first round, their best case.
  plan.between_batches = give_back_all;
  auto against_classic = time_host(plan, growable, classic_reallocate);
  auto against_raw = time_host(plan, growable, pool_reallocate);
  auto against_cudakit = time_host(plan, growable, cudakit_reallocate);
  auto against_raw_vmm = time_host(plan, growable, raw_virtual);

  // Giving 1 GiB back: a grown GrowableBuffer (unmap and release 16 chunks, free the
  // range) against cuMemFree of one 1 GiB allocation; each operation's buffer is made
  // between batches.
  auto make_both = [&] {
    if (!growable_grown) {
      growable_grown.emplace(c.device, g.final_bytes);
      for (std::size_t n = g.step; n <= g.final_bytes; n += g.step) growable_grown->resize(n);
    }
    if (classic_grown == 0) check_raw(alloc_sync(&classic_grown, g.final_bytes), "cuMemAlloc");
  };
  Interleave give_back_plan = plan;
  give_back_plan.between_batches = make_both;
  make_both();
  auto give_back = time_host(
      give_back_plan, [&](int) { growable_grown.reset(); },
      [&](int) {
        check_raw(free_sync(classic_grown), "cuMemFree");
        classic_grown = 0;
      });
  give_back_all();
  return {cost_result("grow to 1 GiB in 64 MiB steps: GrowableBuffer vs raw cuMemAlloc+copy+cuMemFree",
                      "virtual-memory", against_classic, 0.1),
          cost_result("grow to 1 GiB in 64 MiB steps: GrowableBuffer vs raw allocate+copy+free from a warm pool",
                      "virtual-memory", against_raw, 0.0),
          cost_result("grow to 1 GiB in 64 MiB steps: GrowableBuffer vs DeviceBuffer allocate+copy+free (warm pool)",
                      "virtual-memory", against_cudakit, 0.0),
          cost_result("grow to 1 GiB in 64 MiB steps: GrowableBuffer vs raw cuMemCreate+cuMemMap", "virtual-memory",
                      against_raw_vmm, 0.0),
          cost_result("give back 1 GiB: a grown GrowableBuffer vs raw cuMemFree", "virtual-memory", give_back, 0.0)};
}

// ---- kernel bandwidth over a grown buffer ----

std::vector<Result> grown_buffer_bandwidth(const Context& c) {
  const std::size_t bytes = c.smoke ? 4 * MiB : 256 * MiB;
  const std::size_t step = c.smoke ? 2 * MiB : 64 * MiB;
  const int n = static_cast<int>(bytes / sizeof(float));
  Stream stream(c.device);
  Module module = Module::load(c.device, cudakit_kernels::test_fatbin());
  auto kernel = module.kernel<void(const float*, float*, float, float, int)>("scale_offset");
  GrowableBuffer<float> gin(c.device, bytes / sizeof(float)), gout(c.device, bytes / sizeof(float));
  for (std::size_t b = step; b <= bytes; b += step) {
    gin.resize(b / sizeof(float));
    gout.resize(b / sizeof(float));
  }
  DeviceBuffer<float> din(stream, n, zeroed), dout(stream, n, zeroed);
  fill(stream, gin, 1.5f);
  fill(stream, gout, 0.0f);
  stream.synchronize();
  const LaunchConfig config{grid_for(n, 256), 256};
  Interleave plan = c.interleave(20);
  auto samples = time_device(
      plan, stream,
      [&](int ops) {
        for (int i = 0; i < ops; ++i) launch(stream, kernel, config, gin, gout, 2.0f, 1.0f, n);
      },
      [&](int ops) {
        for (int i = 0; i < ops; ++i) launch(stream, kernel, config, din, dout, 2.0f, 1.0f, n);
      });
  stream.synchronize();
  return {bandwidth_result("kernel over a grown buffer (256 MiB in 64 MiB chunks) vs DeviceBuffer", "virtual-memory",
                           samples, 2.0 * static_cast<double>(bytes), 0.99)};
}

// ---- batched copies ----

enum class Direction { h2d, d2h, d2d };

std::vector<Result> batched_copies(const Context& c, Direction direction) {
  constexpr std::size_t piece = 4096;
  const std::size_t pieces = c.smoke ? 8 : 1000;
  const std::size_t bytes = piece * pieces;
  RawPrimaryContext raw_context(c.device);
  Stream stream(c.device);
  const StreamRef s = stream;
  const CUstream raw_stream = stream.handle();  // time_device brackets every arm on one stream
  PinnedBuffer<char> host(bytes, zeroed);
  DeviceBuffer<char> a(stream, bytes, zeroed), b(stream, bytes, zeroed);
  stream.synchronize();
  std::span<char> host_span = host.span();
  const auto h2d = raw_entry<EntryId::MemcpyHtoDAsync>();
  const auto d2h = raw_entry<EntryId::MemcpyDtoHAsync>();
  const auto d2d = raw_entry<EntryId::MemcpyDtoDAsync>();
  CopyBatch batch;

  auto batched = [&](int ops) {
    for (int op = 0; op < ops; ++op) {
      batch.clear();
      for (std::size_t i = 0; i < pieces; ++i) {
        if (direction == Direction::h2d) batch.add(host_span.subspan(i * piece, piece), a.subspan(i * piece, piece));
        else if (direction == Direction::d2h) batch.add(std::as_const(a).subspan(i * piece, piece), host_span.subspan(i * piece, piece));
        else batch.add(std::as_const(a).subspan(i * piece, piece), b.subspan(i * piece, piece));
      }
      batch.submit(s);
    }
  };
  auto cudakit_loop = [&](int ops) {
    for (int op = 0; op < ops; ++op)
      for (std::size_t i = 0; i < pieces; ++i) {
        if (direction == Direction::h2d) copy(s, host_span.subspan(i * piece, piece), a.subspan(i * piece, piece));
        else if (direction == Direction::d2h) copy(s, std::as_const(a).subspan(i * piece, piece), host_span.subspan(i * piece, piece));
        else copy(s, std::as_const(a).subspan(i * piece, piece), b.subspan(i * piece, piece));
      }
  };
  char* h = host.data();
  const CUdeviceptr pa = a.device_pointer(), pb = b.device_pointer();
  auto raw_loop = [&](int ops) {
    for (int op = 0; op < ops; ++op)
      for (std::size_t i = 0; i < pieces; ++i) {
        if (direction == Direction::h2d) check_raw(h2d(pa + i * piece, h + i * piece, piece, raw_stream), "cuMemcpyHtoDAsync");
        else if (direction == Direction::d2h) check_raw(d2h(h + i * piece, pa + i * piece, piece, raw_stream), "cuMemcpyDtoHAsync");
        else check_raw(d2d(pb + i * piece, pa + i * piece, piece, raw_stream), "cuMemcpyDtoDAsync");
      }
  };
  auto driver_batch = [&](int ops) {
    for (int op = 0; op < ops; ++op) {
      batch.clear();
      for (std::size_t i = 0; i < pieces; ++i) {
        if (direction == Direction::h2d) batch.add(host_span.subspan(i * piece, piece), a.subspan(i * piece, piece));
        else if (direction == Direction::d2h) batch.add(std::as_const(a).subspan(i * piece, piece), host_span.subspan(i * piece, piece));
        else batch.add(std::as_const(a).subspan(i * piece, piece), b.subspan(i * piece, piece));
      }
      batch.submit(s, BatchPath::driver_batch);
    }
  };
  batched(1);  // the first automatic submit compiles and loads the copy kernel: not timed
  stream.synchronize();
  Interleave plan = c.interleave(4);
  auto vs_cudakit = time_device(plan, s, batched, cudakit_loop);
  auto vs_raw = time_device(plan, s, batched, raw_loop);
  auto driver_vs_raw = time_device(plan, s, driver_batch, raw_loop);
  auto driver_vs_cudakit = time_device(plan, s, driver_batch, cudakit_loop);
  stream.synchronize();
  const std::string what = direction == Direction::h2d ? "H2D" : direction == Direction::d2h ? "D2H" : "D2D";
  const std::string driver_path = CopyBatch::driver_batches() ? "cuMemcpyBatchAsync" : "one cuMemcpyAsync per copy";
  return {cost_result("1000 copies of 4 KiB " + what + ": CopyBatch vs a loop of cudakit copies", "batched-copies",
                      vs_cudakit, 1.0 / 3.0),
          cost_result("1000 copies of 4 KiB " + what + ": CopyBatch vs a raw loop", "batched-copies", vs_raw, 1.0),
          cost_result("1000 copies of 4 KiB " + what + ": CopyBatch (driver batch: " + driver_path + ") vs a raw loop",
                      "batched-copies", driver_vs_raw, 0.0),
          cost_result("1000 copies of 4 KiB " + what + ": CopyBatch (driver batch: " + driver_path +
                          ") vs a loop of cudakit copies",
                      "batched-copies", driver_vs_cudakit, 0.0)};
}

std::vector<Result> batched_h2d(const Context& c) { return batched_copies(c, Direction::h2d); }
std::vector<Result> batched_d2h(const Context& c) { return batched_copies(c, Direction::d2h); }
std::vector<Result> batched_d2d(const Context& c) { return batched_copies(c, Direction::d2d); }

CUDAKIT_BENCHMARK("grow to 1 GiB in 64 MiB steps", "virtual-memory", QuickRun::skip, grow_to_1_gib);
CUDAKIT_BENCHMARK("kernel bandwidth over a grown buffer", "virtual-memory", QuickRun::skip, grown_buffer_bandwidth);
CUDAKIT_BENCHMARK("batched copies H2D", "batched-copies", QuickRun::skip, batched_h2d);
CUDAKIT_BENCHMARK("batched copies D2H", "batched-copies", QuickRun::skip, batched_d2h);
CUDAKIT_BENCHMARK("batched copies D2D", "batched-copies", QuickRun::skip, batched_d2d);

}  // namespace
}  // namespace cudakit::tool::bench
