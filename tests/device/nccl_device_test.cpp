// NCCL and work across GPUs on real devices.
//
// One GPU (the H200): a one-rank communicator runs every collective on fresh random data
// against the host, in and out of a capture (replays follow new inputs); and the hang
// guard: in a child process, a communicator of two ranks that only one rank joins times
// out with a clear error, and the child exits cleanly.
//
// Two or more GPUs (skipped with fewer): every collective over every GPU against the
// host, a kernel on GPU 1 reading GPU 0's buffer through peer access while GPU 0 still
// writes it (ordered like any cross-stream use), peer copies ordering both ends, and the
// data-parallel example as two processes bootstrapped over TCP.
//
// NCCL must be installed (libnccl.so.2, or CUDAKIT_LIBNCCL); without it the tests skip,
// and with CUDAKIT_REQUIRE_GPU=1 they fail. NCCL_NVLS_ENABLE=0 is set by cudakit.
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "child_process.hpp"
#include "gpu_fixture.hpp"

#ifdef CUDAKIT_HAVE_TEST_KERNELS
#include "test_kernels.hpp"
#endif

namespace cudakit {
namespace {

using namespace std::chrono_literals;
using testing::GpuTest;

unsigned fresh_seed() { return std::random_device{}(); }

// Fresh random values in [1, 9) rounded to quarters: sums of a few are exact in float.
std::vector<float> random_quarters(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(4, 35);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(d(rng)) / 4.0f;
  return v;
}

class NcclDeviceTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    try {
      nccl::version();
    } catch (const nccl::NcclUnavailable& e) {
      if (testing::gpu_required()) FAIL() << "CUDAKIT_REQUIRE_GPU=1 but: " << e.what();
      GTEST_SKIP() << e.what();
    }
  }
};

// ---- one GPU: a one-rank communicator ----

TEST_F(NcclDeviceTest, AOneRankCommunicatorRunsEveryCollective) {
  nccl::Communicator comm(nccl::UniqueId::generate(), 1, 0, device());
  EXPECT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "0");
  Stream s(device());
  const std::size_t n = 1 << 20;
  auto host = random_quarters(n, fresh_seed());
  DeviceBuffer<float> x = upload(s, host);
  DeviceBuffer<float> y(s, n, uninitialized);
  auto run = [&](const char* what, auto&& collective) {
    fill_pattern8(s, y, 0xBD);  // poison: a NaN
    collective();
    EXPECT_EQ(download(s, y), host) << what;
  };
  run("all_reduce", [&] { nccl::all_reduce(comm, s, x, y); });
  run("reduce", [&] { nccl::reduce(comm, s, x, y, 0, nccl::ReduceOp::max); });
  run("broadcast", [&] { nccl::broadcast(comm, s, x, y, 0); });
  run("all_gather", [&] { nccl::all_gather(comm, s, x, y); });
  run("reduce_scatter", [&] { nccl::reduce_scatter(comm, s, x, y); });
  run("send and recv to itself", [&] {
    nccl::group([&] {
      nccl::send(comm, s, x, 0);
      nccl::recv(comm, s, y, 0);
    });
  });
  comm.synchronize(s);
  comm.destroy();
}

template <class T>
void expect_identity_all_reduce(const nccl::Communicator& comm, StreamRef s, const std::vector<T>& host) {
  DeviceBuffer<T> x = upload(s, host);
  DeviceBuffer<T> y(s, host.size(), uninitialized);
  fill_pattern8(s, y, 0xBD);
  nccl::all_reduce(comm, s, x, y, nccl::ReduceOp::sum);
  auto out = download(s, y);
  EXPECT_EQ(std::memcmp(out.data(), host.data(), host.size() * sizeof(T)), 0) << typeid(T).name();
}

TEST_F(NcclDeviceTest, EveryElementTypeGoesThroughUnchangedOnOneRank) {
  nccl::Communicator comm(nccl::UniqueId::generate(), 1, 0, device());
  Stream s(device());
  std::mt19937 rng(fresh_seed());
  auto make = [&](auto zero) {
    std::vector<decltype(zero)> v(4099);
    for (auto& e : v) e = static_cast<decltype(zero)>(rng() % 100 + 1);
    return v;
  };
  expect_identity_all_reduce(comm, s, make(std::int8_t{}));
  expect_identity_all_reduce(comm, s, make(std::uint8_t{}));
  expect_identity_all_reduce(comm, s, make(std::int32_t{}));
  expect_identity_all_reduce(comm, s, make(std::uint32_t{}));
  expect_identity_all_reduce(comm, s, make(std::int64_t{}));
  expect_identity_all_reduce(comm, s, make(std::uint64_t{}));
  expect_identity_all_reduce(comm, s, make(double{}));
  std::vector<__half> h(4099);
  std::vector<__nv_bfloat16> b(4099);
  for (std::size_t i = 0; i < h.size(); ++i) {
    h[i] = __float2half(static_cast<float>(rng() % 100 + 1));
    b[i] = __float2bfloat16(static_cast<float>(rng() % 100 + 1));
  }
  expect_identity_all_reduce(comm, s, h);
  expect_identity_all_reduce(comm, s, b);
}

TEST_F(NcclDeviceTest, ACapturedAllReduceReplaysOnNewInputs) {
  nccl::Communicator comm(nccl::UniqueId::generate(), 1, 0, device());
  Stream s(device());
  const std::size_t n = 65536;
  DeviceBuffer<float> x(s, n, uninitialized), y(s, n, uninitialized);
  fill(s, x, 1.0f);
  nccl::all_reduce(comm, s, x, y);  // once outside the capture: NCCL sets up its connections
  s.synchronize();
  Graph graph = capture_nonempty(s, [&] { nccl::all_reduce(comm, s, x, y); });
  GraphExec exec = graph.instantiate();
  for (int round = 0; round < 3; ++round) {
    auto host = random_quarters(n, fresh_seed() + round);
    copy(s, std::span<const float>(host), x);
    fill_pattern8(s, y, 0xBD);
    exec.launch(s);
    EXPECT_EQ(download(s, y), host) << "replay " << round;
  }
  comm.synchronize(s);
}

TEST_F(NcclDeviceTest, ASplitOfOneRankMakesAWorkingCommunicatorAndNoColorMakesNone) {
  nccl::Communicator comm(nccl::UniqueId::generate(), 1, 0, device());
  nccl::Communicator left_out = comm.split(nccl::Communicator::no_color, 0);
  EXPECT_FALSE(left_out) << "no_color leaves the rank out";
  nccl::Communicator half = comm.split(3, 0);
  ASSERT_TRUE(half);
  EXPECT_EQ(half.size(), 1);
  EXPECT_EQ(half.rank(), 0);
  EXPECT_NE(half.handle(), comm.handle());
  Stream s(device());
  auto host = random_quarters(1 << 16, fresh_seed());
  DeviceBuffer<float> x = upload(s, host);
  DeviceBuffer<float> y(s, host.size(), uninitialized);
  fill_pattern8(s, y, 0xBD);  // poison: a NaN
  nccl::all_reduce(half, s, x, y);
  EXPECT_EQ(download(s, y), host);
  half.synchronize(s);
  half.destroy();
  comm.destroy();
}

TEST_F(NcclDeviceTest, RegisteredBuffersWorkLikeAnyOther) {
  nccl::Communicator comm(nccl::UniqueId::generate(), 1, 0, device());
  Stream s(device());
  auto host = random_quarters(1 << 16, fresh_seed());
  DeviceBuffer<float> x = upload(s, host);
  try {
    nccl::Registration reg(comm, x);
    nccl::all_reduce_in_place(comm, s, x);
    EXPECT_EQ(download(s, x), host);
  } catch (const nccl::NcclUnavailable& e) {
    GTEST_SKIP() << e.what();
  }
}

// ---- the hang guard, in a child process ----

constexpr const char* hang_child_test = "NcclHangChild.DISABLED_APeerThatNeverJoins";
constexpr const char* hang_child_env = "CUDAKIT_NCCL_HANG_CHILD";

TEST(NcclHangChild, DISABLED_APeerThatNeverJoins) {
  if (std::getenv(hang_child_env) == nullptr) GTEST_SKIP() << "runs only as the hang guard's child";
  nccl::Options options;
  options.timeout = 3s;
  auto start = std::chrono::steady_clock::now();
  try {
    nccl::Communicator comm(nccl::UniqueId::generate(), 2, 0, Device::get(0), options);
    std::printf("HANG-CHILD: FAIL: a communicator of 2 ranks was made with 1\n");
  } catch (const nccl::NcclTimeout& e) {
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("HANG-CHILD: timeout after %.1f s: %s\n", s, e.what());
  }
  std::fflush(stdout);
}

TEST_F(NcclDeviceTest, APeerThatNeverJoinsTimesOutWithAClearErrorAndTheProcessExitsCleanly) {
  auto child = testing::run_this_test_as_child(hang_child_test, hang_child_env, 60);
  std::printf("---- the child's output ----\n%s---- end ----\n", child.output.c_str());
  ASSERT_FALSE(child.timed_out) << "the child hung: killed after 60 s";
  EXPECT_TRUE(child.succeeded()) << "the child did not exit cleanly";
  EXPECT_NE(child.output.find("HANG-CHILD: timeout after"), std::string::npos);
  EXPECT_NE(child.output.find("ncclCommInitRankConfig on rank 0 of 2 (device 0): ncclInProgress"), std::string::npos);
  EXPECT_NE(child.output.find("did not finish within 3 s (Options::timeout); the communicator was aborted"),
            std::string::npos);
}

// ---- two or more GPUs ----

TEST_F(NcclDeviceTest, EveryCollectiveOverEveryGpuMatchesTheHost) {
  if (Device::count() < 2) GTEST_SKIP() << "needs 2 GPUs; this machine has " << Device::count();
  auto devices = Device::all();
  const int g = static_cast<int>(devices.size());
  auto comms = nccl::Communicator::create_all(devices);
  std::vector<Stream> streams;
  const std::size_t n = 1 << 18;
  std::vector<std::vector<float>> host;
  std::vector<DeviceBuffer<float>> send, recv, wide;
  const unsigned seed = fresh_seed();
  for (int r = 0; r < g; ++r) {
    streams.emplace_back(devices[r]);
    host.push_back(random_quarters(n * g, seed + r));
    send.push_back(upload(streams[r], host[r]));
    recv.emplace_back(streams[r], n * g, uninitialized);
    wide.emplace_back(streams[r], n * g * g, uninitialized);
  }
  auto each = [&](auto&& f) { nccl::group([&] { for (int r = 0; r < g; ++r) f(r); }); };
  auto poison = [&] { for (int r = 0; r < g; ++r) fill_pattern8(streams[r], recv[r], 0xBD); };

  poison();
  each([&](int r) { nccl::all_reduce(comms[r], streams[r], send[r], recv[r]); });
  for (int r = 0; r < g; ++r) {
    auto out = download(streams[r], recv[r]);
    for (std::size_t i = 0; i < out.size(); ++i) {
      float sum = 0;
      for (int k = 0; k < g; ++k) sum += host[k][i];
      ASSERT_EQ(out[i], sum) << "all_reduce, rank " << r << " element " << i;
    }
  }
  poison();
  each([&](int r) { nccl::reduce(comms[r], streams[r], send[r], recv[r], g - 1, nccl::ReduceOp::max); });
  auto out = download(streams[g - 1], recv[g - 1]);
  for (std::size_t i = 0; i < out.size(); ++i) {
    float m = host[0][i];
    for (int k = 1; k < g; ++k) m = std::max(m, host[k][i]);
    ASSERT_EQ(out[i], m) << "reduce max at " << i;
  }
  poison();
  each([&](int r) { nccl::broadcast(comms[r], streams[r], send[r], recv[r], 1); });
  for (int r = 0; r < g; ++r) ASSERT_EQ(download(streams[r], recv[r]), host[1]) << "broadcast to rank " << r;
  each([&](int r) { nccl::all_gather(comms[r], streams[r], send[r], wide[r]); });
  for (int r = 0; r < g; ++r) {
    auto all = download(streams[r], wide[r]);
    for (int k = 0; k < g; ++k)
      ASSERT_TRUE(std::equal(host[k].begin(), host[k].end(), all.begin() + k * n * g)) << "all_gather block " << k;
  }
  std::vector<DeviceBuffer<float>> block;
  for (int r = 0; r < g; ++r) block.emplace_back(streams[r], n, uninitialized);
  each([&](int r) { nccl::reduce_scatter(comms[r], streams[r], send[r], block[r]); });
  for (int r = 0; r < g; ++r) {
    auto b = download(streams[r], block[r]);
    for (std::size_t i = 0; i < n; ++i) {
      float sum = 0;
      for (int k = 0; k < g; ++k) sum += host[k][r * n + i];
      ASSERT_EQ(b[i], sum) << "reduce_scatter, rank " << r << " element " << i;
    }
  }
  poison();
  each([&](int r) {  // a ring: each rank sends to the next and receives from the previous
    nccl::send(comms[r], streams[r], send[r], (r + 1) % g);
    nccl::recv(comms[r], streams[r], recv[r], (r + g - 1) % g);
  });
  for (int r = 0; r < g; ++r) ASSERT_EQ(download(streams[r], recv[r]), host[(r + g - 1) % g]) << "ring to " << r;
}

#ifdef CUDAKIT_HAVE_TEST_KERNELS
TEST_F(NcclDeviceTest, AKernelOnGpu1ReadingGpu0sBufferWaitsForItsWriter) {
  if (Device::count() < 2) GTEST_SKIP() << "needs 2 GPUs; this machine has " << Device::count();
  Device d0 = Device::get(0), d1 = Device::get(1);
  if (!d1.can_access_peer(d0)) GTEST_SKIP() << "device 1 cannot access device 0's memory";
  enable_peer_access(d1, d0);
  Module m0 = Module::load(d0, cudakit_kernels::test_fatbin()), m1 = Module::load(d1, cudakit_kernels::test_fatbin());
  Stream s0(d0), s1(d1);
  const int n = 1 << 16;
  auto host = random_quarters(n, fresh_seed());
  DeviceBuffer<float> src = upload(s0, host);
  DeviceBuffer<float> x(s0, n, uninitialized), y(s1, n, uninitialized);
  fill_pattern8(s0, x, 0xBD);
  fill_pattern8(s1, y, 0xBD);
  // A slow writer of x on GPU 0 (about 50 ms), then a reader of x on GPU 1.
  long long cycles = cudakit::testing::spin_cycles(d0, 50);
  launch(s0, m0.kernel<void(const float*, float*, int, long long)>("slow_copy"), {grid_for(n, 256), 256},
         std::as_const(src), x, n, cycles);
  launch(s1, m1.kernel<void(const float*, float*, float, float, int)>("scale_offset"), {grid_for(n, 256), 256},
         std::as_const(x), y, 2.0f, 1.0f, n);
  auto out = download(s1, y);
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], host[i] * 2.0f + 1.0f) << i;
  // And the writer of x on GPU 0 waits for the reader on GPU 1.
  launch(s1, m1.kernel<void(const float*, float*, int, long long)>("slow_copy"), {grid_for(n, 256), 256},
         std::as_const(x), y, n, cycles);
  fill(s0, x, -1.0f);
  out = download(s1, y);
  EXPECT_EQ(out, host) << "the slow reader on GPU 1 saw the later fill";
}
#endif

TEST_F(NcclDeviceTest, APeerCopyOrdersBothOfItsEnds) {
  if (Device::count() < 2) GTEST_SKIP() << "needs 2 GPUs; this machine has " << Device::count();
  Device d0 = Device::get(0), d1 = Device::get(1);
  Stream s0(d0), s1(d1), t1(d1);
  const std::size_t n = 1 << 24;
  auto host = random_quarters(n, fresh_seed());
  DeviceBuffer<float> a = upload(s0, host);
  DeviceBuffer<float> b(t1, n, uninitialized);
  fill_pattern8(t1, b, 0xBD);
  copy(s1, a, b);       // reads a (GPU 0), writes b (GPU 1), on a third stream
  fill(s0, a, -1.0f);   // must wait for the copy's read
  EXPECT_EQ(download(t1, b), host) << "b's own stream waits for the copy's write";
  EXPECT_EQ(download(s0, a), std::vector<float>(n, -1.0f));
}

// A free port on the loopback address for the two-process test.
int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// The example's binary: CUDAKIT_EXAMPLE_DIR, else beside this binary (the device bundle's
// examples/), else the build tree's.
std::string example_path(const char* name) {
  std::vector<std::string> dirs;
  if (const char* d = std::getenv("CUDAKIT_EXAMPLE_DIR")) dirs.push_back(d);
  std::string self = testing::self_path();
  std::string here = self.substr(0, self.find_last_of('/'));
  dirs.push_back(here + "/examples");
  dirs.push_back(here + "/../examples");
  for (const auto& d : dirs)
    if (access((d + "/" + name).c_str(), X_OK) == 0) return d + "/" + name;
  return {};
}

TEST_F(NcclDeviceTest, TheDataParallelStepRunsAsTwoProcesses) {
  if (Device::count() < 2) GTEST_SKIP() << "needs 2 GPUs; this machine has " << Device::count();
  std::string binary = example_path("data_parallel_rank");
  if (binary.empty()) GTEST_SKIP() << "data_parallel_rank not found (set CUDAKIT_EXAMPLE_DIR)";
  std::string address = "127.0.0.1:" + std::to_string(free_port());
  std::vector<testing::ChildResult> results(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      results[r] = testing::run_program(
          binary, {}, testing::environment_with({"CUDAKIT_RANK=" + std::to_string(r), "CUDAKIT_RANKS=2",
                                                 "CUDAKIT_RENDEZVOUS=" + address}),
          120);
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    std::printf("---- rank %d ----\n%s", r, results[r].output.c_str());
    EXPECT_TRUE(results[r].succeeded()) << "rank " << r;
    EXPECT_NE(results[r].output.find("ok:"), std::string::npos) << "rank " << r;
  }
}

}  // namespace
}  // namespace cudakit
