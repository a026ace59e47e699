// Topology and work across devices on the fake driver: placements and links as the
// driver reports them, NVLink against PCIe where NVML answers, a kernel on one device
// reading another device's buffer through peer access (ordered like any cross-stream
// use), and peer copies ordering both of their ends.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "cudakit/copy.hpp"
#include "cudakit/device_buffer.hpp"
#include "cudakit/launch.hpp"
#include "cudakit/module.hpp"
#include "cudakit/peer_access.hpp"
#include "cudakit/topology.hpp"
#include "driver/nvml.hpp"
#include "fake_fixture.hpp"
#include "fake_kernels.hpp"

namespace cudakit {
namespace {

using driver::EntryId;
using testing::message_of;

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

class ThreeDevices : public testing::FakeDriverTest {
 protected:
  void configure(fake::Driver& d) override {
    d.devices.resize(3);
    // 0 and 1 share a fast link; 2 reaches 0 over a slower one without native atomics;
    // 1 and 2 have no peer access at all.
    for (auto [a, b] : {std::pair{0, 2}, std::pair{2, 0}}) {
      d.p2p_attributes[{a, b, CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK}] = 1;
      d.p2p_attributes[{a, b, CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED}] = 0;
    }
    for (auto [a, b] : {std::pair{1, 2}, std::pair{2, 1}}) {
      d.p2p_attributes[{a, b, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED}] = 0;
      d.p2p_attributes[{a, b, CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED}] = 0;
    }
    d.devices[2].attributes[CU_DEVICE_ATTRIBUTE_NUMA_CONFIG] = CU_DEVICE_NUMA_CONFIG_NUMA_NODE;
    d.devices[2].attributes[CU_DEVICE_ATTRIBUTE_NUMA_ID] = 7;
  }
  void TearDown() override {
    nvml::testing::replace(nullptr);
    FakeDriverTest::TearDown();
  }
};

// NVML as the tests script it: 0 and 1 are NVLink peers, every other pair is not.
std::optional<bool> nvlink_between_first_two(const std::string& a, const std::string& b) {
  auto first_two = [](const std::string& id) { return id == "0000:19:00.0" || id == "0000:1a:00.0"; };
  return first_two(a) && first_two(b);
}
std::optional<bool> nvml_missing(const std::string&, const std::string&) { return std::nullopt; }

TEST_F(ThreeDevices, LinksCarryTheDriversPeerAttributes) {
  nvml::testing::replace(&nvlink_between_first_two);
  Topology t = topology();
  ASSERT_EQ(t.devices.size(), 3u);
  ASSERT_EQ(t.links.size(), 6u);
  const PeerLink& fast = t.link(0, 1);
  EXPECT_EQ(fast.from, 0);
  EXPECT_EQ(fast.to, 1);
  EXPECT_TRUE(fast.access);
  EXPECT_EQ(fast.performance_rank, 0);
  EXPECT_TRUE(fast.native_atomics);
  EXPECT_EQ(fast.link, LinkKind::nvlink);
  const PeerLink& slow = t.link(2, 0);
  EXPECT_TRUE(slow.access);
  EXPECT_EQ(slow.performance_rank, 1);
  EXPECT_FALSE(slow.native_atomics);
  EXPECT_EQ(slow.link, LinkKind::pcie);
  const PeerLink& none = t.link(1, 2);
  EXPECT_FALSE(none.access);
  EXPECT_EQ(none.link, LinkKind::none);
  EXPECT_STREQ(to_string(none.link), "none");
  EXPECT_STREQ(to_string(fast.link), "NVLink");
}

TEST_F(ThreeDevices, WithoutNvmlTheLinkKindIsUnknownUnlessThereIsNoAccess) {
  nvml::testing::replace(&nvml_missing);
  EXPECT_EQ(peer_link(Device::get(0), Device::get(1)).link, LinkKind::unknown);
  EXPECT_EQ(peer_link(Device::get(2), Device::get(1)).link, LinkKind::none);
  EXPECT_STREQ(to_string(LinkKind::unknown), "unknown");
}

TEST_F(ThreeDevices, PlacementGivesPciAddressAndNumaNodes) {
  DevicePlacement p = placement(Device::get(1));
  EXPECT_EQ(p.ordinal, 1);
  EXPECT_EQ(p.pci_bus_id, "0000:1a:00.0");
  EXPECT_EQ(p.pci_bus, 0x1a);
  EXPECT_EQ(p.host_numa_node, 0);
  EXPECT_EQ(p.memory_numa_node, -1) << "its memory is no NUMA node";
  EXPECT_EQ(placement(Device::get(2)).memory_numa_node, 7);
}

TEST_F(ThreeDevices, BadPairsAreRefusedWithTheirOrdinals) {
  auto m = message_of<InvalidArgument>([&] { peer_link(Device::get(1), Device::get(1)); });
  EXPECT_HAS(m, "device 1 is not its own peer");
  Topology t = topology();
  m = message_of<InvalidArgument>([&] { t.link(0, 3); });
  EXPECT_HAS(m, "no link between devices 0 and 3 in a topology of 3 devices");
}

TEST_F(ThreeDevices, AFailingP2PQueryNamesTheCallAndTheDevice) {
  fake().fail(EntryId::DeviceGetP2PAttribute, 1, CUDA_ERROR_INVALID_VALUE);
  auto m = message_of<DriverError>([&] { topology(); });
  EXPECT_HAS(m, "cuDeviceGetP2PAttribute on device 0");
}

// ---- a kernel on one device, a buffer on another ----

class PeerKernelTest : public testing::FakeDriverTest {
 protected:
  void configure(fake::Driver& d) override { d.devices.resize(2); }
  void SetUp() override {
    FakeDriverTest::SetUp();
    image_ = testing::standard_image({});
    module_ = Module::load(Device::get(1), fake::fatbin_image(image_, {80, 90}, {}));
  }
  void TearDown() override {
    module_ = {};
    FakeDriverTest::TearDown();
  }
  int image_ = 0;
  Module module_;
};

TEST_F(PeerKernelTest, AKernelReadsAnotherDevicesBufferOnlyWithPeerAccess) {
  Stream s0(Device::get(0)), s1(Device::get(1));
  DeviceBuffer<float> x(s0, 64, uninitialized);
  fill(s0, x, 3.0f);
  DeviceBuffer<float> y(s1, 64, zeroed);
  auto saxpy = module_.kernel<testing::SaxpySig>("saxpy");
  auto m = message_of<InvalidArgument>([&] { launch(s1, saxpy, {1, 64}, 2.0f, std::as_const(x), y, 64); });
  EXPECT_HAS(m, "argument #2 is a buffer on device 0, but the launch runs on device 1");
  EXPECT_HAS(m, "enable_peer_access(device 1, device 0)");

  enable_peer_access(Device::get(1), Device::get(0));
  fake().clear_log();
  launch(s1, saxpy, {1, 64}, 2.0f, std::as_const(x), y, 64);  // reads x, last written on device 0's stream
  EXPECT_EQ(fake().calls(EntryId::StreamWaitEvent), 1) << "the read waits for the fill on device 0";
  EXPECT_EQ(download(s1, y), std::vector<float>(64, 6.0f));
}

TEST_F(PeerKernelTest, AWriteOnTheOwningDeviceWaitsForTheReaderOnThePeer) {
  Stream s0(Device::get(0)), s1(Device::get(1));
  enable_peer_access(Device::get(1), Device::get(0));
  DeviceBuffer<float> x(s0, 64, uninitialized);
  fill(s0, x, 1.0f);
  DeviceBuffer<float> y(s1, 64, zeroed);
  launch(s1, module_.kernel<testing::SaxpySig>("saxpy"), {1, 64}, 1.0f, std::as_const(x), y, 64);
  fake().clear_log();
  fill(s0, x, 5.0f);  // must not overwrite x while device 1's kernel may still read it
  EXPECT_EQ(fake().calls(EntryId::StreamWaitEvent), 1);
  EXPECT_EQ(download(s1, y), std::vector<float>(64, 1.0f));
  // The fake's ordering model checks the same at the end of the test (no hazard).
}

TEST_F(PeerKernelTest, APeerCopyOrdersBothOfItsEnds) {
  Stream s0(Device::get(0)), s1(Device::get(1)), t1(Device::get(1));
  DeviceBuffer<float> a(s0, 128, uninitialized);
  fill(s0, a, 2.0f);
  DeviceBuffer<float> b(t1, 128, uninitialized);
  fill(t1, b, 9.0f);
  copy(s1, a, b);  // reads a (device 0, written on s0), writes b (device 1, written on t1)
  fake().clear_log();
  fill(s0, a, 4.0f);  // the source's own stream waits for the copy's read
  fill(t1, b, 8.0f);  // the destination's own stream waits for the copy's write
  EXPECT_EQ(fake().calls(EntryId::StreamWaitEvent), 2);
  EXPECT_EQ(download(t1, b), std::vector<float>(128, 8.0f));
  EXPECT_EQ(download(s0, a), std::vector<float>(128, 4.0f));
}

}  // namespace
}  // namespace cudakit
