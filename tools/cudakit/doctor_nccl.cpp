// The doctor's multi-GPU check, on each device: a one-rank NCCL communicator's all-reduce
// on fresh random data and its capture and replay on new inputs; with several GPUs also
// peer access from this device to every other one (a peer copy checked), and, on device
// 0, an all-reduce over every GPU checked against the host. NVLink multicast stays off
// (NCCL_NVLS_ENABLE=0 unless set). Without NCCL the check says so and passes: NCCL is
// optional for cudakit.
#include <random>
#include <string>
#include <vector>

#include "command.hpp"
#include "cudakit/cudakit.hpp"

namespace cudakit::tool {
namespace {

std::vector<float> random_quarters(std::size_t n) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> d(4, 35);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(d(rng)) / 4.0f;
  return v;
}

std::string first_difference(const std::vector<float>& got, const std::vector<float>& expect, const char* what) {
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != expect[i])
      return std::string(what) + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " +
             std::to_string(expect[i]);
  return {};
}

std::string one_rank(const Device& d) {
  nccl::Options options;
  options.timeout = std::chrono::seconds(60);
  nccl::Communicator comm(nccl::UniqueId::generate(), 1, 0, d, options);
  Stream s(d);
  const std::size_t n = 1 << 20;
  auto host = random_quarters(n);
  DeviceBuffer<float> x = upload(s, host), y(s, n, uninitialized);
  fill_pattern8(s, y, 0xBD);
  nccl::all_reduce(comm, s, x, y);
  if (auto why = first_difference(download(s, y), host, "1-rank all-reduce"); !why.empty()) return why;
  Graph graph = capture_nonempty(s, [&] { nccl::all_reduce(comm, s, x, y); });
  GraphExec exec = graph.instantiate();
  host = random_quarters(n);
  copy(s, std::span<const float>(host), x);
  fill_pattern8(s, y, 0xBD);
  exec.launch(s);
  if (auto why = first_difference(download(s, y), host, "captured all-reduce, replayed"); !why.empty()) return why;
  comm.synchronize(s);
  return {};
}

std::string peers(const Device& d) {
  for (const Device& other : Device::all()) {
    if (other == d) continue;
    if (d.can_access_peer(other)) enable_peer_access(d, other);
    Stream s(d), t(other);
    const std::size_t n = 1 << 22;
    auto host = random_quarters(n);
    DeviceBuffer<float> theirs = upload(t, host), mine(s, n, uninitialized);
    copy(s, std::as_const(theirs), mine);
    if (auto why = first_difference(download(s, mine), host, ("peer copy from device " + std::to_string(other.ordinal())).c_str());
        !why.empty())
      return why;
  }
  return {};
}

std::string every_gpu() {
  auto devices = Device::all();
  const int g = static_cast<int>(devices.size());
  nccl::Options options;
  options.timeout = std::chrono::seconds(60);
  auto comms = nccl::Communicator::create_all(devices, options);
  const std::size_t n = 1 << 20;
  std::vector<std::unique_ptr<Stream>> streams;
  std::vector<DeviceBuffer<float>> bufs;
  std::vector<float> sum(n, 0.0f);
  for (int r = 0; r < g; ++r) {
    streams.push_back(std::make_unique<Stream>(devices[r]));
    auto host = random_quarters(n);
    for (std::size_t i = 0; i < n; ++i) sum[i] += host[i];
    bufs.push_back(upload(*streams[r], host));
  }
  nccl::group([&] { for (int r = 0; r < g; ++r) nccl::all_reduce_in_place(comms[r], *streams[r], bufs[r]); });
  for (int r = 0; r < g; ++r)
    if (auto why = first_difference(download(*streams[r], bufs[r]), sum,
                                    (std::to_string(g) + "-GPU all-reduce on rank " + std::to_string(r)).c_str());
        !why.empty())
      return why;
  return {};
}

CUDAKIT_DOCTOR_CHECK("NCCL and peers", 95, true, [](const Device* d) -> CheckOutcome {
  const int gpus = Device::count();
  std::string peers_words = gpus > 1 ? ", peer copies to " + std::to_string(gpus - 1) + " GPU" + (gpus > 2 ? "s" : "") : "";
  try {
    nccl::version();
  } catch (const nccl::NcclUnavailable& e) {
    std::string why = e.what();
    if (auto failure = peers(*d); !failure.empty()) return failure;
    return CheckOutcome::passed("NCCL checks skipped: " + why.substr(0, why.find(';')) + peers_words);
  }
  if (auto failure = one_rank(*d); !failure.empty()) return failure;
  if (auto failure = peers(*d); !failure.empty()) return failure;
  std::string all;
  if (d->ordinal() == 0 && gpus > 1) {
    if (auto failure = every_gpu(); !failure.empty()) return failure;
    all = ", all-reduce over " + std::to_string(gpus) + " GPUs";
  }
  return CheckOutcome::passed("NCCL " + nccl::version_string() + ": 1-rank all-reduce, capture and replay" + peers_words +
                              all);
});

}  // namespace
}  // namespace cudakit::tool
