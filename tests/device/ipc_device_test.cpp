// Two real processes on one GPU share memory and events (shareable_pool.hpp,
// shareable_memory.hpp, shared_event.hpp). The parent is the producer; it starts this
// binary again as the consumer (child_process.hpp), which connects to the parent's
// socket, imports, and reports through its exit status and output.
//
// - A producer writes behind a gate (a kernel that holds its stream until the test
//   opens it): the consumer's stream waits on the shared event, and the consumer checks
//   every element (fresh random data; the buffer held a poison value before the write).
//   The gate opens only after the consumer said it queued its copy, so a consumer that
//   did not wait would read the poison.
// - A consumer of another user is refused by the producer's policy (and refuses it).
// - A descriptor for memory the producer already freed is refused (IpcFailure::stale).
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "cudakit/cudakit.hpp"
#include "cudakit/ipc_channel.hpp"
#include "cudakit/shareable_memory.hpp"
#include "cudakit/shareable_pool.hpp"
#include "cudakit/shared_event.hpp"
#include "gpu_fixture.hpp"
#include "stream_gate.hpp"

#ifdef CUDAKIT_HAVE_TEST_KERNELS
#include "test_kernels.hpp"
#endif

namespace cudakit {
namespace {

using testing::ChildResult;
using testing::GpuTest;

constexpr const char* child_env = "CUDAKIT_IPC_CHILD";
constexpr std::size_t n = (std::size_t(16) << 20) / sizeof(float) + 3;  // 16 MiB and a bit
constexpr float poison = -12345.0f;
constexpr std::chrono::seconds exchange_timeout{60};

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}
bool in_child() { return env(child_env) == "1"; }

std::vector<float> random_floats(std::size_t count, unsigned seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> value(-1000.0f, 1000.0f);
  std::vector<float> v(count);
  for (auto& x : v) x = value(generator);
  return v;
}

// A socket directory the consumer (of any user) can enter.
struct SocketDirectory {
  std::string path;
  SocketDirectory() {
    char name[] = "/tmp/cudakit-ipc-XXXXXX";
    path = ::mkdtemp(name);
    ::chmod(path.c_str(), 0755);
  }
  ~SocketDirectory() { ::rmdir(path.c_str()); }
};

// Runs the child test `test` of this binary with `vars` in its environment, on a thread,
// while the parent serves it.
class Consumer {
 public:
  Consumer(const char* test, std::vector<std::string> vars) {
    vars.push_back(std::string(child_env) + "=1");
    thread_ = std::thread([this, test, vars] {
      result_ = testing::run_program(testing::self_path(),
                                     {std::string("--gtest_filter=") + test, "--gtest_also_run_disabled_tests",
                                      "--gtest_color=no"},
                                     testing::environment_with(vars, {"GTEST_"}), 120);
    });
  }
  ChildResult finish() {
    thread_.join();
    return result_;
  }
  ~Consumer() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::thread thread_;
  ChildResult result_;
};

// What a consumer says to the producer: one event descriptor per word, since a channel
// carries descriptors only. The words are told apart by their order.
void say(const IpcChannel& channel) {
  IpcDescriptor d;
  d.kind = IpcKind::event;
  d.payload_bytes = 64;
  channel.send(d);
}

#ifdef CUDAKIT_HAVE_TEST_KERNELS

// The embedded test image's gate and copy kernels, launched raw.
class GateKernels {
 public:
  // The primary context is retained for the kernels' life: a temporary retain would be the
  // only one when this is the process's first use of the device, and its release would
  // destroy the context the module was loaded into.
  explicit GateKernels(const Device& device) : device_(device), context_(Context::primary(device)) {
    context_.make_current();
    auto image = cudakit_kernels::test_fatbin();
    check(driver::cu.ModuleLoadDataEx(&module_, image.data(), 0, nullptr, nullptr), "cuModuleLoadDataEx",
          Resource::none());
    check(driver::cu.ModuleGetFunction(&gate_, module_, "wait_for_gate"), "cuModuleGetFunction", Resource::none());
    check(driver::cu.ModuleGetFunction(&copy_, module_, "slow_copy"), "cuModuleGetFunction", Resource::none());
  }
  ~GateKernels() { (void)driver::cu.ModuleUnload(module_); }

  testing::StreamGate hold(StreamRef s) const {
    return testing::StreamGate(s, device_, [this](StreamRef on, int* flag, long long max_cycles) {
      void* args[] = {&flag, &max_cycles};
      launch(gate_, on, 1, args);
    });
  }
  // out = in, as a tracked write of `out` on `s`.
  void copy(StreamRef s, DeviceSpan<const float> in, DeviceSpan<float> out) const {
    in.use(s, Access::read);
    out.use(s, Access::write);
    CUdeviceptr i = in.device_pointer(), o = out.device_pointer();
    int count = static_cast<int>(out.size());
    long long cycles = 0;
    void* args[] = {&i, &o, &count, &cycles};
    launch(copy_, s, (count + 255) / 256, args);
  }

 private:
  void launch(CUfunction f, StreamRef s, unsigned grid, void** args) const {
    context_.make_current();
    check(driver::cu.LaunchKernel(f, grid, 1, 1, grid == 1 ? 1 : 256, 1, 1, 0, s.handle(), args, nullptr),
          "cuLaunchKernel", Resource::none());
  }
  Device device_;
  Context context_;
  CUmodule module_ = nullptr;
  CUfunction gate_ = nullptr, copy_ = nullptr;
};

class IpcDeviceTest : public GpuTest {};

// ---- producer and consumer of one GPU ----

TEST_F(IpcDeviceTest, AConsumerProcessWaitsOnTheSharedEventAndSeesEveryElement) {
  CUDAKIT_SKIP_UNLESS_GATES_HOLD();
  if (in_child()) GTEST_SKIP() << "the parent's test";
  const unsigned seed = std::random_device{}();
  const std::vector<float> data = random_floats(n, seed);
  SocketDirectory dir;
  IpcListener listener(dir.path + "/producer");
  Consumer consumer("IpcChild.DISABLED_ConsumesBehindTheEvent",
                    {"CUDAKIT_IPC_SOCKET=" + listener.path(), "CUDAKIT_IPC_SEED=" + std::to_string(seed)});
  {
    GateKernels kernels(device());
    Stream s(device());
    ShareablePool pool(device());
    DeviceBuffer<float> source = upload(s, data);
    DeviceBuffer<float> shared = pool.allocate<float>(s, n, uninitialized);
    fill(s, shared, poison);
    auto shared_vm = allocate_shareable<float>(s, n, zeroed);
    fill(s, shared_vm, poison);
    s.synchronize();
    SharedEvent ready(device());
    IpcChannel channel = listener.accept(exchange_timeout);
    {
      testing::StreamGate gate = kernels.hold(s);
      kernels.copy(s, source, shared);
      kernels.copy(s, source, shared_vm);
      ready.record_after_writes(s, shared);
      pool.send(channel);
      pool.send(channel, shared);
      send_shareable(channel, shared_vm);
      ready.send(channel);
      channel.receive(exchange_timeout);  // "queued": the consumer's copies wait on the event
      testing::expect_held(s, "the gate holds the producer's write");
      gate.open();
    }
    channel.receive(exchange_timeout);  // "released": the producer may free
    s.synchronize();
  }
  ChildResult r = consumer.finish();
  EXPECT_TRUE(r.succeeded()) << r.output;
  EXPECT_NE(r.output.find("IPC-CHILD: every element matched"), std::string::npos) << r.output;
}

TEST(IpcChild, DISABLED_ConsumesBehindTheEvent) {
  if (!in_child()) GTEST_SKIP() << "run by AConsumerProcessWaitsOnTheSharedEventAndSeesEveryElement";
  Device device = Device::get(0);
  const std::vector<float> expected = random_floats(n, static_cast<unsigned>(std::stoul(env("CUDAKIT_IPC_SEED"))));
  IpcChannel channel = IpcChannel::connect(env("CUDAKIT_IPC_SOCKET"));
  Stream s(device);
  ImportedPool pool = ImportedPool::receive(channel, device, exchange_timeout);
  ImportedBuffer<float> from_pool = pool.receive<float>(channel, s, n, exchange_timeout);
  ImportedBuffer<float> from_vm = receive_shareable<float>(channel, s, n, exchange_timeout);
  ImportedEvent ready = ImportedEvent::receive(channel, device, exchange_timeout);
  from_pool.after(ready, s);
  from_vm.after(ready, s);
  PinnedBuffer<float> seen_pool(n, uninitialized), seen_vm(n, uninitialized);
  copy(s, from_pool.span(), seen_pool);
  copy(s, from_vm.span(), seen_vm);
  say(channel);  // queued: the producer opens its gate now
  s.synchronize();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) wrong += (seen_pool[i] != expected[i]) + (seen_vm[i] != expected[i]);
  EXPECT_EQ(wrong, 0u) << "elements that differ (" << poison << " is the value before the producer's write)";
  from_pool.release();
  from_vm.release();
  EXPECT_THROW((void)from_pool.span(), EmptyHandle);
  s.synchronize();
  say(channel);  // released
  if (wrong == 0) std::printf("IPC-CHILD: every element matched\n");
}

#endif  // CUDAKIT_HAVE_TEST_KERNELS

// ---- hostile peers and stale descriptors ----

class IpcRefusalDeviceTest : public GpuTest {};

TEST_F(IpcRefusalDeviceTest, AConsumerOfAnotherUserIsRefusedByPolicy) {
  if (in_child()) GTEST_SKIP() << "the parent's test";
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to run the consumer as user 65534";
  SocketDirectory dir;
  IpcListener listener(dir.path + "/producer");
  ::chmod(listener.path().c_str(), 0666);  // reachable by the other user; the policy still refuses it
  Consumer consumer("IpcChild.DISABLED_ConnectsAsAnotherUser", {"CUDAKIT_IPC_SOCKET=" + listener.path()});
  std::string message;
  try {
    listener.accept(exchange_timeout);
  } catch (const IpcError& e) {
    EXPECT_EQ(e.reason(), IpcFailure::peer_refused);
    message = e.what();
  }
  EXPECT_NE(message.find("uid 65534"), std::string::npos) << message;
  ChildResult r = consumer.finish();
  EXPECT_TRUE(r.succeeded()) << r.output;
}

TEST(IpcChild, DISABLED_ConnectsAsAnotherUser) {
  if (!in_child()) GTEST_SKIP() << "run by AConsumerOfAnotherUserIsRefusedByPolicy";
  ASSERT_EQ(::setgid(65534), 0);
  ASSERT_EQ(::setuid(65534), 0);
  try {
    IpcChannel::connect(env("CUDAKIT_IPC_SOCKET"));
    ADD_FAILURE() << "a producer of another user (root) was accepted";
  } catch (const IpcError& e) {
    EXPECT_EQ(e.reason(), IpcFailure::peer_refused) << e.what();
  }
}

TEST_F(IpcRefusalDeviceTest, ADescriptorOfMemoryAlreadyFreedIsRefused) {
  if (in_child()) GTEST_SKIP() << "the parent's test";
  SocketDirectory dir;
  IpcListener listener(dir.path + "/producer");
  Consumer consumer("IpcChild.DISABLED_ImportsFreedMemory", {"CUDAKIT_IPC_SOCKET=" + listener.path()});
  Stream s(device());
  ShareablePool pool(device());
  IpcDescriptor stale;
  {
    DeviceBuffer<float> gone = pool.allocate<float>(s, n, zeroed);
    stale = pool.descriptor(gone);  // before the pool is sent, while the allocation is queued
  }
  s.synchronize();
  pool.ref().trim_to(0);  // the memory goes back to the device
  IpcChannel channel = listener.accept(exchange_timeout);
  pool.send(channel);
  channel.send(stale);
  channel.receive(exchange_timeout);  // done
  ChildResult r = consumer.finish();
  EXPECT_TRUE(r.succeeded()) << r.output;
  EXPECT_NE(r.output.find("IPC-CHILD: refused"), std::string::npos) << r.output;
}

// The driver's rule the fake imitates and ShareablePool's constructor meets: an allocation
// of a pool never exported is refused by cuMemPoolExportPointer; once the pool's handle was
// exported, the same allocation exports.
TEST_F(IpcRefusalDeviceTest, TheDriverExportsAnAllocationOnlyFromAPoolAlreadyShared) {
  if (in_child()) GTEST_SKIP() << "the parent's test";
  using driver::cu;
  Stream s(device());
  Context context = Context::primary(device());
  context.make_current();
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = device().handle();
  CUmemoryPool pool = nullptr;
  ASSERT_EQ(cu.MemPoolCreate(&pool, &props), CUDA_SUCCESS);
  CUdeviceptr p = 0;
  ASSERT_EQ(cu.MemAllocFromPoolAsync(&p, 1 << 20, pool, s.handle()), CUDA_SUCCESS);
  ASSERT_EQ(cu.StreamSynchronize(s.handle()), CUDA_SUCCESS);
  CUmemPoolPtrExportData data{};
  EXPECT_EQ(cu.MemPoolExportPointer(&data, p), CUDA_ERROR_INVALID_VALUE) << "a pool never shared";
  int fd = -1;
  ASSERT_EQ(cu.MemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemPoolExportPointer(&data, p), CUDA_SUCCESS) << "the same allocation, the pool shared";
  ::close(fd);
  EXPECT_EQ(cu.MemFreeAsync(p, s.handle()), CUDA_SUCCESS);
  EXPECT_EQ(cu.StreamSynchronize(s.handle()), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemPoolDestroy(pool), CUDA_SUCCESS);
}

TEST(IpcChild, DISABLED_ImportsFreedMemory) {
  if (!in_child()) GTEST_SKIP() << "run by ADescriptorOfMemoryAlreadyFreedIsRefused";
  Device device = Device::get(0);
  IpcChannel channel = IpcChannel::connect(env("CUDAKIT_IPC_SOCKET"));
  Stream s(device);
  ImportedPool pool = ImportedPool::receive(channel, device, exchange_timeout);
  try {
    pool.receive<float>(channel, s, n, exchange_timeout);
    ADD_FAILURE() << "memory the producer freed was imported";
  } catch (const IpcError& e) {
    EXPECT_EQ(e.reason(), IpcFailure::stale) << e.what();
    std::printf("IPC-CHILD: refused: %s\n", e.what());
  }
  s.synchronize();
  say(channel);
}

}  // namespace
}  // namespace cudakit
