// Collectives on the fake NCCL: every collective on two ranks against the host on fresh
// random data, the element types, the sizes and ranks checked before NCCL sees them, the
// declared reads and writes that order other streams (inside and outside a capture), a
// graph that keeps its buffers and communicator alive, groups and registration.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "cudakit/capture.hpp"
#include "cudakit/copy.hpp"
#include "cudakit/graph.hpp"
#include "cudakit/graph_exec.hpp"
#include "cudakit/memory_init.hpp"
#include "driver/driver_testing.hpp"
#include "libraries/nccl_comm_state.hpp"
#include "nccl_fixture.hpp"

namespace cudakit {
namespace {

using fake::NcclEntry;
using testing::message_of;
using testing::random_quarters;

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

unsigned fresh_seed() { return std::random_device{}(); }

class TwoRankCollectives : public testing::NcclTest {
 protected:
  void configure(fake::Driver& d) override { d.devices.resize(2); }
  void SetUp() override {
    NcclTest::SetUp();
    comms_ = nccl::Communicator::create_all(Device::all());
    for (int r = 0; r < 2; ++r) streams_.emplace_back(Device::get(r));
  }
  void TearDown() override {
    comms_.clear();
    streams_.clear();
    NcclTest::TearDown();
  }
  std::vector<nccl::Communicator> comms_;
  std::vector<Stream> streams_;
};

TEST_F(TwoRankCollectives, EveryCollectiveMatchesTheHostOnFreshRandomData) {
  const std::size_t n = 96;
  const unsigned seed = fresh_seed();
  std::vector<std::vector<float>> host;
  std::vector<DeviceBuffer<float>> send, recv, gathered, scattered;
  for (int r = 0; r < 2; ++r) {
    host.push_back(random_quarters(2 * n, seed + r));
    send.push_back(upload(streams_[r], host[r]));
    recv.emplace_back(streams_[r], 2 * n, uninitialized);
    gathered.emplace_back(streams_[r], 4 * n, uninitialized);
    scattered.emplace_back(streams_[r], n, uninitialized);
    fill(streams_[r], recv[r], -7.0f);  // poison
  }
  auto each = [&](auto&& f) { nccl::group([&] { for (int r = 0; r < 2; ++r) f(r); }); };

  each([&](int r) { nccl::all_reduce(comms_[r], streams_[r], send[r], recv[r]); });
  for (int r = 0; r < 2; ++r) {
    auto out = download(streams_[r], recv[r]);
    for (std::size_t i = 0; i < 2 * n; ++i) ASSERT_EQ(out[i], host[0][i] + host[1][i]) << "rank " << r << " at " << i;
  }

  each([&](int r) { nccl::all_reduce(comms_[r], streams_[r], send[r], recv[r], nccl::ReduceOp::max); });
  auto out = download(streams_[1], recv[1]);
  for (std::size_t i = 0; i < 2 * n; ++i) ASSERT_EQ(out[i], std::max(host[0][i], host[1][i]));

  fill(streams_[0], recv[0], -7.0f);
  each([&](int r) { nccl::reduce(comms_[r], streams_[r], send[r], recv[r], /*root=*/1, nccl::ReduceOp::min); });
  out = download(streams_[1], recv[1]);
  for (std::size_t i = 0; i < 2 * n; ++i) ASSERT_EQ(out[i], std::min(host[0][i], host[1][i]));
  EXPECT_EQ(download(streams_[0], recv[0]), std::vector<float>(2 * n, -7.0f)) << "not the root: untouched";

  each([&](int r) { nccl::broadcast(comms_[r], streams_[r], send[r], recv[r], /*root=*/0); });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(download(streams_[r], recv[r]), host[0]);

  each([&](int r) { nccl::all_gather(comms_[r], streams_[r], send[r], gathered[r]); });
  std::vector<float> expect_gathered = host[0];
  expect_gathered.insert(expect_gathered.end(), host[1].begin(), host[1].end());
  for (int r = 0; r < 2; ++r) EXPECT_EQ(download(streams_[r], gathered[r]), expect_gathered);

  each([&](int r) { nccl::reduce_scatter(comms_[r], streams_[r], send[r], scattered[r]); });
  for (int r = 0; r < 2; ++r) {
    auto block = download(streams_[r], scattered[r]);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(block[i], host[0][r * n + i] + host[1][r * n + i]);
  }

  // A swap: each rank sends its data to the other.
  each([&](int r) {
    nccl::send(comms_[r], streams_[r], send[r], 1 - r);
    nccl::recv(comms_[r], streams_[r], recv[r], 1 - r);
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(download(streams_[r], recv[r]), host[1 - r]);
}

template <class T>
std::vector<T> random_integers(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(rng() % 50 + 1);
  return v;
}

template <class T>
void check_all_reduce_of(std::vector<nccl::Communicator>& comms, std::vector<Stream>& streams, nccl::ReduceOp op) {
  const std::size_t n = 33;
  const unsigned seed = fresh_seed();
  std::vector<std::vector<T>> host{random_integers<T>(n, seed), random_integers<T>(n, seed + 1)};
  std::vector<DeviceBuffer<T>> bufs;
  for (int r = 0; r < 2; ++r) bufs.push_back(upload(streams[r], host[r]));
  nccl::group([&] { for (int r = 0; r < 2; ++r) nccl::all_reduce_in_place(comms[r], streams[r], bufs[r], op); });
  auto out = download(streams[0], bufs[0]);
  for (std::size_t i = 0; i < n; ++i) {
    T a = host[0][i], b = host[1][i];
    T expect = op == nccl::ReduceOp::product ? T(a * b)
               : op == nccl::ReduceOp::average ? T((a + b) / 2)
                                                : T(a + b);
    ASSERT_EQ(out[i], expect) << i;
  }
}

TEST_F(TwoRankCollectives, IntegerAndDoubleTypesReduceWithEveryOp) {
  check_all_reduce_of<std::int32_t>(comms_, streams_, nccl::ReduceOp::sum);
  check_all_reduce_of<std::int64_t>(comms_, streams_, nccl::ReduceOp::product);
  check_all_reduce_of<std::uint8_t>(comms_, streams_, nccl::ReduceOp::sum);
  check_all_reduce_of<std::uint32_t>(comms_, streams_, nccl::ReduceOp::average);
  check_all_reduce_of<double>(comms_, streams_, nccl::ReduceOp::sum);
}

static_assert(nccl::data_type_v<float> == nccl::DataType::float32);
static_assert(nccl::data_type_v<double> == nccl::DataType::float64);
static_assert(nccl::data_type_v<__half> == nccl::DataType::float16);
static_assert(nccl::data_type_v<__nv_bfloat16> == nccl::DataType::bfloat16);
static_assert(nccl::data_type_v<std::int8_t> == nccl::DataType::int8);
static_assert(nccl::data_type_v<char> == nccl::DataType::int8 || nccl::data_type_v<char> == nccl::DataType::uint8);
static_assert(nccl::data_type_v<std::uint8_t> == nccl::DataType::uint8);
static_assert(nccl::data_type_v<int> == nccl::DataType::int32);
static_assert(nccl::data_type_v<unsigned> == nccl::DataType::uint32);
static_assert(nccl::data_type_v<long long> == nccl::DataType::int64);
static_assert(nccl::data_type_v<std::uint64_t> == nccl::DataType::uint64);

TEST_F(TwoRankCollectives, SizesThisRankCanSeeAreCheckedBeforeNccl) {
  Stream& s = streams_[0];
  DeviceBuffer<float> a(s, 10, zeroed), b(s, 11, zeroed), four(s, 40, zeroed);
  nccl().clear_log();
  auto m = message_of<InvalidArgument>([&] { nccl::all_reduce(comms_[0], s, a, b); });
  EXPECT_HAS(m, "all_reduce: the send buffer has 10 elements, the receive buffer 11");
  m = message_of<InvalidArgument>([&] { nccl::all_gather(comms_[0], s, a, b); });
  EXPECT_HAS(m, "all_gather: the receive buffer has 11 elements, the send buffer times the ranks 20");
  m = message_of<InvalidArgument>([&] { nccl::reduce_scatter(comms_[0], s, b, a); });
  EXPECT_HAS(m, "reduce_scatter: the send buffer has 11 elements, the receive buffer times the ranks 20");
  m = message_of<InvalidArgument>([&] { nccl::reduce(comms_[0], s, a, b, 0); });
  EXPECT_HAS(m, "reduce at the root: the send buffer has 10 elements, the receive buffer 11");
  m = message_of<InvalidArgument>([&] { nccl::broadcast(comms_[0], s, a, b, 0); });
  EXPECT_HAS(m, "broadcast at the root: the send buffer has 10 elements, the receive buffer 11");
  m = message_of<InvalidArgument>([&] { nccl::broadcast_in_place(comms_[0], s, a, 2); });
  EXPECT_HAS(m, "ncclBroadcast on rank 0 of 2 (device 0): root 2 is not a rank of the communicator");
  m = message_of<InvalidArgument>([&] { nccl::send(comms_[0], s, a, -1); });
  EXPECT_HAS(m, "ncclSend on rank 0 of 2 (device 0): peer -1 is not a rank of the communicator");
  m = message_of<InvalidArgument>([&] { nccl::all_reduce_in_place(comms_[0], streams_[1], a); });
  EXPECT_HAS(m, "ncclAllReduce on rank 0 of 2 (device 0): the stream is on device 1");
  DeviceBuffer<float> other(streams_[1], 10, zeroed);
  m = message_of<InvalidArgument>([&] { nccl::all_reduce(comms_[0], s, other, a); });
  EXPECT_HAS(m, "the send buffer is on device 1");
  EXPECT_EQ(nccl().calls(NcclEntry::AllReduce) + nccl().calls(NcclEntry::AllGather) +
                nccl().calls(NcclEntry::ReduceScatter) + nccl().calls(NcclEntry::Reduce) +
                nccl().calls(NcclEntry::Broadcast) + nccl().calls(NcclEntry::Send),
            0)
      << "every mistake was caught before NCCL";
  a.reset();
  b.reset();
  four.reset();
  other.reset();
}

TEST_F(TwoRankCollectives, EachRanksCollectiveRunsWithItsDevicesContextCurrent) {
  DeviceBuffer<float> a(streams_[0], 16, zeroed), b(streams_[1], 16, zeroed);
  const std::vector<CUcontext> expected = {fake::context_of(0), fake::context_of(1)};
  for (int current_before : {1, 0}) {  // device 1's context current before the group, then device 0's
    Device::get(current_before).primary_context().make_current();
    nccl::group([&] {
      nccl::all_reduce_in_place(comms_[0], streams_[0], a);
      nccl::all_reduce_in_place(comms_[1], streams_[1], b);
    });
  }
  const auto seen = nccl().collective_contexts();
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(std::vector<CUcontext>(seen.begin(), seen.begin() + 2), expected);
  EXPECT_EQ(std::vector<CUcontext>(seen.begin() + 2, seen.end()), expected);
  a.reset();
  b.reset();
}

class OneRankCollectives : public testing::NcclTest {};

TEST_F(OneRankCollectives, DeclaredReadsAndWritesOrderOtherStreams) {
  nccl::Communicator comm = one_rank();
  Stream a(Device::get(0)), b(Device::get(0));
  auto host = random_quarters(64, fresh_seed());
  DeviceBuffer<float> x = upload(a, host);  // written on a
  DeviceBuffer<float> y(a, 64, uninitialized);
  fake().clear_log();
  nccl::all_reduce(comm, b, x, y);  // on b: reads x, writes y, both last used on a
  EXPECT_EQ(fake().calls(driver::EntryId::StreamWaitEvent), 2) << "one hand-off from a to b per buffer";
  fill(a, y, 3.0f);  // a writes y after b's collective wrote it: waits
  fill(a, x, 4.0f);  // and x, which b read
  EXPECT_EQ(fake().calls(driver::EntryId::StreamWaitEvent), 4);
  EXPECT_EQ(download(a, y), std::vector<float>(64, 3.0f));
  // The fake's ordering model finds no unordered pair at the end of the test.
}

TEST_F(OneRankCollectives, AnEmptyCommunicatorOrStreamIsNamedBeforeNccl) {
  nccl::Communicator comm = one_rank();
  nccl::Communicator empty;
  Stream s(Device::get(0));
  DeviceBuffer<float> x = upload(s, random_quarters(16, fresh_seed()));
  DeviceBuffer<float> y(s, 16, uninitialized);
  nccl().clear_log();
  EXPECT_HAS(message_of<EmptyHandle>([&] { nccl::all_reduce(empty, s, x, y); }),
             "ncclAllReduce on an empty nccl::Communicator");
  EXPECT_HAS(message_of<EmptyHandle>([&] { nccl::broadcast(comm, StreamRef(), x, y, 0); }),
             "ncclBroadcast: use of an empty Stream");
  EXPECT_EQ(nccl().calls(NcclEntry::AllReduce) + nccl().calls(NcclEntry::Broadcast), 0) << "caught before NCCL";
}

TEST_F(OneRankCollectives, OnAPoisonedDeviceACollectiveIsRefusedBeforeNccl) {
  nccl::Communicator comm = one_rank();
  Stream s(Device::get(0));
  DeviceBuffer<float> x = upload(s, random_quarters(16, fresh_seed()));
  DeviceBuffer<float> y(s, 16, uninitialized);
  nccl::all_reduce(comm, s, x, y);  // both buffers on s alone: the next call takes tracking's fast path
  nccl().clear_log();
  detail::poison(0,
                 std::make_shared<const DriverError>(CUDA_ERROR_ILLEGAL_ADDRESS, "cuStreamSynchronize", "a stream"));
  EXPECT_THROW(nccl::all_reduce(comm, s, x, y), ContextPoisoned);
  EXPECT_EQ(nccl().calls(NcclEntry::AllReduce), 0) << "refused before NCCL";
  detail::clear_poison_for_testing();
  nccl::all_reduce(comm, s, x, y);
  EXPECT_EQ(nccl().calls(NcclEntry::AllReduce), 1) << "and called again once the device is sound";
}

TEST_F(OneRankCollectives, WithoutTheDeclarationsTheModelSeesTheRace) {
  ignore_hazards();
  nccl::Communicator comm = one_rank();
  Stream a(Device::get(0)), b(Device::get(0));
  DeviceBuffer<float> x = upload(a, random_quarters(64, fresh_seed()));
  DeviceBuffer<float> y(a, 64, uninitialized);
  {
    ManualOrdering manual;  // as if the collective had declared nothing
    nccl::all_reduce(comm, b, x, y);
  }
  EXPECT_FALSE(fake().hazards().empty()) << "the fake's model must see NCCL's accesses";
  b.synchronize();
}

TEST_F(OneRankCollectives, ACapturedCollectiveKeepsItsBuffersAndCommunicatorAlive) {
  std::optional<nccl::Communicator> comm = one_rank();
  Stream s(Device::get(0)), other(Device::get(0));
  auto host = random_quarters(32, fresh_seed());
  std::optional<DeviceBuffer<float>> x = upload(other, host);  // last written on another stream
  DeviceBuffer<float> y(s, 32, uninitialized);
  nccl::all_reduce(*comm, s, *x, y);  // once outside the capture
  fill(s, y, -1.0f);
  Graph graph = capture_nonempty(s, [&] { nccl::all_reduce(*comm, s, *x, y); });
  GraphExec exec = graph.instantiate();
  comm.reset();  // the graph holds the communicator
  x.reset();     // and the buffer
  EXPECT_EQ(nccl().live_communicators(), 1u);
  exec.launch(s);
  exec.launch(s);
  EXPECT_EQ(download(s, y), host);
  graph = Graph();
  exec = GraphExec();
  detail::reset_device_states_for_testing();  // runs the deferred releases
  EXPECT_EQ(nccl().live_communicators(), 0u);
}

TEST_F(OneRankCollectives, AGraphLaunchOrdersTheCollectivesBuffersForOtherStreams) {
  nccl::Communicator comm = one_rank();
  Stream s(Device::get(0)), t(Device::get(0));
  DeviceBuffer<float> x = upload(s, random_quarters(16, fresh_seed()));
  nccl::all_reduce_in_place(comm, s, x);
  Graph graph = capture_nonempty(s, [&] { nccl::all_reduce_in_place(comm, s, x); });
  GraphExec exec = graph.instantiate();
  exec.launch(t);      // the replay writes x on t
  fill(s, x, 2.0f);    // s must wait for it
  EXPECT_EQ(download(s, x), std::vector<float>(16, 2.0f));
}

TEST_F(OneRankCollectives, AGroupThatThrowsIsStillEnded) {
  nccl::Communicator comm = one_rank();
  Stream s(Device::get(0));
  DeviceBuffer<float> x(s, 4, zeroed), y(s, 5, zeroed);
  EXPECT_THROW(nccl::group([&] {
                 nccl::all_reduce_in_place(comm, s, x);
                 nccl::all_reduce(comm, s, x, y);  // a size mismatch
               }),
               InvalidArgument);
  EXPECT_EQ(nccl().calls(NcclEntry::GroupStart), nccl().calls(NcclEntry::GroupEnd));
  EXPECT_FALSE(nccl::detail::in_group());
  EXPECT_NO_THROW(nccl::all_reduce_in_place(comm, s, x));
}

TEST_F(OneRankCollectives, CollectivesInProgressAreWaitedForInAndOutOfGroups) {
  nccl().progress_polls = 3;
  nccl::Communicator comm = one_rank();
  Stream s(Device::get(0));
  auto host = random_quarters(8, fresh_seed());
  DeviceBuffer<float> x = upload(s, host);
  nccl::all_reduce_in_place(comm, s, x);
  nccl::group([&] { nccl::all_reduce_in_place(comm, s, x); });
  EXPECT_EQ(download(s, x), host);
}

TEST_F(OneRankCollectives, RegistrationKeepsTheBufferRegisteredUntilItGoes) {
  nccl::Communicator comm = one_rank();
  Stream s(Device::get(0));
  DeviceBuffer<float> x(s, 1024, zeroed);
  {
    nccl::Registration reg(comm, x);
    EXPECT_NE(reg.handle(), nullptr);
    EXPECT_EQ(nccl().live_registrations(), 1u);
    nccl::Registration moved = std::move(reg);
    EXPECT_EQ(reg.handle(), nullptr);
  }
  EXPECT_EQ(nccl().live_registrations(), 0u);
  EXPECT_HAS(message_of<InvalidArgument>([&] { nccl::Registration(comm, DeviceSpan<float>()); }), "the buffer is empty");
}

class OldNcclCollectives : public testing::NcclTest {
  void configure_nccl(fake::Nccl& n) override { n.missing = {NcclEntry::CommRegister, NcclEntry::CommDeregister}; }
};

TEST_F(OldNcclCollectives, RegistrationNeedsNccl219) {
  nccl::Communicator comm = one_rank();
  Stream s(Device::get(0));
  DeviceBuffer<float> x(s, 16, zeroed);
  auto m = message_of<nccl::NcclUnavailable>([&] { nccl::Registration(comm, x); });
  EXPECT_HAS(m, "needs ncclCommRegister");
  EXPECT_HAS(m, "it came with NCCL 2.19");
}

}  // namespace
}  // namespace cudakit
