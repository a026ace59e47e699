// Communicators on the fake NCCL: creation in one process and from a unique id, split,
// abort and destroy, the deadlines (a rank that never joins, a collective that never
// completes, an asynchronous error) and the errors' words.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <latch>
#include <thread>

#include "cudakit/capture.hpp"
#include "cudakit/graph.hpp"
#include "nccl_fixture.hpp"

namespace cudakit {
namespace {

using fake::NcclEntry;
using testing::message_of;
using Clock = std::chrono::steady_clock;

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

class NcclCommunicatorTest : public testing::NcclTest {};

class TwoGpuNcclTest : public testing::NcclTest {
 protected:
  void configure(fake::Driver& d) override { d.devices.resize(2); }
};

TEST_F(NcclCommunicatorTest, AOneRankCommunicatorKnowsItsRankSizeAndDevice) {
  nccl::Communicator comm = one_rank();
  EXPECT_TRUE(comm);
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);
  EXPECT_EQ(comm.device(), Device::get(0));
  EXPECT_NE(comm.handle(), nullptr);
  EXPECT_NO_THROW(comm.check());
  comm.destroy();
  EXPECT_FALSE(comm);
  EXPECT_EQ(nccl().live_communicators(), 0u);
}

TEST_F(NcclCommunicatorTest, NvlinkMulticastIsOffUnlessTheUserSetIt) {
  // The fixture installed NCCL: cudakit set the variable before NCCL could read it.
  ASSERT_NE(std::getenv("NCCL_NVLS_ENABLE"), nullptr);
  EXPECT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "0");
  setenv("NCCL_NVLS_ENABLE", "1", 1);  // the user's choice stands
  nccl::raw::keep_nvlink_multicast_off();
  EXPECT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "1");
  unsetenv("NCCL_NVLS_ENABLE");
  nccl::raw::keep_nvlink_multicast_off();
  EXPECT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "0");
}

TEST_F(NcclCommunicatorTest, CallsThatStayInProgressAreWaitedFor) {
  nccl().progress_polls = 5;
  nccl::Communicator comm = one_rank();
  EXPECT_GE(nccl().calls(NcclEntry::CommGetAsyncError), 6);
  comm.destroy();
}

TEST_F(TwoGpuNcclTest, CreateAllMakesOneRankPerDeviceInOneGroup) {
  auto comms = nccl::Communicator::create_all(Device::all());
  ASSERT_EQ(comms.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(comms[r].rank(), r);
    EXPECT_EQ(comms[r].size(), 2);
    EXPECT_EQ(comms[r].device().ordinal(), r);
  }
  EXPECT_EQ(nccl().calls(NcclEntry::GroupStart), 1);
  EXPECT_EQ(nccl().calls(NcclEntry::CommInitRankConfig), 2);
}

TEST_F(TwoGpuNcclTest, CreateAllRefusesADeviceTwiceAndNoDevices) {
  auto m = message_of<InvalidArgument>([&] { nccl::Communicator::create_all({Device::get(1), Device::get(1)}); });
  EXPECT_HAS(m, "device 1 is given twice");
  m = message_of<InvalidArgument>([&] { nccl::Communicator::create_all({}); });
  EXPECT_HAS(m, "no devices given");
  m = message_of<InvalidArgument>([&] { nccl::Communicator(nccl::UniqueId{}, 2, 2, Device::get(0)); });
  EXPECT_HAS(m, "rank 2 is outside a communicator of 2 ranks");
  EXPECT_EQ(nccl().calls(NcclEntry::CommInitRankConfig), 0);
}

TEST_F(NcclCommunicatorTest, ARankThatNeverJoinsTimesOutAndTheCommunicatorIsAborted) {
  auto start = Clock::now();
  auto m = message_of<nccl::NcclTimeout>(
      [&] { nccl::Communicator(nccl::UniqueId::generate(), 2, 0, Device::get(0), quick()); });
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
  EXPECT_HAS(m, "ncclCommInitRankConfig on rank 0 of 2 (device 0): ncclInProgress");
  EXPECT_HAS(m, "did not finish within 150 ms (Options::timeout); the communicator was aborted");
  EXPECT_EQ(nccl().aborts(), 1);
  EXPECT_EQ(nccl().live_communicators(), 0u);
}

TEST_F(NcclCommunicatorTest, ATimeoutCarriesTheRankTheOperationAndTheResult) {
  try {
    nccl::Communicator(nccl::UniqueId::generate(), 3, 2, Device::get(0), quick());
    FAIL() << "no timeout";
  } catch (const nccl::NcclTimeout& e) {
    EXPECT_EQ(e.rank(), 2);
    EXPECT_EQ(e.ranks(), 3);
    EXPECT_EQ(e.device(), 0);
    EXPECT_EQ(e.operation(), "ncclCommInitRankConfig");
    EXPECT_EQ(e.result_name(), "ncclInProgress");
  }
}

TEST_F(NcclCommunicatorTest, AFailedCallCarriesNcclsResultNameLastErrorRankAndOperation) {
  nccl::Communicator comm = one_rank();
  Stream s(Device::get(0));
  DeviceBuffer<float> x(s, 16, zeroed);
  nccl().fail(NcclEntry::AllReduce, 1, ncclUnhandledCudaError);
  try {
    nccl::all_reduce_in_place(comm, s, x);
    FAIL() << "no error";
  } catch (const nccl::NcclError& e) {
    EXPECT_EQ(e.result(), ncclUnhandledCudaError);
    EXPECT_EQ(e.result_name(), "ncclUnhandledCudaError");
    EXPECT_EQ(e.operation(), "ncclAllReduce");
    EXPECT_EQ(e.rank(), 0);
    EXPECT_HAS(e.last_error(), "ncclAllReduce failed as scripted");
    EXPECT_HAS(e.what(), "ncclAllReduce on rank 0 of 1 (device 0): ncclUnhandledCudaError: unhandled cuda error");
    EXPECT_HAS(e.what(), "NCCL says: fake NCCL: ncclAllReduce failed as scripted");
  }
  EXPECT_NO_THROW(comm.check()) << "a failed call does not end the communicator";
}

TEST_F(NcclCommunicatorTest, AnAsynchronousErrorEndsTheCommunicatorThroughTheWatchdog) {
  expect_parked_errors();
  nccl::Communicator comm = one_rank(quick());
  nccl().set_async_error(comm.handle(), ncclRemoteError);
  ASSERT_TRUE(eventually([&] { return nccl().aborts() == 1; })) << "the watchdog never aborted it";
  auto m = message_of<nccl::NcclError>([&] { comm.check(); });
  EXPECT_HAS(m, "ncclCommGetAsyncError on rank 0 of 1 (device 0): ncclRemoteError");
  Stream s(Device::get(0));
  DeviceBuffer<float> x(s, 4, zeroed);
  EXPECT_HAS(message_of<nccl::NcclError>([&] { nccl::all_reduce_in_place(comm, s, x); }), "ncclRemoteError");
  // The watchdog parks its error just after its abort: it may still be on its way.
  std::vector<ParkedError> parked;
  ASSERT_TRUE(eventually([&] {
    for (auto& p : drain_parked_errors()) parked.push_back(std::move(p));
    return !parked.empty();
  })) << "the watchdog parked no error";
  ASSERT_EQ(parked.size(), 1u);
  EXPECT_EQ(parked[0].origin, "NCCL watchdog");
  EXPECT_HAS(parked[0].message, "ncclRemoteError");
}

// A split that waits for the call lock while the watchdog ends the communicator sees the
// end once it holds the lock: NCCL is never handed the aborted communicator. The schedule:
// the watchdog's first poll pauses in ncclCommGetAsyncError with the lock held, and the
// communicator gets an asynchronous error; a user thread's split passes its first look at
// the communicator and waits for the lock; then the watchdog goes on and aborts it.
TEST_F(NcclCommunicatorTest, ASplitWaitingWhileTheWatchdogEndsTheCommunicatorThrowsTheEnd) {
  expect_parked_errors();
  nccl::Communicator comm = one_rank(quick());
  const ncclComm_t handle = comm.handle();
  const std::thread::id test_thread = std::this_thread::get_id();
  std::atomic<bool> paused_once{false};
  std::latch watchdog_paused(1), watchdog_goes_on(1);
  nccl().on_entry([&](NcclEntry e) {
    if (e != NcclEntry::CommGetAsyncError || std::this_thread::get_id() == test_thread) return;
    if (paused_once.exchange(true)) return;
    nccl().set_async_error(handle, ncclRemoteError);
    watchdog_paused.count_down();
    watchdog_goes_on.wait();
  });
  watchdog_paused.wait();
  std::string split_error = "(no error)";
  std::thread user([&] {  // the communicator's one user thread meanwhile
    split_error = message_of<nccl::NcclError>([&] { (void)comm.split(0, 0); });
  });
  // The split waits for nothing but the lock: it is there long before this ends.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  watchdog_goes_on.count_down();
  user.join();
  nccl().on_entry(nullptr);
  EXPECT_HAS(split_error, "ncclCommGetAsyncError on rank 0 of 1 (device 0): ncclRemoteError");
  EXPECT_EQ(nccl().calls(NcclEntry::CommSplit), 0) << "NCCL was handed the aborted communicator";
  ASSERT_TRUE(eventually([&] { return !drain_parked_errors().empty(); })) << "the watchdog parked no error";
}

TEST_F(TwoGpuNcclTest, ACollectiveThatNeverCompletesIsAbortedAfterTheDeadline) {
  expect_parked_errors();
  auto comms = nccl::Communicator::create_all(Device::all(), quick());
  Stream s0(Device::get(0)), s1(Device::get(1));
  DeviceBuffer<float> x0(s0, 8, zeroed), x1(s1, 8, zeroed);
  nccl().stall_collectives = true;  // a peer that never calls it
  auto start = Clock::now();
  nccl::group([&] {
    nccl::all_reduce_in_place(comms[0], s0, x0);
    nccl::all_reduce_in_place(comms[1], s1, x1);
  });
  EXPECT_FALSE(s0.query()) << "the fake stalled the stream";
  ASSERT_TRUE(eventually([&] { return nccl().aborts() >= 1; })) << "the watchdog never aborted it";
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(150));
  auto m = message_of<nccl::NcclTimeout>([&] { comms[0].check(); });
  EXPECT_HAS(m, "did not complete within 150 ms (Options::timeout)");
  EXPECT_HAS(m, "of 2 (device ");
  ASSERT_TRUE(eventually([&] { return nccl().aborts() == 2; })) << "each rank's watch aborts its communicator";
  EXPECT_TRUE(s0.query() && s1.query()) << "the aborts ended the collectives: the streams move on";
  // Each watch parks its error after its abort: the second may still be on its way.
  std::vector<ParkedError> parked;
  ASSERT_TRUE(eventually([&] {
    for (auto& p : drain_parked_errors()) parked.push_back(std::move(p));
    return parked.size() >= 2;
  })) << parked.size() << " errors parked";
  ASSERT_EQ(parked.size(), 2u);
  EXPECT_EQ(parked[0].origin, "NCCL watchdog");
}

TEST_F(TwoGpuNcclTest, EachCollectiveOfSeveralRanksRecordsOneWatchEventOnItsStream) {
  auto comms = nccl::Communicator::create_all(Device::all());
  Stream s0(Device::get(0)), s1(Device::get(1));
  DeviceBuffer<float> x0(s0, 8, zeroed), x1(s1, 8, zeroed);
  const auto before = fake().calls(driver::EntryId::EventRecord);
  for (int i = 0; i < 3; ++i)
    nccl::group([&] {
      nccl::all_reduce_in_place(comms[0], s0, x0);
      nccl::all_reduce_in_place(comms[1], s1, x1);
    });
  EXPECT_EQ(fake().calls(driver::EntryId::EventRecord) - before, 6);
}

TEST_F(NcclCommunicatorTest, ACollectiveOfOneRankIsNotWatchedItHasNoPeerToWaitFor) {
  nccl::Communicator comm = one_rank();
  Stream s(Device::get(0));
  DeviceBuffer<float> x(s, 8, zeroed);
  const auto before = fake().calls(driver::EntryId::EventRecord);
  for (int i = 0; i < 3; ++i) nccl::all_reduce_in_place(comm, s, x);
  EXPECT_EQ(fake().calls(driver::EntryId::EventRecord), before) << "no watch event on a one-rank communicator";
  EXPECT_NO_THROW(comm.synchronize(s));
}

TEST_F(NcclCommunicatorTest, SynchronizeEndsAtTheDeadlineWithATimeout) {
  expect_parked_errors();  // the watchdog may see the deadline first
  nccl::Communicator comm = one_rank(quick());
  Stream s(Device::get(0));
  DeviceBuffer<float> x(s, 8, zeroed);
  nccl().stall_collectives = true;
  nccl::all_reduce_in_place(comm, s, x);
  auto m = message_of<nccl::NcclTimeout>([&] { comm.synchronize(s); });
  EXPECT_HAS(m, "within 150 ms");
  EXPECT_EQ(nccl().aborts(), 1);
  EXPECT_TRUE(s.query());
  drain_parked_errors();
}

TEST_F(NcclCommunicatorTest, SynchronizeReturnsOnceTheWorkIsDone) {
  nccl::Communicator comm = one_rank();
  Stream s(Device::get(0));
  DeviceBuffer<float> x(s, 8, zeroed);
  nccl::all_reduce_in_place(comm, s, x);
  EXPECT_NO_THROW(comm.synchronize(s));
}

TEST_F(NcclCommunicatorTest, AnAbortedCommunicatorRefusesEveryUseAndIsNotDestroyedAgain) {
  nccl::Communicator comm = one_rank();
  comm.abort();
  EXPECT_EQ(nccl().aborts(), 1);
  EXPECT_HAS(message_of<nccl::NcclError>([&] { comm.check(); }), "aborted by its user");
  EXPECT_HAS(message_of<nccl::NcclError>([&] { comm.split(0, 0); }), "aborted by its user");
  comm.abort();  // again: nothing
  EXPECT_EQ(nccl().aborts(), 1);
  EXPECT_EQ(nccl().calls(NcclEntry::CommDestroy), 0);
}

TEST_F(NcclCommunicatorTest, AnEmptyCommunicatorSaysSo) {
  nccl::Communicator comm;
  EXPECT_FALSE(comm);
  EXPECT_HAS(message_of<EmptyHandle>([&] { comm.rank(); }), "Communicator::rank on an empty nccl::Communicator");
  nccl::Communicator moved = one_rank();
  nccl::Communicator to = std::move(moved);
  EXPECT_HAS(message_of<EmptyHandle>([&] { moved.check(); }), "empty");
  EXPECT_NO_THROW(comm.abort());
}

TEST_F(NcclCommunicatorTest, TheDestructorFinalizesAndDestroys) {
  { nccl::Communicator comm = one_rank(); }
  EXPECT_EQ(nccl().calls(NcclEntry::CommFinalize), 1);
  EXPECT_EQ(nccl().calls(NcclEntry::CommDestroy), 1);
  EXPECT_EQ(nccl().live_communicators(), 0u);
}

TEST_F(NcclCommunicatorTest, AFailedDestroyIsParkedAndTheCommunicatorAborted) {
  expect_parked_errors();
  { 
    nccl::Communicator comm = one_rank();
    nccl().fail(NcclEntry::CommDestroy, 1, ncclSystemError);
  }
  auto parked = drain_parked_errors();
  ASSERT_EQ(parked.size(), 1u);
  EXPECT_HAS(parked[0].message, "ncclCommDestroy on rank 0 of 1 (device 0): ncclSystemError");
  EXPECT_EQ(nccl().aborts(), 1);
}

TEST_F(TwoGpuNcclTest, SplitGroupsRanksByColorOrderedByKey) {
  auto comms = nccl::Communicator::create_all(Device::all());
  std::vector<nccl::Communicator> split(2);
  nccl::group([&] {
    split[0] = comms[0].split(7, /*key=*/1);
    split[1] = comms[1].split(7, /*key=*/0);
  });
  EXPECT_EQ(split[0].rank(), 1) << "key 1 comes after key 0";
  EXPECT_EQ(split[1].rank(), 0);
  EXPECT_EQ(split[0].size(), 2);
  EXPECT_EQ(split[1].device().ordinal(), 1);
}

TEST_F(TwoGpuNcclTest, NoColorLeavesARankOut) {
  auto comms = nccl::Communicator::create_all(Device::all());
  std::vector<nccl::Communicator> split(2);
  nccl::group([&] {
    split[0] = comms[0].split(3, 0);
    split[1] = comms[1].split(nccl::Communicator::no_color, 0);
  });
  EXPECT_TRUE(split[0]);
  EXPECT_EQ(split[0].size(), 1);
  EXPECT_FALSE(split[1]);
  EXPECT_HAS(message_of<InvalidArgument>([&] { comms[0].split(-5, 0); }), "color -5 is negative");
}

TEST_F(NcclCommunicatorTest, DestroyIsRefusedWhileAGraphHoldsTheCommunicator) {
  nccl::Communicator comm = one_rank();
  Stream s(Device::get(0));
  DeviceBuffer<float> x(s, 8, zeroed);
  nccl::all_reduce_in_place(comm, s, x);  // once outside the capture, as NCCL advises
  Graph graph = capture_nonempty(s, [&] { nccl::all_reduce_in_place(comm, s, x); });
  EXPECT_HAS(message_of<InvalidArgument>([&] { comm.destroy(); }), "a graph (or its executables) still holds");
  graph = Graph();
  comm.destroy();
}

TEST(NcclUniqueId, HexRoundTripsAndRefusesAnythingElse) {
  nccl::UniqueId id;
  for (std::size_t i = 0; i < id.bytes.size(); ++i) id.bytes[i] = static_cast<unsigned char>(i * 7 + 3);
  EXPECT_EQ(nccl::UniqueId::from_hex(id.to_hex()), id);
  EXPECT_EQ(id.to_hex().size(), 256u);
  auto m = message_of<InvalidArgument>([] { nccl::UniqueId::from_hex("abc"); });
  EXPECT_HAS(m, "expected 256 hex digits (a UniqueId::to_hex), got 3 characters");
  std::string bad(256, 'g');
  EXPECT_THROW(nccl::UniqueId::from_hex(bad), InvalidArgument);
}

TEST(NcclResultNames, NameEveryResultAndSayWhatAnUnknownOneIs) {
  EXPECT_EQ(nccl::result_name(0), "ncclSuccess");
  EXPECT_EQ(nccl::result_name(5), "ncclInvalidUsage");
  EXPECT_EQ(nccl::result_name(7), "ncclInProgress");
  EXPECT_EQ(nccl::result_name(42), "ncclResult 42");
}

}  // namespace
}  // namespace cudakit
