// Thread stress on a real GPU: 16 threads launching, copying and
// capturing at once, every result checked against a host reference on fresh random data.
//
// - threads sharing one Gpu (its own stream) launching and copying;
// - threads each with streams of their own, work split across two of them (buffers order
//   themselves across streams);
// - threads each capturing a graph on a stream of their own and replaying it, with new input
//   between replays and replays alternating between two streams;
// - one shared read-only buffer that every thread's kernels (and graphs) read.
//
// Outputs are poisoned (NaN) before each run, on the device and on the host, so an
// element nobody wrote fails. Data are small integers, so every result is exact (whether
// or not the compiler fused a multiply-add) and compared with ==. The seed is printed.
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cudakit/gpu.hpp"
#include "gpu_fixture.hpp"

#ifdef CUDAKIT_HAVE_TEST_KERNELS
#include "test_kernels.hpp"
#endif

namespace cudakit {
namespace {

#ifdef CUDAKIT_HAVE_TEST_KERNELS

using Saxpy = void(float, const float*, float*, int);
using ScaleOffset = void(const float*, float*, float, float, int);
using AddArrays = void(const float*, const float*, float*, int);
using Increment = void(float*, int);

// 16 threads; CUDAKIT_STRESS_THREADS=N (1 to 16) runs N instead, to narrow down a failure.
const int thread_count = [] {
  const char* v = std::getenv("CUDAKIT_STRESS_THREADS");
  const int n = v != nullptr ? std::atoi(v) : 0;
  return n >= 1 && n <= 16 ? n : 16;
}();
constexpr int rounds = 12;
constexpr int max_n = (1 << 16) + 16 * 997 + rounds;  // every thread's n is at most this
constexpr float nan = std::numeric_limits<float>::quiet_NaN();

std::vector<float> small_integers(std::mt19937& rng, std::size_t count) {
  std::uniform_int_distribution<int> d(-64, 64);
  std::vector<float> v(count);
  for (auto& x : v) x = static_cast<float>(d(rng));
  return v;
}

// "" when every element of `got` equals `want`; else the first difference.
std::string compare(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  if (got.size() != want.size()) return what + ": " + std::to_string(got.size()) + " elements";
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == want[i]))
      return what + " at " + std::to_string(i) + ": " + std::to_string(got[i]) + " instead of " +
             std::to_string(want[i]);
  return {};
}

class StressDeviceTest : public testing::GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    gpu_.emplace(device());
    module_ = gpu_->load(cudakit_kernels::test_fatbin());
    saxpy_ = module_.kernel<Saxpy>("saxpy");
    scale_offset_ = module_.kernel<ScaleOffset>("scale_offset");
    add_arrays_ = module_.kernel<AddArrays>("add_arrays");
    increment_ = module_.kernel<Increment>("increment");
    seed_ = std::random_device{}();
    std::printf("[          ] random seed %u\n", seed_);
    std::mt19937 rng(seed_);
    host_table_ = small_integers(rng, max_n);
    table_ = gpu_->upload(host_table_);  // the shared read-only buffer
  }
  void TearDown() override {
    if (gpu_) {
      table_.reset();
      saxpy_ = {};  // a kernel keeps its module loaded
      scale_offset_ = {};
      add_arrays_ = {};
      increment_ = {};
      module_ = {};
      gpu_->synchronize();
      gpu_.reset();
    }
    GpuTest::TearDown();
  }

  // Runs `body(thread, rng)` on 16 threads; expects "" from each.
  template <class Body>
  void on_sixteen_threads(Body body) {
    std::vector<std::string> errors(static_cast<std::size_t>(thread_count));
    std::vector<std::thread> pool;
    for (int t = 0; t < thread_count; ++t)
      pool.emplace_back([&, t] {
        std::mt19937 rng(seed_ + 7919u * static_cast<unsigned>(t + 1));
        try {
          errors[static_cast<std::size_t>(t)] = body(t, rng);
        } catch (const std::exception& e) {
          errors[static_cast<std::size_t>(t)] = std::string("threw: ") + e.what();
        }
      });
    for (auto& th : pool) th.join();
    for (int t = 0; t < thread_count; ++t)
      EXPECT_EQ(errors[static_cast<std::size_t>(t)], "") << "thread " << t << ", seed " << seed_;
  }

  static LaunchConfig cover(int n) { return LaunchConfig{grid_for(n, 256), 256}; }

  // One round on `first` and `second` (the same stream or two): y = a*x + y on `first`,
  // out = y + table on `second`, copied to a poisoned buffer on `first`, downloaded into
  // poisoned host memory, checked. "" when every element matches.
  std::string saxpy_add_copy(StreamRef first, StreamRef second, int n, std::mt19937& rng) {
    const auto N = static_cast<std::size_t>(n);
    const float a = static_cast<float>(1 + rng() % 4);
    auto hx = small_integers(rng, N), hy = small_integers(rng, N);
    DeviceBuffer<float> x = upload(first, hx), y = upload(first, hy);
    DeviceBuffer<float> out(second, N, uninitialized), copied(first, N, uninitialized);
    fill(second, out, nan);
    fill(first, copied, nan);
    launch(first, saxpy_, cover(n), a, x, y, n);
    launch(second, add_arrays_, cover(n), y, table_.first(N), out, n);
    copy(first, out, copied);
    std::vector<float> got(N, nan);
    download(first, copied, got);
    std::vector<float> want(N);
    for (std::size_t i = 0; i < N; ++i) want[i] = (a * hx[i] + hy[i]) + host_table_[i];
    return compare(got, want, "saxpy, add the shared table, copy");
  }

  // Where a thread captures its graph.
  enum class CaptureOn {
    stream_made_for_it,      // a stream made for the capture, on which no buffer was used
    stream_buffers_made_on,  // `own`, the stream the buffers were made on, which other
                             // threads' frees and hand-offs may reach (a capture's start
                             // marks the stream and waits for them: docs/design.md decision 14)
  };

  // One thread's capture and replays: a graph of three kernels captured once, then
  // replayed with fresh input and a poisoned output before each replay, alternating
  // between two streams. "" when every replay is right.
  std::string capture_and_replay(int t, std::mt19937& rng, CaptureOn where) {
    Stream own = gpu_->new_stream(), other = gpu_->new_stream();
    const int n = (1 << 16) + 997 * t;
    const auto N = static_cast<std::size_t>(n);
    const float scale = static_cast<float>(2 + rng() % 3), offset = static_cast<float>(rng() % 9);
    DeviceBuffer<float> x(own, N, uninitialized), out(own, N, uninitialized), count(own, N, zeroed);
    // tmp = x * scale + offset; out = tmp + table; count += 1. tmp lives in the graph only.
    GraphExec exec = [&] {
      DeviceBuffer<float> tmp(own, N, uninitialized);
      if (std::getenv("CUDAKIT_STRESS_ADDRESSES") != nullptr)  // to tell which buffer a tool's report names
        std::printf("[ buffers  ] thread %d: x %#llx out %#llx count %#llx tmp %#llx table %#llx, %zu bytes each\n", t,
                    static_cast<unsigned long long>(x.device_pointer()), static_cast<unsigned long long>(out.device_pointer()),
                    static_cast<unsigned long long>(count.device_pointer()),
                    static_cast<unsigned long long>(tmp.device_pointer()),
                    static_cast<unsigned long long>(table_.device_pointer()), N * sizeof(float));
      std::optional<Stream> made;
      StreamRef cap = own;
      if (where == CaptureOn::stream_made_for_it) cap = made.emplace(gpu_->new_stream());
      Graph g = capture_nonempty(cap, [&] {
        launch(cap, scale_offset_, cover(n), x, tmp, scale, offset, n);
        launch(cap, add_arrays_, cover(n), tmp, table_.first(N), out, n);
        launch(cap, increment_, cover(n), count, n);
      });
      return g.instantiate();
    }();
    for (int r = 0; r < rounds; ++r) {
      // Fresh input and a poisoned output before each replay; replays alternate streams.
      StreamRef on = r % 2 ? StreamRef(other) : StreamRef(own);
      auto hx = small_integers(rng, N);
      copy(on, hx, x);
      fill(on, out, nan);
      exec.launch(on);
      std::vector<float> got(N, nan);
      download(r % 3 ? StreamRef(own) : StreamRef(other), out, got);
      std::vector<float> want(N);
      for (std::size_t i = 0; i < N; ++i) want[i] = (hx[i] * scale + offset) + host_table_[i];
      if (auto e = compare(got, want, "replay " + std::to_string(r)); !e.empty()) return e;
    }
    if (auto e = compare(download(own, count), std::vector<float>(N, static_cast<float>(rounds)), "replay count");
        !e.empty())
      return e;
    own.synchronize();
    other.synchronize();
    return {};
  }

  std::optional<Gpu> gpu_;
  Module module_;
  Kernel<Saxpy> saxpy_;
  Kernel<ScaleOffset> scale_offset_;
  Kernel<AddArrays> add_arrays_;
  Kernel<Increment> increment_;
  unsigned seed_ = 0;
  std::vector<float> host_table_;
  DeviceBuffer<float> table_;
};

TEST_F(StressDeviceTest, SixteenThreadsLaunchAndCopyThroughOneSharedGpu) {
  const Gpu& gpu = *gpu_;
  on_sixteen_threads([&](int t, std::mt19937& rng) -> std::string {
    for (int r = 0; r < rounds; ++r) {
      const int n = (1 << 16) + 997 * t + r;
      const auto N = static_cast<std::size_t>(n);
      // Through the facade's own forwards, all on the Gpu's stream.
      const float scale = static_cast<float>(2 + rng() % 3), offset = static_cast<float>(rng() % 9);
      auto hx = small_integers(rng, N);
      DeviceBuffer<float> x = gpu.upload(hx);
      DeviceBuffer<float> out = gpu.alloc<float>(N, uninitialized);
      gpu.fill(out, nan);
      gpu.launch(scale_offset_, cover(n), x, out, scale, offset, n);
      gpu.launch(increment_, cover(n), out, n);
      std::vector<float> got = gpu.download(out);
      std::vector<float> want(N);
      for (std::size_t i = 0; i < N; ++i) want[i] = hx[i] * scale + offset + 1.0f;
      if (auto e = compare(got, want, "scale_offset, increment (round " + std::to_string(r) + ")"); !e.empty())
        return e;
      if (auto e = saxpy_add_copy(gpu.stream(), gpu.stream(), n, rng); !e.empty()) return e;
    }
    return {};
  });
}

TEST_F(StressDeviceTest, SixteenThreadsLaunchAndCopyOnStreamsOfTheirOwn) {
  on_sixteen_threads([&](int t, std::mt19937& rng) -> std::string {
    Stream a = gpu_->new_stream(), b = gpu_->new_stream();
    for (int r = 0; r < rounds; ++r) {
      const int n = (1 << 16) + 997 * t + r;
      // Alternately on one own stream, and split across two (the second waits for the first).
      if (auto e = saxpy_add_copy(a, r % 2 ? StreamRef(b) : StreamRef(a), n, rng); !e.empty())
        return "round " + std::to_string(r) + ": " + e;
    }
    a.synchronize();
    b.synchronize();
    return {};
  });
}

TEST_F(StressDeviceTest, SixteenThreadsCaptureAndReplayGraphsOnTheirOwnStreams) {
  on_sixteen_threads([&](int t, std::mt19937& rng) { return capture_and_replay(t, rng, CaptureOn::stream_made_for_it); });
}

TEST_F(StressDeviceTest, SixteenThreadsCaptureOnTheStreamTheirBuffersWereMadeOnAndReplay) {
  on_sixteen_threads(
      [&](int t, std::mt19937& rng) { return capture_and_replay(t, rng, CaptureOn::stream_buffers_made_on); });
}

#endif  // CUDAKIT_HAVE_TEST_KERNELS

}  // namespace
}  // namespace cudakit
