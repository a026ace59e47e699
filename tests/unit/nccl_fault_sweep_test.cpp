// The fault sweep over NCCL: a workload that calls every NCCL entry cudakit uses (two
// ranks in one process, one rank from a unique id, every collective, a group, a split,
// a capture, a registration, synchronize, destroy) runs once to log its calls; then, for
// each call in turn, the same workload runs with that call failing. Each run must end
// (no hang: short deadlines), throw or park an error that names the failed call, and
// leave no communicator, registration or driver handle behind.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "cudakit/capture.hpp"
#include "cudakit/graph.hpp"
#include "nccl_fixture.hpp"
#include "stream/deferred.hpp"

namespace cudakit {
namespace {

using fake::NcclEntry;

class NcclFaultSweep : public testing::NcclTest {
 protected:
  void configure(fake::Driver& d) override { d.devices.resize(2); }

  void workload() {
    auto options = quick(std::chrono::milliseconds(200));
    auto comms = nccl::Communicator::create_all(Device::all(), options);
    std::vector<Stream> streams;
    std::vector<DeviceBuffer<float>> a, b, wide;
    for (int r = 0; r < 2; ++r) {
      streams.emplace_back(Device::get(r));
      a.emplace_back(streams[r], 8, zeroed);
      b.emplace_back(streams[r], 8, zeroed);
      wide.emplace_back(streams[r], 16, zeroed);
    }
    auto each = [&](auto&& f) { nccl::group([&] { for (int r = 0; r < 2; ++r) f(r); }); };
    each([&](int r) { nccl::all_reduce(comms[r], streams[r], a[r], b[r]); });
    each([&](int r) { nccl::reduce(comms[r], streams[r], a[r], b[r], 0); });
    each([&](int r) { nccl::broadcast(comms[r], streams[r], a[r], b[r], 1); });
    each([&](int r) { nccl::all_gather(comms[r], streams[r], a[r], wide[r]); });
    each([&](int r) { nccl::reduce_scatter(comms[r], streams[r], wide[r], a[r]); });
    each([&](int r) {
      nccl::send(comms[r], streams[r], a[r], 1 - r);
      nccl::recv(comms[r], streams[r], b[r], 1 - r);
    });
    std::vector<nccl::Communicator> halves(2);
    nccl::group([&] { for (int r = 0; r < 2; ++r) halves[r] = comms[r].split(r, 0, options); });
    {
      nccl::Communicator one(nccl::UniqueId::generate(), 1, 0, Device::get(0), options);
      nccl::Registration reg(one, a[0]);
      nccl::all_reduce_in_place(one, streams[0], a[0]);
      Graph g = capture_nonempty(streams[0], [&] { nccl::all_reduce_in_place(one, streams[0], a[0]); });
      one.synchronize(streams[0]);
      one.check();
    }
    for (auto& h : halves) h.destroy();
    for (auto& c : comms) c.destroy();
  }
};

TEST_F(NcclFaultSweep, EveryFailingCallEndsCleanlyAndIsNamed) {
  expect_parked_errors();
  workload();
  const std::vector<NcclEntry> log = nccl().log();
  std::set<NcclEntry> called(log.begin(), log.end());
  // The calls cudakit makes only when something failed (the abort, the error's words)
  // and the version, read at load (the fake is installed, not loaded).
  for (NcclEntry e : {NcclEntry::CommAbort, NcclEntry::GetErrorString, NcclEntry::GetLastError, NcclEntry::GetVersion})
    called.insert(e);
  for (std::size_t i = 0; i < nccl::raw::entry_count; ++i)
    EXPECT_TRUE(called.count(static_cast<NcclEntry>(i))) << nccl::raw::entry_names[i] << " is never called";

  std::map<NcclEntry, int> seen;
  int runs = 0;
  for (NcclEntry id : log) {
    int nth = ++seen[id];
    if (id == NcclEntry::GetErrorString || id == NcclEntry::GetLastError) continue;  // they return text, never fail
    nccl().clear_faults();
    nccl().clear_log();
    nccl().fail(id, nth, ncclSystemError);
    const std::size_t failures_before = nccl().failed_calls().size();
    std::string thrown;
    try {
      workload();
    } catch (const Error& e) {
      thrown = e.what();
    }
    // A graph's resources (and so the communicator it holds) go at the next safe point:
    // now, so that what the watchdog parks about it is parked before the words are read.
    cudakit::detail::run_deferred_tasks();
    nccl().clear_faults();
    std::string words = thrown;
    for (const auto& p : drain_parked_errors()) words += "\n" + p.message;
    const std::string name = nccl::raw::entry_name(id);
    // The watchdog's polls vary from run to run: the nth call may not come this time.
    bool failed = nccl().failed_calls().size() > failures_before;
    if (failed)
      EXPECT_NE(words.find(name), std::string::npos)
          << "call " << nth << " of " << name << " failed, and nothing said so:\n" << words;
    EXPECT_EQ(nccl().live_communicators(), 0u) << "after failing call " << nth << " of " << name;
    EXPECT_EQ(nccl().live_registrations(), 0u) << "after failing call " << nth << " of " << name;
    ++runs;
  }
  EXPECT_GT(runs, 30);
}

}  // namespace
}  // namespace cudakit
