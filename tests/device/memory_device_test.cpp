// Memory on a real GPU: round trips in every direction on fresh random data
// (outputs poisoned first), pinned and pageable, sizes odd and larger than a staging
// buffer; fills; the deterministic ordering tests (a gate holds stream A until the test
// opens it, while stream B must wait); out of memory; the pool's threshold; and the
// predecessors' scenario (1, 4 and 8 threads, 40 identical requests each, shared
// read-only weights).
//
// Kernels are launched raw (cuLaunchKernel through driver::cu) until typed launches
// exist, so each test declares its launches' buffer uses itself with span.use(stream,
// read/write) before the launch, as a typed launch will.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <type_traits>
#include <vector>

#include "gpu_fixture.hpp"
#include "stream_gate.hpp"

#ifdef CUDAKIT_HAVE_TEST_KERNELS
#include "test_kernels.hpp"
#endif

namespace cudakit {
namespace {

using driver::cu;
using testing::expect_held;
using testing::GpuTest;

class MemoryDeviceTest : public GpuTest {};

// Fresh random values in [1, 2): never zero, never the poison.
std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(1.0f, 2.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Fresh random integers in [1, 250], or doubles in [1, 2^32].
template <class T>
std::vector<T> random_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<T> v(n);
  for (auto& x : v) x = std::is_floating_point_v<T> ? static_cast<T>(rng()) + T(1) : static_cast<T>(rng() % 250 + 1);
  return v;
}

// cudakit's staging buffers for pageable copies (src/memory/staging.hpp): 16 of 1 MiB
// per device. The sizes below straddle them.
constexpr std::size_t staging_chunk_bytes = std::size_t(1) << 20;
constexpr std::size_t staging_max_chunks = 16;

constexpr std::uint32_t poison_bits = 0xFFBADBADu;  // a NaN as float: equal to nothing

template <class T>
void poison(StreamRef s, DeviceBuffer<T>& b) {
  fill_pattern8(s, b, 0xBD);
}

// The staging buffer size plus odd sizes around it.
std::vector<std::size_t> sizes_in_floats() {
  std::size_t chunk = staging_chunk_bytes / sizeof(float);
  return {1, 3, 1000, 4097, chunk - 1, chunk + 1, 3 * chunk + 5};
}

TEST_F(MemoryDeviceTest, RoundTripsInEveryDirectionPageable) {
  Stream s(device()), t(device());
  unsigned seed = 1;
  for (std::size_t n : sizes_in_floats()) {
    auto host = random_floats(n, seed++);
    DeviceBuffer<float> a(s, n, uninitialized), b(t, n, uninitialized);
    poison(s, a);
    poison(t, b);
    copy(s, host, a);                      // host -> device (staged)
    copy(t, a, b);                         // device -> device, another stream: ordered by tracking
    std::vector<float> back(n, -999.0f);
    copy(t, b, back);                      // device -> host, stream-ordered (staged, host callbacks)
    t.synchronize();
    EXPECT_EQ(back, host) << n << " floats, copy()";
    EXPECT_EQ(download(s, b), host) << n << " floats, download()";
    DeviceBuffer<float> c = upload(t, host);
    EXPECT_EQ(download(t, c), host) << n << " floats, upload()";
  }
}

TEST_F(MemoryDeviceTest, RoundTripsInEveryDirectionPinnedAndRegistered) {
  Stream s(device()), t(device());
  unsigned seed = 100;
  for (std::size_t n : sizes_in_floats()) {
    auto host = random_floats(n, seed++);
    PinnedBuffer<float> in(n, uninitialized), out(n, uninitialized);
    std::copy(host.begin(), host.end(), in.begin());
    std::fill(out.begin(), out.end(), -999.0f);
    DeviceBuffer<float> a(s, n, uninitialized), b(t, n, uninitialized);
    poison(s, a);
    poison(t, b);
    copy(s, in, a);
    copy(t, a, b);
    copy(s, b, out);  // back on s: ordered after t's copy
    out.synchronize();
    EXPECT_TRUE(std::equal(out.begin(), out.end(), host.begin())) << n << " floats, pinned";

    std::vector<float> registered(n, -999.0f);
    HostRegistration lock(registered);
    download(t, a, registered);
    EXPECT_EQ(registered, host) << n << " floats, registered";
  }
}

TEST_F(MemoryDeviceTest, RoundTripsOfOtherElementTypes) {
  Stream s(device());
  auto bytes = random_values<std::uint8_t>(1000003, 7);
  EXPECT_EQ(download(s, upload(s, bytes)), bytes);
  auto halves = random_values<std::uint16_t>(77777, 8);
  EXPECT_EQ(download(s, upload(s, halves)), halves);
  auto doubles = random_values<double>(300001, 9);
  DeviceBuffer<double> d = upload(s, doubles);
  DeviceBuffer<double> e(s, doubles.size(), uninitialized);
  copy(s, d, e);
  EXPECT_EQ(download(s, e), doubles);
}

TEST_F(MemoryDeviceTest, FillsSetEveryElement) {
  Stream s(device());
  for (std::size_t n : {std::size_t(1), std::size_t(1000001)}) {
    DeviceBuffer<float> f(s, n, uninitialized);
    fill(s, f, 1.25f);
    EXPECT_EQ(download(s, f), std::vector<float>(n, 1.25f));
    DeviceBuffer<std::uint16_t> h(s, n, uninitialized);
    fill(s, h, std::uint16_t(0xBEEF));
    EXPECT_EQ(download(s, h), std::vector<std::uint16_t>(n, 0xBEEF));
    DeviceBuffer<std::uint32_t> w(s, n, uninitialized);
    fill_pattern8(s, w, 0x5A);
    EXPECT_EQ(download(s, w), std::vector<std::uint32_t>(n, 0x5A5A5A5Au));
    fill_pattern16(s, w, 0x1234);
    EXPECT_EQ(download(s, w), std::vector<std::uint32_t>(n, 0x12341234u));
    fill_pattern32(s, w, poison_bits);
    EXPECT_EQ(download(s, w), std::vector<std::uint32_t>(n, poison_bits));
  }
}

// A fresh random 8-byte pattern whose two 4-byte halves differ (equal halves take the
// single 4-byte memset; the two-memset path is the one to prove).
std::uint64_t random_pattern_with_distinct_halves(std::mt19937_64& rng) {
  for (;;) {
    std::uint64_t p = rng();
    if (static_cast<std::uint32_t>(p) != static_cast<std::uint32_t>(p >> 32)) return p;
  }
}

TEST_F(MemoryDeviceTest, FillsEightByteElementsWithFreshRandomPatterns) {
  Stream s(device());
  const auto seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::uint64_t poisoned = 0xBDBDBDBDBDBDBDBDull;
  for (std::size_t n : {std::size_t(1), std::size_t(2), std::size_t(4097), std::size_t(1000001), (std::size_t(1) << 22) + 3}) {
    // The fill covers all but the first and last elements, which must keep the poison.
    DeviceBuffer<std::uint64_t> d(s, n + 2, uninitialized);
    fill_pattern8(s, d, 0xBD);
    const std::uint64_t pattern = random_pattern_with_distinct_halves(rng);
    fill(s, d.subspan(1, n), pattern);
    std::vector<std::uint64_t> expected(n + 2, pattern);
    expected.front() = expected.back() = poisoned;
    EXPECT_EQ(download(s, d), expected) << n << " elements, pattern " << pattern;

    DeviceBuffer<double> f(s, n, uninitialized);
    fill_pattern8(s, f, 0xBD);
    const double value = std::uniform_real_distribution<double>(-1e300, 1e300)(rng);
    fill(s, f, value);
    EXPECT_EQ(download(s, f), std::vector<double>(n, value)) << n << " doubles, value " << value;
  }
}

TEST_F(MemoryDeviceTest, EightByteFillsReplayFromACapturedGraph) {
  Stream s(device());
  const auto seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::size_t n = 100003;
  DeviceBuffer<std::uint64_t> d(s, n, uninitialized);
  const std::uint64_t pattern = random_pattern_with_distinct_halves(rng);
  Graph g = capture_nonempty(s, [&] { fill(s, d, pattern); });
  GraphExec exec = g.instantiate();
  for (int replay = 0; replay < 2; ++replay) {
    fill_pattern8(s, d, 0xBD);  // poison before each replay
    exec.launch(s);
    EXPECT_EQ(download(s, d), std::vector<std::uint64_t>(n, pattern)) << "replay " << replay;
  }
}

TEST_F(MemoryDeviceTest, OutOfMemoryReportsTheNumbersAndTheProcessGoesOn) {
  Stream s(device());
  const std::size_t total = device().total_memory();
  for (Allocator allocator : {Allocator::pool, Allocator::plain}) {
    try {
      DeviceBuffer<char> huge(s, 2 * total, uninitialized, allocator);
      FAIL() << "allocated twice the device's memory";
    } catch (const OutOfMemory& e) {
      EXPECT_EQ(e.requested(), 2 * total);
      EXPECT_EQ(e.total_bytes(), total);
      EXPECT_LE(e.free_bytes(), total);
      EXPECT_GT(e.free_bytes(), 0u);
    }
    auto host = random_floats(1 << 20, 3);
    DeviceBuffer<float> fine = upload(s, host, allocator);
    EXPECT_EQ(download(s, fine), host);
  }
}

TEST_F(MemoryDeviceTest, PoolKeepsFreedMemoryAcrossSynchronize) {
  Stream s(device());
  MemoryPoolRef pool = default_memory_pool(device());
  { DeviceBuffer<char> warm(s, 1, uninitialized); }  // the first pool allocation sets the threshold
  std::uint64_t threshold = pool.release_threshold();
  EXPECT_TRUE(threshold == keep_all_pool_memory || threshold != 0) << "raised from the driver's 0 unless chosen";
  constexpr std::size_t bytes = 64 << 20;
  { DeviceBuffer<char> b(s, bytes, uninitialized); }
  s.synchronize();
  std::uint64_t kept = pool.reserved_bytes();
  pool.trim_to(0);
  if (threshold != keep_all_pool_memory) GTEST_SKIP() << "a threshold chosen outside cudakit: " << threshold;
  EXPECT_GE(kept, bytes) << "freed memory was kept for the next allocation";
  EXPECT_LE(pool.reserved_bytes() + bytes, kept) << "trim_to(0) handed the unused memory back";
}

TEST_F(MemoryDeviceTest, PageableSourceMayBeOverwrittenAsSoonAsCopyReturns) {
  Stream s(device());
  // Larger than the staging pool, so the copy must reuse staging buffers still in flight.
  std::size_t n = 5 * staging_max_chunks * staging_chunk_bytes / sizeof(float) + 11;
  auto original = random_floats(n, 11);
  std::vector<float> scratch = original;
  DeviceBuffer<float> d(s, n, uninitialized);
  copy(s, scratch, d);
  std::fill(scratch.begin(), scratch.end(), -1.0f);  // the copy may still be running on the device
  EXPECT_EQ(download(s, d), original);
}

#ifdef CUDAKIT_HAVE_TEST_KERNELS

// The embedded test kernels, loaded with the raw driver (the module layer is another
// helper's), and launched raw.
class Kernels {
 public:
  explicit Kernels(const Device& device) : device_(device), context_(Context::primary(device)) {
    context_.make_current();
    auto image = cudakit_kernels::test_fatbin();
    check(cu.ModuleLoadDataEx(&module_, image.data(), 0, nullptr, nullptr), "cuModuleLoadDataEx", Resource::none());
    for (const char* name :
         {"spin_kernel", "slow_copy", "increment", "add_arrays", "scale_offset", "write_through", "wait_for_gate"}) {
      CUfunction f = nullptr;
      check(cu.ModuleGetFunction(&f, module_, name), "cuModuleGetFunction", Resource::none());
      functions_[name] = f;
    }
    cycles_per_ms_ = cudakit::testing::spin_cycles(device, 1);
  }
  ~Kernels() { (void)cu.ModuleUnload(module_); }

  /// Clock cycles the GPU spends in `ms` milliseconds (roughly).
  long long cycles(int ms) const { return cycles_per_ms_ * ms; }

  void launch(const char* name, StreamRef s, unsigned grid, unsigned block, std::initializer_list<void*> args) const {
    context_.make_current();
    std::vector<void*> params(args);
    check(cu.LaunchKernel(functions_.at(name), grid, 1, 1, block, 1, 1, 0, s.handle(), params.data(), nullptr),
          "cuLaunchKernel", Resource::none());
  }

  // Holds `s` busy for about `ms` milliseconds.
  void spin(StreamRef s, int ms) const {
    long long c = cycles(ms);
    launch("spin_kernel", s, 1, 1, {&c});
  }
  // Holds `s` until the gate opens (stream_gate.hpp).
  testing::StreamGate hold(StreamRef s) const {
    return testing::StreamGate(s, device_, [this](StreamRef on, int* flag, long long max_cycles) {
      launch("wait_for_gate", on, 1, 1, {&flag, &max_cycles});
    });
  }
  // out = in; declares its uses first.
  void copy(StreamRef s, DeviceSpan<const float> in, DeviceSpan<float> out) const { slow_copy(s, in, out, 0); }
  // out = in after spinning about `ms` milliseconds; declares its uses first.
  void slow_copy(StreamRef s, DeviceSpan<const float> in, DeviceSpan<float> out, int ms) const {
    in.use(s, Access::read);
    out.use(s, Access::write);
    CUdeviceptr i = in.device_pointer(), o = out.device_pointer();
    int n = static_cast<int>(out.size());
    long long c = cycles(ms);
    launch("slow_copy", s, (n + 255) / 256, 256, {&i, &o, &n, &c});
  }
  // data += 1
  void increment(StreamRef s, DeviceSpan<float> data) const {
    data.use(s, Access::write);
    CUdeviceptr d = data.device_pointer();
    int n = static_cast<int>(data.size());
    launch("increment", s, (n + 255) / 256, 256, {&d, &n});
  }
  // out = a + b
  void add(StreamRef s, DeviceSpan<const float> a, DeviceSpan<const float> b, DeviceSpan<float> out) const {
    a.use(s, Access::read);
    b.use(s, Access::read);
    out.use(s, Access::write);
    CUdeviceptr pa = a.device_pointer(), pb = b.device_pointer(), po = out.device_pointer();
    int n = static_cast<int>(out.size());
    launch("add_arrays", s, (n + 255) / 256, 256, {&pa, &pb, &po, &n});
  }
  // out = in * scale + offset
  void scale_offset(StreamRef s, DeviceSpan<const float> in, DeviceSpan<float> out, float scale, float offset) const {
    in.use(s, Access::read);
    out.use(s, Access::write);
    CUdeviceptr pi = in.device_pointer(), po = out.device_pointer();
    int n = static_cast<int>(out.size());
    launch("scale_offset", s, (n + 255) / 256, 256, {&pi, &po, &scale, &offset, &n});
  }

 private:
  Device device_;
  Context context_;
  CUmodule module_ = nullptr;
  std::map<std::string, CUfunction> functions_;
  long long cycles_per_ms_ = 0;
};

class MemoryOrderingTest : public MemoryDeviceTest {
 protected:
  void SetUp() override {
    MemoryDeviceTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    kernels_ = std::make_unique<Kernels>(device());
  }
  void TearDown() override {
    kernels_.reset();
    MemoryDeviceTest::TearDown();
  }
  const Kernels& k() const { return *kernels_; }
  static constexpr std::size_t n = 4096;
  static constexpr int hold_ms = 100;  // how long a spin keeps a stream busy

 private:
  std::unique_ptr<Kernels> kernels_;
};

TEST_F(MemoryOrderingTest, ReadAfterWriteOnAnotherStreamSeesTheNewData) {
  Stream a(device()), b(device());
  auto old_values = random_floats(n, 1), new_values = random_floats(n, 2);
  DeviceBuffer<float> x = upload(a, old_values), source = upload(a, new_values);
  a.synchronize();
  testing::StreamGate gate = k().hold(a);
  k().copy(a, source, x);  // a writes x once the gate opens
  DeviceBuffer<float> y(b, n, uninitialized);
  poison(b, y);
  copy(b, x, y);  // b reads x: must wait for a's write
  expect_held(a, "the gate holds a");
  gate.open();
  EXPECT_EQ(download(b, y), new_values);
}

TEST_F(MemoryOrderingTest, WriteAfterReadWaitsForReadersOnTwoStreams) {
  Stream r1(device()), r2(device()), w(device());
  auto values = random_floats(n, 3);
  DeviceBuffer<float> x = upload(w, values);
  DeviceBuffer<float> y1(r1, n, uninitialized), y2(r2, n, uninitialized);
  poison(r1, y1);
  poison(r2, y2);
  testing::StreamGate first = k().hold(r1), second = k().hold(r2);
  k().copy(r1, x, y1);  // two readers, each behind a gate
  k().copy(r2, x, y2);
  fill(w, x, -5.0f);    // the writer must wait for both
  expect_held(r1, "the gate holds the first reader");
  second.open();
  r2.synchronize();
  expect_held(w, "the writer waits for the first reader too");
  first.open();
  EXPECT_EQ(download(w, x), std::vector<float>(n, -5.0f));
  EXPECT_EQ(download(r1, y1), values) << "the first reader read before the write";
  EXPECT_EQ(download(r2, y2), values) << "the second reader read before the write";
}

TEST_F(MemoryOrderingTest, WriteAfterWriteOnAnotherStreamKeepsTheOrder) {
  Stream a(device()), b(device());
  auto values = random_floats(n, 4);
  DeviceBuffer<float> source = upload(a, values), x(a, n, uninitialized);
  poison(a, x);
  testing::StreamGate gate = k().hold(a);
  k().copy(a, source, x);  // first write, once the gate opens
  k().increment(b, x);     // second write: must come after
  expect_held(a, "the gate holds a");
  gate.open();
  auto out = download(b, x);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], values[i] + 1.0f) << "element " << i;
}

TEST_F(MemoryOrderingTest, FreeWhileAnotherStreamStillReadsWaitsForTheReader) {
  Stream a(device()), b(device());
  auto values = random_floats(n, 5);
  DeviceBuffer<float> y(b, n, uninitialized);
  poison(b, y);
  testing::StreamGate gate = k().hold(b);
  {
    DeviceBuffer<float> x = upload(a, values);
    k().copy(b, x, y);  // b reads x once the gate opens
  }  // x freed: stream-ordered after b's read
  // Allocate again on a: the pool may hand out x's memory; overwrite it at once.
  std::vector<DeviceBuffer<float>> again;
  for (int i = 0; i < 4; ++i) {
    again.emplace_back(a, n, uninitialized);
    fill(a, again.back(), -7.0f);
  }
  expect_held(b, "the gate holds b");
  gate.open();
  EXPECT_EQ(download(b, y), values) << "the reader saw the buffer's data, not the next allocation's";
}

TEST_F(MemoryOrderingTest, HostDownloadAfterACrossStreamWriteSeesTheWrite) {
  Stream a(device()), b(device());
  auto values = random_floats(n, 6);
  DeviceBuffer<float> source = upload(a, values), x(b, n, zeroed);
  b.synchronize();
  k().slow_copy(a, source, x, hold_ms);
  EXPECT_EQ(download(b, x), values);
  PinnedBuffer<float> p(n, uninitialized);
  k().increment(a, x);
  download(b, x, p);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(p[i], values[i] + 1.0f);
}

TEST_F(MemoryOrderingTest, PinnedBufferIsFreedOnlyAfterTheCopyThatReadsIt) {
  Stream a(device());
  auto values = random_floats(n, 7);
  DeviceBuffer<float> x(a, n, uninitialized);
  poison(a, x);
  k().spin(a, hold_ms);
  {
    PinnedBuffer<float> p(n, uninitialized);
    std::copy(values.begin(), values.end(), p.begin());
    copy(a, p, x);  // runs after the spin
  }  // freed here: waits for a first
  EXPECT_TRUE(a.query()) << "the free waited for the stream that used the pinned buffer";
  EXPECT_EQ(download(a, x), values);
}

TEST_F(MemoryOrderingTest, MappedPinnedMemoryIsWrittenByAKernel) {
  Stream s(device());
  PinnedBuffer<int> flag(1, zeroed, {.mapped = true});
  ASSERT_NE(flag.mapped_pointer(), 0u);
  CUdeviceptr p = flag.mapped_pointer();
  k().launch("write_through", s, 1, 1, {&p});
  s.synchronize();
  EXPECT_EQ(flag[0], 42);
}

TEST_F(MemoryOrderingTest, StreamOrderedPageableDownloadCompletesWithItsStream) {
  Stream a(device());
  auto values = random_floats(3 * staging_chunk_bytes / sizeof(float) + 9, 8);
  DeviceBuffer<float> x = upload(a, values);
  std::vector<float> out(values.size(), -999.0f);
  testing::StreamGate gate = k().hold(a);
  copy(a, x, out);  // lands once the gate opens, through host callbacks
  if (testing::StreamGate::holds_streams()) EXPECT_NE(out, values) << "not yet: the gate holds the stream";
  gate.open();
  a.synchronize();
  EXPECT_EQ(out, values);
}

// The predecessors' scenario (DESIGN 1): each of `threads` threads runs 40 identical
// requests on its own stream: upload 64 Ki floats from pageable memory, run kernels that
// also read one shared weights buffer (uploaded once, on another stream, never
// synchronized by hand), download. Every output must equal the host reference.
class PredecessorScenario : public MemoryOrderingTest, public ::testing::WithParamInterface<int> {};

TEST_P(PredecessorScenario, EveryRequestOnEveryThreadGetsTheReferenceOutput) {
  const int threads = GetParam();
  constexpr int requests = 40;
  constexpr std::size_t elements = 64 * 1024;
  // Fresh data in every run (the seed is printed): with fixed seeds, every parameter's run
  // would upload the same weights, often into the memory the previous run freed, so a
  // read that raced the upload would still find the right values.
  const unsigned seed = std::random_device{}();
  std::printf("[          ] random seed %u\n", seed);
  const auto input = random_floats(elements, seed), weights_host = random_floats(elements, seed + 1);
  std::vector<float> reference(elements);
  // The scales are powers of two, so the GPU's fused multiply-add rounds as the host does.
  for (std::size_t i = 0; i < elements; ++i) {
    float t = input[i] + weights_host[i];       // add_arrays(input, weights)
    t = t * 0.5f + 0.25f;                       // scale_offset
    t = t + weights_host[i];                    // add_arrays(t, weights)
    reference[i] = t * 2.0f - 1.0f;             // scale_offset
  }

  Stream upload_stream(device());
  DeviceBuffer<float> weights = upload(upload_stream, weights_host);  // not synchronized
  DeviceSpan<const float> w = weights;

  std::atomic<int> wrong{0}, failures{0};
  std::mutex distinct_mutex;
  std::set<std::vector<float>> distinct;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      try {
        Stream s(device());
        for (int r = 0; r < requests; ++r) {
          DeviceBuffer<float> in = upload(s, input);
          DeviceBuffer<float> tmp(s, elements, uninitialized), out(s, elements, uninitialized);
          k().add(s, in, w, tmp);
          k().scale_offset(s, tmp, out, 0.5f, 0.25f);
          k().add(s, out, w, tmp);
          k().scale_offset(s, tmp, out, 2.0f, -1.0f);
          std::vector<float> result = download(s, out);
          if (result != reference) ++wrong;
          std::lock_guard lock(distinct_mutex);
          distinct.insert(std::move(result));
        }
      } catch (const std::exception& e) {
        ++failures;
        ADD_FAILURE() << e.what();
      }
    });
  for (auto& th : pool) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(wrong.load(), 0) << "requests whose output differs from the host reference";
  EXPECT_EQ(distinct.size(), 1u) << "distinct outputs among " << threads * requests << " identical requests";
}

INSTANTIATE_TEST_SUITE_P(Threads, PredecessorScenario, ::testing::Values(1, 4, 8));

#endif  // CUDAKIT_HAVE_TEST_KERNELS

// Peer copies need two GPUs (the H200 machine has one): skipped otherwise.
TEST_F(MemoryDeviceTest, PeerCopyBetweenTwoDevicesRoundTrips) {
  if (Device::count() < 2) GTEST_SKIP() << "needs two GPUs; this machine has " << Device::count();
  Device d1 = Device::get(1);
  Stream s0(device()), s1(d1);
  auto values = random_floats(1 << 20, 31);
  DeviceBuffer<float> a = upload(s0, values);
  DeviceBuffer<float> b(s1, values.size(), uninitialized);
  poison(s1, b);
  copy(s1, a, b);  // device 0 -> device 1, on device 1's stream, ordered after the upload
  DeviceBuffer<float> c(s0, values.size(), uninitialized);
  poison(s0, c);
  copy(s0, b, c);  // and back
  EXPECT_EQ(download(s1, b), values);
  EXPECT_EQ(download(s0, c), values);
  if (device().can_access_peer(d1)) EXPECT_NO_THROW(enable_peer_access(device(), d1));
}

}  // namespace
}  // namespace cudakit
