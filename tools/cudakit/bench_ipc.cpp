// Sharing between processes ("ipc" group): a device-to-device copy out of memory that
// another process shared, against the same copy out of this process's own memory, and
// the latency of an import.
//
// The other process is this command itself: the benchmark listens on a socket in a
// private directory and starts `cudakit ipc-peer SOCKET` (the hidden subcommand below),
// which allocates and exports, then waits until the benchmark says it is done. Both run
// on the same GPU.
//
// - "ipc D2D copy, pool import, 256 MiB": a copy from an imported ShareablePool
//   allocation into a local buffer (cudakit side) against a copy between two local
//   buffers of the same size (raw side: the same-process figure), read + write bytes
//   counted, timed with events. Target: at least 0.95x.
// - "ipc D2D copy, virtual-memory import, 256 MiB": the same from an allocate_shareable
//   import.
// - "ipc import latency, pool allocation": ImportedPool::import of a 1 MiB allocation and
//   its release (cudakit side) against the raw cuMemPoolImportPointer + cuMemFree of
//   the same allocation (raw side). Reported, not judged.
// - "ipc import latency, virtual memory": import_shareable of a 2 MiB allocation (import
//   the handle, reserve, map, set access) and its release; the raw side is the same
//   driver calls by hand. Reported.
#include <sys/stat.h>
#include <sys/wait.h>
#include <spawn.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/harness.hpp"
#include "cli.hpp"
#include "command.hpp"
#include "cudakit/cudakit.hpp"
#include "cudakit/ipc_channel.hpp"
#include "cudakit/shareable_memory.hpp"
#include "cudakit/shareable_pool.hpp"

extern char** environ;

namespace cudakit::tool {
namespace {

constexpr std::size_t MiB = std::size_t(1) << 20;
constexpr std::size_t copy_bytes = 256 * MiB;
constexpr std::size_t small_bytes = 1 * MiB;
constexpr std::size_t vm_small_bytes = 2 * MiB;
constexpr double ipc_bandwidth_target = 0.95;
constexpr std::chrono::seconds peer_timeout{60};

// The words of the exchange: the peer's buffers arrive in this order, then the
// benchmark says "done" (an event descriptor, since a channel carries descriptors only).
void say_done(const IpcChannel& channel) {
  IpcDescriptor d;
  d.kind = IpcKind::event;
  d.payload_bytes = 64;
  channel.send(d);
}

// ---- the peer: `cudakit ipc-peer SOCKET` ----

int run_peer(const std::string& socket, int ordinal) {
  Device device = Device::get(ordinal);
  IpcChannel channel = IpcChannel::connect(socket);
  Stream s(device);
  ShareablePool pool(device);
  DeviceBuffer<float> large = pool.allocate<float>(s, copy_bytes / sizeof(float), zeroed);
  DeviceBuffer<float> small = pool.allocate<float>(s, small_bytes / sizeof(float), zeroed);
  DeviceBuffer<float> vm_large = allocate_shareable<float>(s, copy_bytes / sizeof(float), zeroed);
  DeviceBuffer<float> vm_small = allocate_shareable<float>(s, vm_small_bytes / sizeof(float), zeroed);
  fill(s, large, 1.5f);
  fill(s, vm_large, 2.5f);
  s.synchronize();
  pool.send(channel);
  pool.send(channel, large);
  pool.send(channel, small);
  send_shareable(channel, vm_large);
  send_shareable(channel, vm_small);
  channel.receive(std::chrono::minutes(30));  // done: every import is released
  s.synchronize();
  return exit_ok;
}

CommandRun setup_peer(CLI::App& app, Invocation&) {
  auto socket = std::make_shared<std::string>();
  auto device = std::make_shared<int>(0);
  app.add_option("socket", *socket, "the benchmark's socket")->required();
  app.add_option("--device", *device, "the GPU");
  return [socket, device] { return run_peer(*socket, *device); };
}

CUDAKIT_SUBCOMMAND("ipc-peer", "the peer process of `cudakit bench --filter ipc` (started by the bench)", 90,
                   setup_peer);

// ---- the benchmark's side ----

std::string self_path() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw Error("cannot find the cudakit command: readlink(/proc/self/exe) failed");
  buf[n] = '\0';
  return buf;
}

// The peer process, waited for (and killed if it outlives the benchmark) at the end.
class Peer {
 public:
  Peer(const std::string& socket, int device) {
    std::vector<std::string> args = {self_path(), "ipc-peer", socket, "--device", std::to_string(device)};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (int rc = ::posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ); rc != 0)
      throw Error("cannot start the ipc peer: posix_spawn failed with " + std::to_string(rc));
  }
  ~Peer() {
    int status = 0;
    for (int i = 0; i < 200; ++i) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) return;
      ::usleep(50000);
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
  }
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

 private:
  pid_t pid_ = -1;
};

struct PrivateDirectory {
  std::string path;
  PrivateDirectory() {
    char name[] = "/tmp/cudakit-bench-XXXXXX";
    if (::mkdtemp(name) == nullptr) throw Error("cannot make a directory for the ipc socket");
    path = name;
  }
  ~PrivateDirectory() { ::rmdir(path.c_str()); }
};

// What the peer shared, imported.
struct Imports {
  std::optional<ImportedPool> pool;
  IpcMessage large, small, vm_large, vm_small;
};

std::vector<bench::Result> run_ipc(const bench::Context& c) {
  if (c.smoke) return {};  // needs a second process on a real GPU
  using bench::Result;
  PrivateDirectory dir;
  IpcListener listener(dir.path + "/bench");
  Peer peer(listener.path(), c.device.ordinal());
  IpcChannel channel = listener.accept(peer_timeout);
  Imports in;
  in.pool.emplace(ImportedPool::receive(channel, c.device, peer_timeout));  // the pool and its ledger
  in.large = channel.receive(peer_timeout);
  in.small = channel.receive(peer_timeout);
  in.vm_large = channel.receive(peer_timeout);
  in.vm_small = channel.receive(peer_timeout);

  Stream s(c.device);
  const std::size_t n = copy_bytes / sizeof(float);
  std::vector<Result> results;
  {
    ImportedBuffer<float> shared = in.pool->import<float>(s, in.large, n);
    ImportedBuffer<float> shared_vm = import_shareable<float>(s, in.vm_large, n);
    DeviceBuffer<float> local(s, n, zeroed), destination(s, n, zeroed);
    bench::Interleave plan = c.interleave(4);
    auto from = [&](DeviceSpan<const float> source) {
      return [&, source](int ops) {
        for (int i = 0; i < ops; ++i) copy(s, source, destination);
      };
    };
    const double moved = 2.0 * static_cast<double>(copy_bytes);
    results.push_back(bench::bandwidth_result("ipc D2D copy, pool import, 256 MiB", "ipc",
                                              bench::time_device(plan, s, from(shared.span()), from(local.span())),
                                              moved, ipc_bandwidth_target));
    results.push_back(bench::bandwidth_result("ipc D2D copy, virtual-memory import, 256 MiB", "ipc",
                                              bench::time_device(plan, s, from(shared_vm.span()), from(local.span())),
                                              moved, ipc_bandwidth_target));
    s.synchronize();
  }
  {
    // Import latency: the cudakit import and release against the driver's calls alone.
    bench::Interleave plan = c.interleave(8);
    const CUmemoryPool raw_pool = in.pool->handle();
    CUmemPoolPtrExportData data{};
    std::memcpy(data.reserved, in.small.descriptor.payload.data(), sizeof data.reserved);
    auto import_pool = [&](int ops) {
      for (int i = 0; i < ops; ++i) {
        ImportedBuffer<float> b = in.pool->import<float>(s, in.small, small_bytes / sizeof(float));
        b.release();
        s.synchronize();  // the release is stream-ordered: done before the next import, as cuMemFree is
      }
    };
    auto raw_import_pool = [&](int ops) {
      for (int i = 0; i < ops; ++i) {
        CUdeviceptr p = 0;
        bench::check_raw(bench::raw_entry<driver::EntryId::MemPoolImportPointer>()(&p, raw_pool, &data),
                         "cuMemPoolImportPointer");
        bench::check_raw(bench::raw_entry<driver::EntryId::MemFree>()(p), "cuMemFree");
      }
    };
    results.push_back(bench::cost_result("ipc import latency, pool allocation 1 MiB", "ipc",
                                         bench::time_host(plan, import_pool, raw_import_pool), 0));
    auto import_vm = [&](int ops) {
      for (int i = 0; i < ops; ++i) {
        // A message's file is consumed by nothing: the import duplicates what it needs.
        ImportedBuffer<float> b = import_shareable<float>(s, in.vm_small, vm_small_bytes / sizeof(float));
        b.release();
      }
    };
    results.push_back(bench::cost_result("ipc import latency, virtual memory 2 MiB", "ipc",
                                         bench::time_host(plan, import_vm, import_vm), 0));
  }
  s.synchronize();
  say_done(channel);
  return results;
}

CUDAKIT_BENCHMARK("ipc", "ipc", bench::QuickRun::skip, run_ipc);

}  // namespace
}  // namespace cudakit::tool
