// Declared work on the GPU (declared_work.hpp): code that cudakit did not write (runtime
// `<<<>>>` launches, raw driver calls) ordered across streams by what it declares, and
// kept alive and ordered by graphs.
//
// The ordering tests are deterministic: a gate holds stream A until the test opens it
// (stream_gate.hpp), the writer queued behind it writes fresh random values, and the
// reader on stream B must wait for it. The raw arm runs the same work without the
// declaration and must read the old values, which shows that the test can fail.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "cudakit/cudakit.hpp"
#include "gpu_fixture.hpp"
#include "runtime_helpers.cuh"

namespace cudakit {
namespace {

using testing::fresh_integers;
using testing::fresh_values;
using testing::expect_held;
using testing::GpuTest;
using testing::hold;
using testing::load_kernels;
using testing::StreamGate;

__global__ void copy_values(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
}

__global__ void add_into(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}

constexpr int block = 256;
int blocks(int n) { return (n + block - 1) / block; }

// Small integers as floats: sums of them stay exact.
std::vector<float> fresh_small_integers(std::size_t n, int lo, int hi) {
  std::vector<int> ints = fresh_integers<int>(n, lo, hi);
  return {ints.begin(), ints.end()};
}

void expect_runtime_ok(cudaError_t e) { ASSERT_EQ(e, cudaSuccess) << cudaGetErrorName(e) << ": " << cudaGetErrorString(e); }

class DeclaredWorkDeviceTest : public GpuTest {
 protected:
  static constexpr int n = 1 << 16;
};

// How the writer on stream A writes `source` into `target`: a runtime `<<<>>>` kernel, or a
// raw driver copy.
enum class Writer { runtime_kernel, driver_copy };

class CrossStreamDeclaredWork : public DeclaredWorkDeviceTest, public ::testing::WithParamInterface<Writer> {
 protected:
  void write(CUstream s, const DeviceBuffer<float>& source, DeviceBuffer<float>& target) const {
    if (GetParam() == Writer::runtime_kernel) {
      copy_values<<<blocks(n), block, 0, s>>>(source.data(), target.data(), n);
      expect_runtime_ok(cudaGetLastError());
    } else {
      check(driver::cu.MemcpyDtoDAsync(target.device_pointer(), source.device_pointer(), n * sizeof(float), s),
            "cuMemcpyDtoDAsync", Resource::none());
    }
  }
};

// Stream A holds `data` (old values) and `source` (new ones), B an `out` buffer poisoned;
// everything uploaded and idle.
struct TwoStreams {
  explicit TwoStreams(const Device& device, int n)
      : a(device), b(device), old_values(fresh_values(n)), new_values(fresh_values(n)),
        data(upload(a, old_values)), source(upload(a, new_values)), out(b, n, uninitialized) {
    fill_pattern8(b, out, 0xBD);
    a.synchronize();
    b.synchronize();
  }
  Stream a, b;
  std::vector<float> old_values, new_values;
  DeviceBuffer<float> data, source, out;
};

TEST_P(CrossStreamDeclaredWork, AReaderOnStreamBSeesTheWriteHeldOnStreamA) {
  TwoStreams t(device(), n);
  load_kernels(device(), copy_values);
  StreamGate gate = hold(t.a, device());
  enqueue(t.a, reads(t.source), writes(t.data), [&](CUstream s) { write(s, t.source, t.data); });
  enqueue(t.b, reads(t.data), writes(t.out), [&](CUstream s) {
    copy_values<<<blocks(n), block, 0, s>>>(t.data.data(), t.out.data(), n);
    expect_runtime_ok(cudaGetLastError());
  });
  expect_held(t.a, "the gate holds A");
  gate.open();
  EXPECT_EQ(download(t.b, t.out), t.new_values) << "the reader on B read before the writer on A";
}

TEST_P(CrossStreamDeclaredWork, WithoutTheDeclarationTheReaderRacesAheadOfTheWriter) {
  CUDAKIT_SKIP_UNLESS_GATES_HOLD();
  TwoStreams t(device(), n);
  load_kernels(device(), copy_values);
  StreamGate gate = hold(t.a, device());
  write(t.a.handle(), t.source, t.data);  // the same work, undeclared
  copy_values<<<blocks(n), block, 0, t.b.handle()>>>(t.data.data(), t.out.data(), n);
  expect_runtime_ok(cudaGetLastError());
  expect_held(t.a, "the gate holds A");
  t.b.synchronize();  // B's reader ran while the gate held A's writer
  gate.open();
  std::vector<float> seen(n);
  expect_runtime_ok(cudaMemcpy(seen.data(), t.out.data(), n * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_EQ(seen, t.old_values) << "without the declaration B read before A wrote: the race the test exists to catch";
  t.a.synchronize();
}

INSTANTIATE_TEST_SUITE_P(Writers, CrossStreamDeclaredWork, ::testing::Values(Writer::runtime_kernel, Writer::driver_copy),
                         [](const auto& info) { return info.param == Writer::runtime_kernel ? "RuntimeKernel" : "DriverCopy"; });

TEST_F(DeclaredWorkDeviceTest, AWriterOnStreamBWaitsForAReaderHeldOnStreamA) {
  Stream a(device()), b(device());
  auto values = fresh_values(n);
  DeviceBuffer<float> data = upload(a, values), seen(a, n, uninitialized);
  a.synchronize();
  load_kernels(device(), copy_values);
  StreamGate gate = hold(a, device());
  enqueue(a, reads(data), writes(seen), [&](CUstream s) { copy_values<<<blocks(n), block, 0, s>>>(data.data(), seen.data(), n); });
  enqueue(b, writes(data), [&](CUstream s) {
    expect_runtime_ok(cudaMemsetAsync(data.data(), 0, n * sizeof(float), s));
  });
  expect_held(a, "the gate holds A");
  gate.open();
  EXPECT_EQ(download(a, seen), values) << "the writer on B overwrote the data before A's reader read it";
  EXPECT_EQ(download(b, data), std::vector<float>(n, 0.0f));
}

TEST_F(DeclaredWorkDeviceTest, ACapturedGraphKeepsTheDeclaredBuffersAfterTheirOwnersAreGoneAndReplaysExactly) {
  Stream s(device()), other(device());
  auto x0 = fresh_small_integers(n, -8, 8), y0 = fresh_small_integers(n, -1000, 1000);
  auto x = std::make_unique<DeviceBuffer<float>>(upload(s, x0));
  auto y = std::make_unique<DeviceBuffer<float>>(upload(s, y0));
  DeviceBuffer<float> out(s, n, uninitialized);
  fill_pattern8(s, out, 0xBD);
  Graph g = capture_nonempty(s, [&] {
    enqueue(s, reads(*x), writes(*y), [&](CUstream h) { add_into<<<blocks(n), block, 0, h>>>(x->data(), y->data(), n); });
    enqueue(s, reads(*y), writes(out), [&](CUstream h) {
      expect_runtime_ok(cudaMemcpyAsync(out.data(), y->data(), n * sizeof(float), cudaMemcpyDeviceToDevice, h));
    });
  });
  x.reset();  // every owner but the graph's is gone
  y.reset();
  GraphExec exec = g.instantiate();
  constexpr int replays = 1000;
  for (int i = 0; i < replays; ++i) exec.launch(s);

  // A reader on another stream after the replays, declared: waits for the last replay,
  // which a gate holds back.
  load_kernels(device(), copy_values);
  StreamGate gate = hold(s, device());
  exec.launch(s);
  DeviceBuffer<float> copy_out(other, n, uninitialized);
  fill_pattern8(other, copy_out, 0xBD);
  enqueue(other, reads(out), writes(copy_out), [&](CUstream h) {
    copy_values<<<blocks(n), block, 0, h>>>(out.data(), copy_out.data(), n);
  });
  expect_held(s, "the gate holds the replay");
  gate.open();
  auto got = download(other, copy_out);
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(got[i], y0[i] + (replays + 1) * x0[i]) << "element " << i << " after " << replays + 1 << " replays";
}

TEST_F(DeclaredWorkDeviceTest, APeerBufferIsOrderedAcrossDevices) {
  if (Device::count() < 2) GTEST_SKIP() << "needs two GPUs; this machine has " << Device::count();
  Device other_device = Device::get(1);
  enable_peer_access(device(), other_device);
  Stream here(device()), there(other_device);
  auto values = fresh_values(n);
  DeviceBuffer<float> source = upload(there, values), remote(there, n, uninitialized), local(here, n, uninitialized);
  fill_pattern8(here, local, 0xBD);
  there.synchronize();
  load_kernels(device(), copy_values);
  load_kernels(other_device, copy_values);
  StreamGate gate = hold(there, other_device);
  enqueue(there, reads(source), writes(remote), [&](CUstream s) {
    copy_values<<<blocks(n), block, 0, s>>>(source.data(), remote.data(), n);
  });
  enqueue(here, reads(remote), writes(local), [&](CUstream s) {
    copy_values<<<blocks(n), block, 0, s>>>(remote.data(), local.data(), n);  // through peer access
  });
  expect_held(there, "the gate holds device 1's stream");
  gate.open();
  EXPECT_EQ(download(here, local), values);
}

}  // namespace
}  // namespace cudakit
