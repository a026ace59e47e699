// Topology: where each GPU sits (PCI address, NUMA nodes) and how each pair of GPUs is
// linked, as the driver reports it.
//
// For a pair (from, to), cuDeviceGetP2PAttribute says whether `from` can access `to`'s
// memory directly, the link's relative performance rank (0 is the best this machine
// has), and whether atomics over it are native. Whether the link is NVLink or PCIe is not
// part of the CUDA driver API: cudakit asks the driver's management library (NVML,
// libnvidia-ml.so.1, opened at run time when present) and says `unknown` without it.
//
// Nothing here enables peer access (peer_access.hpp does) or touches a context.
//
// Thread safety: any thread, any time.
#pragma once

#include <string>
#include <vector>

#include "cudakit/device.hpp"
#include "cudakit/export.hpp"

namespace cudakit {

/// What carries peer traffic between two GPUs.
enum class LinkKind {
  unknown,  ///< peer access works; NVML, which tells NVLink from PCIe, is not available
  nvlink,   ///< NVLink (NVML reports NVLink peer-to-peer between the two)
  pcie,     ///< peer access over PCIe (NVML reports no NVLink between the two)
  none,     ///< no peer access: the driver stages copies through host memory
};

/// "NVLink", "PCIe", "none" or "unknown".
CUDAKIT_API const char* to_string(LinkKind kind) noexcept;

/// How device `from` reaches device `to` (one direction).
struct PeerLink {
  int from = -1;
  int to = -1;
  bool access = false;          // peer access supported (CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED)
  int performance_rank = -1;    // relative performance, 0 best (CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK)
  bool native_atomics = false;  // every atomic works over the link (..._NATIVE_ATOMIC_SUPPORTED)
  bool array_access = false;    // CUDA arrays are accessible over the link (..._CUDA_ARRAY_ACCESS_SUPPORTED)
  LinkKind link = LinkKind::unknown;
};

/// Where a device sits in the machine.
struct DevicePlacement {
  int ordinal = -1;
  std::string pci_bus_id;   // "0000:19:00.0"
  int pci_domain = 0;       // CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID
  int pci_bus = 0;          // CU_DEVICE_ATTRIBUTE_PCI_BUS_ID
  int pci_device = 0;       // CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID
  int host_numa_node = -1;  // the host NUMA node closest to the GPU; -1 when the system has none or the driver cannot say
  int memory_numa_node = -1;  // the GPU's own memory as a NUMA node (coherent systems); -1 when it is not one
};

/// Every device's placement and every ordered pair's link.
struct CUDAKIT_API Topology {
  std::vector<DevicePlacement> devices;  // by ordinal
  std::vector<PeerLink> links;           // every (from, to) with from != to, from-major order

  /// The link from `from` to `to`; InvalidArgument for the same device or an ordinal
  /// outside the topology.
  const PeerLink& link(int from, int to) const;
};

/// How `from` reaches `to`; InvalidArgument when they are the same device.
CUDAKIT_API PeerLink peer_link(Device from, Device to);

/// Where `device` sits (PCI address and NUMA nodes).
CUDAKIT_API DevicePlacement placement(Device device);

/// The whole machine as this process sees it (after CUDA_VISIBLE_DEVICES).
CUDAKIT_API Topology topology();

}  // namespace cudakit
