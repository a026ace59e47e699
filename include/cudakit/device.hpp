// Devices: enumeration and queries.
//
// A Device is a small value (ordinal and driver handle). Queries that cannot change
// while the process runs (name, attributes, compute capability) are cached per device
// after their first call, so launch validation reads limits without a driver call.
//
// Thread safety: Device values and every query may be used from any thread.
#pragma once

#include <cuda.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cudakit/export.hpp"

namespace cudakit {

class Context;

/// A compute capability, e.g. {9, 0} for Hopper.
struct CUDAKIT_API ComputeCapability {
  int major = 0;  // 9 for sm_90
  int minor = 0;  // 0 for sm_90
  /// "sm_90".
  std::string arch() const { return "sm_" + std::to_string(major) + std::to_string(minor); }
  /// 90.
  int number() const { return major * 10 + minor; }
  /// Same major and minor.
  friend bool operator==(const ComputeCapability&, const ComputeCapability&) = default;
};

/// Free and total memory of a device, in bytes.
struct CUDAKIT_API MemoryInfo {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
};

/// A CUDA device: its ordinal and driver handle, a small value. Every query below
/// throws DriverUnavailable without a usable driver and DriverError when the driver
/// fails; cached queries cost a relaxed atomic load after their first call.
class CUDAKIT_API Device {
 public:
  /// How many CUDA devices this process sees. Throws DriverUnavailable without a driver
  /// (a driver with no GPU reports that as DriverUnavailable, reason no_device).
  static int count();
  /// Device `ordinal`; InvalidArgument names the count when out of range.
  static Device get(int ordinal);
  /// Every device, in ordinal order.
  static std::vector<Device> all();

  /// The ordinal this process sees (after CUDA_VISIBLE_DEVICES), and the driver's handle.
  int ordinal() const noexcept { return ordinal_; }
  CUdevice handle() const noexcept { return handle_; }

  /// "NVIDIA H200" (cached).
  const std::string& name() const;
  /// The 16 UUID bytes.
  std::array<std::uint8_t, 16> uuid() const;
  /// "GPU-8c1b6f5e-...", as nvidia-smi prints it.
  std::string uuid_string() const;
  /// "0000:19:00.0".
  std::string pci_bus_id() const;
  /// {9, 0} for an H200 (from the cached attributes).
  ComputeCapability compute_capability() const;
  /// Any CUdevice_attribute (cached after the first query).
  int attribute(CUdevice_attribute attribute) const;

  // Typed shortcuts for the attributes cudakit checks launches against.
  int multiprocessor_count() const { return attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT); }
  int max_threads_per_block() const { return attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK); }
  /// The largest block and grid extents, x, y and z.
  std::array<int, 3> max_block_dims() const;
  std::array<int, 3> max_grid_dims() const;
  /// Shared memory a block gets without opting in (48 KiB on most GPUs).
  int max_shared_memory_per_block() const { return attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK); }
  /// The most a block can get after cuFuncSetAttribute raises its limit.
  int max_shared_memory_per_block_optin() const {
    return attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  }
  /// Threads per warp (32), and the L2 cache size in bytes.
  int warp_size() const { return attribute(CU_DEVICE_ATTRIBUTE_WARP_SIZE); }
  int l2_cache_bytes() const { return attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE); }
  /// Whether the device supports stream-ordered allocation pools (cuMemAllocAsync),
  /// cooperative launches, and thread-block clusters (compute capability 9.0+).
  bool supports_memory_pools() const { return attribute(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED) != 0; }
  bool supports_cooperative_launch() const { return attribute(CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH) != 0; }
  bool supports_clusters() const { return attribute(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH) != 0; }

  /// Total memory in bytes (no context needed).
  std::size_t total_memory() const;
  /// Free and total memory now (through the primary context, made current if needed).
  MemoryInfo memory_info() const;

  /// Whether this device can map `peer`'s memory.
  bool can_access_peer(Device peer) const;

  /// Retains the primary context (see context.hpp).
  Context primary_context() const;

  /// Same ordinal.
  friend bool operator==(const Device& a, const Device& b) noexcept { return a.ordinal_ == b.ordinal_; }

 private:
  Device(int ordinal, CUdevice handle) : ordinal_(ordinal), handle_(handle) {}
  int ordinal_;
  CUdevice handle_;
};

}  // namespace cudakit
