// Topology (topology.hpp): placements from device attributes, links from
// cuDeviceGetP2PAttribute, NVLink against PCIe from NVML where it answers.
#include "cudakit/topology.hpp"

#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "driver/nvml.hpp"

namespace cudakit {

using driver::cu;

namespace {

int p2p_attribute(Device from, Device to, CUdevice_P2PAttribute attribute) {
  int value = 0;
  check(cu.DeviceGetP2PAttribute(&value, attribute, from.handle(), to.handle()), cu.DeviceGetP2PAttribute.name(),
        Resource::of_device(from.ordinal()));
  return value;
}

// An attribute an older driver may not know (the NUMA ones came with CUDA 12.2): -1 then.
int optional_attribute(Device device, CUdevice_attribute attribute) {
  int value = -1;
  if (cu.DeviceGetAttribute(&value, attribute, device.handle()) != CUDA_SUCCESS) return -1;
  return value;
}

std::string pair_words(int from, int to) {
  return "devices " + std::to_string(from) + " and " + std::to_string(to);
}

}  // namespace

const char* to_string(LinkKind kind) noexcept {
  switch (kind) {
    case LinkKind::nvlink: return "NVLink";
    case LinkKind::pcie: return "PCIe";
    case LinkKind::none: return "none";
    case LinkKind::unknown: break;
  }
  return "unknown";
}

PeerLink peer_link(Device from, Device to) {
  if (from == to)
    throw InvalidArgument("peer_link: device " + std::to_string(from.ordinal()) + " is not its own peer");
  PeerLink l;
  l.from = from.ordinal();
  l.to = to.ordinal();
  l.access = p2p_attribute(from, to, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED) != 0;
  l.performance_rank = p2p_attribute(from, to, CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK);
  l.native_atomics = p2p_attribute(from, to, CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED) != 0;
  l.array_access = p2p_attribute(from, to, CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED) != 0;
  if (!l.access) {
    l.link = LinkKind::none;
  } else if (auto nvlink = nvml::nvlink_between(from.pci_bus_id(), to.pci_bus_id())) {
    l.link = *nvlink ? LinkKind::nvlink : LinkKind::pcie;
  }
  return l;
}

DevicePlacement placement(Device device) {
  DevicePlacement p;
  p.ordinal = device.ordinal();
  p.pci_bus_id = device.pci_bus_id();
  p.pci_domain = device.attribute(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID);
  p.pci_bus = device.attribute(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID);
  p.pci_device = device.attribute(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID);
  p.host_numa_node = optional_attribute(device, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID);
  if (optional_attribute(device, CU_DEVICE_ATTRIBUTE_NUMA_CONFIG) == CU_DEVICE_NUMA_CONFIG_NUMA_NODE)
    p.memory_numa_node = optional_attribute(device, CU_DEVICE_ATTRIBUTE_NUMA_ID);
  return p;
}

Topology topology() {
  Topology t;
  std::vector<Device> devices = Device::all();
  for (const Device& d : devices) t.devices.push_back(placement(d));
  for (const Device& from : devices)
    for (const Device& to : devices)
      if (!(from == to)) t.links.push_back(peer_link(from, to));
  return t;
}

const PeerLink& Topology::link(int from, int to) const {
  const int n = static_cast<int>(devices.size());
  if (from == to || from < 0 || to < 0 || from >= n || to >= n)
    throw InvalidArgument("Topology::link: no link between " + pair_words(from, to) + " in a topology of " +
                          std::to_string(n) + " device" + (n == 1 ? "" : "s"));
  // from-major order without the diagonal: row `from` holds n - 1 links.
  return links[static_cast<std::size_t>(from * (n - 1) + (to < from ? to : to - 1))];
}

}  // namespace cudakit
