// Internal per-device state: caches that cannot change while the process runs, the
// primary context handle, and the device's event pool. Created on first use, never
// destroyed (objects may outlive main's statics).
#pragma once

#include <cuda.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace cudakit::detail {

inline constexpr int attribute_unknown = INT_MIN;

struct DeviceState {
  int ordinal = -1;
  CUdevice handle = 0;
  // Distinguishes this state from an earlier one at the same address (unit tests reset
  // device states between tests); thread-local caches check it.
  std::uint64_t generation = 0;

  std::mutex name_mutex;
  std::string name;  // empty until queried
  std::atomic<int> attributes[CU_DEVICE_ATTRIBUTE_MAX];

  // The primary context as the library holds it: the first object cudakit creates on
  // a device retains the primary context once, for the life of the process (as the
  // runtime API does), so that no stream, event, buffer or module can outlive its
  // context (DESIGN 4) and no object pays a retain of its own.
  std::mutex library_retain_mutex;
  std::atomic<CUcontext> library_context{nullptr};

  // The stream priority range, cached: {least, greatest}; attribute_unknown until read.
  std::atomic<int> priority_least{INT_MIN}, priority_greatest{INT_MIN};

  // A library-owned non-blocking stream for work that has no user stream left to go
  // on: freeing memory whose streams were all destroyed. Created on first use.
  std::mutex service_mutex;
  std::atomic<CUstream> service_stream{nullptr};

  // Pooled events (timing disabled) for cross-stream ordering.
  std::mutex pool_mutex;
  std::vector<CUevent> free_events;
};

/// The device's primary context, retained once by the library (see library_context).
/// Cheap after the first call on a device.
CUcontext library_context(int ordinal);

/// The state of device `ordinal` (created on first use). The ordinal must be valid.
DeviceState& device_state(int ordinal);

/// The device's service stream (see DeviceState::service_stream).
CUstream service_stream(int ordinal);

}  // namespace cudakit::detail
