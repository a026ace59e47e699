#include "cudakit/device.hpp"

#include <cstdio>
#include <memory>

#include "cudakit/context.hpp"
#include "device/capture_tolerant_scope.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "device/device_state.hpp"
#include "device/device_testing.hpp"
#include "driver/checked_call.hpp"
#include "driver/device_names.hpp"

namespace cudakit {

using driver::cu;

namespace detail {

namespace {
std::atomic<int> cached_device_count{-1};  // see Device::count
// Created once per device, never destroyed while the process runs: a lock-free read
// after the first use, since every stream, event and allocation asks for its device.
std::mutex states_mutex;
std::atomic<DeviceState*> states[max_devices];

// Error messages name a device through this (set_device_name_reader): the name if it was
// already queried, without a driver call or a new state.
std::string device_name_for_messages(int ordinal) noexcept {
  if (ordinal < 0 || ordinal >= max_devices) return {};
  try {
    DeviceState* s = states[ordinal].load(std::memory_order_acquire);
    if (s == nullptr) return {};
    std::lock_guard lock(s->name_mutex);
    return s->name;
  } catch (...) {
    return {};
  }
}
}  // namespace

DeviceState& device_state(int ordinal) {
  // The ordinal indexes an array: a bad one (from a hand-made ContextRef or StreamRef)
  // must be an error, not a stray access.
  if (ordinal < 0 || ordinal >= max_devices)
    throw InvalidArgument("device ordinal " + std::to_string(ordinal) + " is out of range: cudakit handles ordinals 0 to " +
                          std::to_string(max_devices - 1));
  DeviceState* existing = states[ordinal].load(std::memory_order_acquire);
  if (existing != nullptr) [[likely]]
    return *existing;
  // The driver call is made, and its error thrown, outside the lock: the error message
  // names the device, which reads the states (device_name_for_messages). The state is
  // installed only once the call succeeded, so a failure leaves nothing half made.
  CUdevice handle = 0;
  checked_call(cu.DeviceGet, Resource::of_device(ordinal), &handle, ordinal);
  std::lock_guard lock(states_mutex);
  DeviceState* s = states[ordinal].load(std::memory_order_relaxed);
  if (s == nullptr) {
    set_device_name_reader(&device_name_for_messages);
    static std::atomic<std::uint64_t> generations{0};
    auto made = std::make_unique<DeviceState>();
    made->ordinal = ordinal;
    made->handle = handle;
    made->generation = ++generations;
    for (auto& a : made->attributes) a.store(attribute_unknown, std::memory_order_relaxed);
    s = made.release();
    states[ordinal].store(s, std::memory_order_release);
  }
  return *s;
}

void release_event_pool(DeviceState& s) noexcept;  // event.cpp

CUcontext library_context(int ordinal) {
  DeviceState& s = device_state(ordinal);
  CUcontext ctx = s.library_context.load(std::memory_order_acquire);
  if (ctx != nullptr) [[likely]]
    return ctx;
  std::lock_guard lock(s.library_retain_mutex);
  ctx = s.library_context.load(std::memory_order_relaxed);
  if (ctx == nullptr) {
    CaptureTolerantScope tolerant;  // lazy set-up never breaks a capture (DESIGN 6)
    Resource res = Resource::of_device(ordinal);
    check_not_poisoned(cu.DevicePrimaryCtxRetain.name(), res);
    checked_call(cu.DevicePrimaryCtxRetain, res, &ctx, s.handle);
    s.library_context.store(ctx, std::memory_order_release);
  }
  return ctx;
}

CUstream service_stream(int ordinal) {
  DeviceState& s = device_state(ordinal);
  CUstream stream = s.service_stream.load(std::memory_order_acquire);
  if (stream != nullptr) return stream;
  std::lock_guard lock(s.service_mutex);
  stream = s.service_stream.load(std::memory_order_relaxed);
  if (stream == nullptr) {
    CaptureTolerantScope tolerant;  // lazy set-up never breaks a capture (DESIGN 6)
    CUcontext ctx = library_context(ordinal);
    ContextRef(ctx, ordinal).make_current();
    checked_call(cu.StreamCreateWithPriority, Resource::of_device(ordinal), &stream, CU_STREAM_NON_BLOCKING, 0);
    s.service_stream.store(stream, std::memory_order_release);
  }
  return stream;
}

void flush_thread_event_cache() noexcept;  // event.cpp

void reset_device_states_for_testing() {
  flush_thread_event_cache();
  // Taken out under the lock, released outside it: a failed release parks an error
  // whose message names the device, which reads the states.
  std::unique_ptr<DeviceState> old[max_devices];
  {
    std::lock_guard lock(states_mutex);
    for (int d = 0; d < max_devices; ++d) old[d].reset(states[d].exchange(nullptr));
  }
  for (auto& s : old) {
    if (!s) continue;
    if (CUstream st = s->service_stream.load(); st != nullptr) {
      CUresult r = cu.StreamDestroy(st);
      if (r != CUDA_SUCCESS) park_driver_error(r, cu.StreamDestroy.name(), Resource::of_device(s->ordinal), "reset");
    }
    release_event_pool(*s);
    if (s->library_context.load() != nullptr) {
      CUresult r = cu.DevicePrimaryCtxRelease(s->handle);
      if (r != CUDA_SUCCESS) park_driver_error(r, cu.DevicePrimaryCtxRelease.name(), Resource::of_device(s->ordinal), "reset");
    }
  }
  cached_current_context = nullptr;
  cached_device_count.store(-1);
}

}  // namespace detail

// The device count cannot change while a process runs (CUDA_VISIBLE_DEVICES is read
// once by cuInit); cached so Device::get costs no driver call after the first.
int Device::count() {
  using detail::cached_device_count;
  int n = cached_device_count.load(std::memory_order_relaxed);
  if (n >= 0) return n;
  checked_call(cu.DeviceGetCount, Resource::none(), &n);
  cached_device_count.store(n, std::memory_order_relaxed);
  return n;
}

Device Device::get(int ordinal) {
  int n = count();
  if (ordinal < 0 || ordinal >= n)
    throw InvalidArgument("device ordinal " + std::to_string(ordinal) + " is out of range: this process sees " +
                          std::to_string(n) + " CUDA device" + (n == 1 ? "" : "s"));
  return Device(ordinal, detail::device_state(ordinal).handle);
}

std::vector<Device> Device::all() {
  std::vector<Device> out;
  int n = count();
  for (int i = 0; i < n; ++i) out.push_back(Device(i, detail::device_state(i).handle));
  return out;
}

const std::string& Device::name() const {
  auto& s = detail::device_state(ordinal_);
  {
    std::lock_guard lock(s.name_mutex);
    if (!s.name.empty()) return s.name;  // set once, never changed after
  }
  // Queried, and a failure thrown, outside the lock: the error message reads the name.
  char buf[256] = {};
  checked_call(cu.DeviceGetName, Resource::of_device(ordinal_), buf, sizeof buf - 1, handle_);
  std::lock_guard lock(s.name_mutex);
  if (s.name.empty()) s.name = buf;
  return s.name;
}

std::array<std::uint8_t, 16> Device::uuid() const {
  CUuuid u{};
  checked_call(cu.DeviceGetUuid, Resource::of_device(ordinal_), &u, handle_);
  std::array<std::uint8_t, 16> out{};
  for (int i = 0; i < 16; ++i) out[i] = static_cast<std::uint8_t>(u.bytes[i]);
  return out;
}

std::string Device::uuid_string() const {
  auto b = uuid();
  char buf[64];
  std::snprintf(buf, sizeof buf, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return buf;
}

std::string Device::pci_bus_id() const {
  char buf[64] = {};
  checked_call(cu.DeviceGetPCIBusId, Resource::of_device(ordinal_), buf, sizeof buf - 1, handle_);
  return buf;
}

int Device::attribute(CUdevice_attribute attribute) const {
  auto& s = detail::device_state(ordinal_);
  bool cacheable = attribute >= 0 && attribute < CU_DEVICE_ATTRIBUTE_MAX;
  if (cacheable) {
    int v = s.attributes[attribute].load(std::memory_order_relaxed);
    if (v != detail::attribute_unknown) return v;
  }
  int v = 0;
  checked_call(cu.DeviceGetAttribute, Resource::of_device(ordinal_), &v, attribute, handle_);
  if (cacheable) s.attributes[attribute].store(v, std::memory_order_relaxed);
  return v;
}

ComputeCapability Device::compute_capability() const {
  return {attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR), attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)};
}

std::array<int, 3> Device::max_block_dims() const {
  return {attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X), attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y),
          attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)};
}

std::array<int, 3> Device::max_grid_dims() const {
  return {attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X), attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y),
          attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)};
}

std::size_t Device::total_memory() const {
  std::size_t bytes = 0;
  checked_call(cu.DeviceTotalMem, Resource::of_device(ordinal_), &bytes, handle_);
  return bytes;
}

MemoryInfo Device::memory_info() const {
  Context context = primary_context();
  context.make_current();
  MemoryInfo info;
  checked_call(cu.MemGetInfo, Resource::of_device(ordinal_), &info.free_bytes, &info.total_bytes);
  return info;
}

bool Device::can_access_peer(Device peer) const {
  int can = 0;
  checked_call(cu.DeviceCanAccessPeer, Resource::of_device(ordinal_), &can, handle_, peer.handle_);
  return can != 0;
}

Context Device::primary_context() const { return Context::primary(*this); }

}  // namespace cudakit
