#include "device/capture_tolerant_scope.hpp"
#include "cudakit/memory_pool.hpp"

#include <atomic>
#include <mutex>

#include "cudakit/context.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "device/device_state.hpp"
#include "driver/checked_call.hpp"
#include "memory/memory_testing.hpp"
#include "memory/pool_counters.hpp"

namespace cudakit {

using driver::cu;

namespace {

std::atomic<CUmemoryPool> default_pools[detail::max_devices];
// Whether cudakit's threshold default was applied (or somebody chose a threshold).
std::atomic<bool> pool_configured[detail::max_devices];
std::mutex configure_mutex;

Resource pool_resource(CUmemoryPool pool, int device) { return Resource::of(ResourceKind::memory_pool, pool, device); }

void require_device(int device) {
  if (device < 0 || device >= detail::max_devices)
    throw InvalidArgument("memory pool of device " + std::to_string(device) + ": no such device");
}

}  // namespace

MemoryPoolRef MemoryPoolRef::device_default(Device device) {
  int d = device.ordinal();
  require_device(d);
  CUmemoryPool pool = default_pools[d].load(std::memory_order_acquire);
  if (pool == nullptr) {
    Resource res = Resource::of_device(d);
    check_not_poisoned(cu.DeviceGetDefaultMemPool.name(), res);
    checked_call(cu.DeviceGetDefaultMemPool, res, &pool, device.handle());
    default_pools[d].store(pool, std::memory_order_release);
  }
  return MemoryPoolRef(pool, d);
}

std::uint64_t MemoryPoolRef::attribute(CUmemPool_attribute attribute, const char*) const {
  if (handle_ == nullptr) detail::throw_empty_handle("MemoryPoolRef");
  Resource res = pool_resource(handle_, device_);
  check_not_poisoned(cu.MemPoolGetAttribute.name(), res);
  cuuint64_t value = 0;
  checked_call(cu.MemPoolGetAttribute, res, handle_, attribute, &value);
  return value;
}

void MemoryPoolRef::set_attribute(CUmemPool_attribute attribute, std::uint64_t value) const {
  if (handle_ == nullptr) detail::throw_empty_handle("MemoryPoolRef");
  Resource res = pool_resource(handle_, device_);
  check_not_poisoned(cu.MemPoolSetAttribute.name(), res);
  cuuint64_t v = value;
  checked_call(cu.MemPoolSetAttribute, res, handle_, attribute, &v);
}

std::uint64_t MemoryPoolRef::release_threshold() const {
  return attribute(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, "release threshold");
}

void MemoryPoolRef::set_release_threshold(std::uint64_t bytes) const {
  set_attribute(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, bytes);
  // The user chose: cudakit's default must not override it later.
  if (device_ >= 0 && device_ < detail::max_devices &&
      default_pools[device_].load(std::memory_order_acquire) == handle_)
    pool_configured[device_].store(true, std::memory_order_release);
}

void MemoryPoolRef::trim_to(std::size_t bytes_to_keep) const {
  if (handle_ == nullptr) detail::throw_empty_handle("MemoryPoolRef");
  Resource res = pool_resource(handle_, device_);
  check_not_poisoned(cu.MemPoolTrimTo.name(), res);
  checked_call(cu.MemPoolTrimTo, res, handle_, bytes_to_keep);
}

PoolUsage MemoryPoolRef::usage() const {
  PoolUsage u;
  u.reserved_bytes = attribute(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, "reserved memory");
  u.reserved_high_bytes = attribute(CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, "reserved memory peak");
  u.used_bytes = attribute(CU_MEMPOOL_ATTR_USED_MEM_CURRENT, "used memory");
  u.used_high_bytes = attribute(CU_MEMPOOL_ATTR_USED_MEM_HIGH, "used memory peak");
  if (const detail::PoolCounters* c = detail::pool_counters(handle_)) {
    u.live_allocations = c->live();
    u.allocations_made = c->made();
  }
  return u;
}

void MemoryPoolRef::reset_peaks() const {
  // The driver accepts only 0 for the peak attributes: "start again from now".
  set_attribute(CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, 0);
  set_attribute(CU_MEMPOOL_ATTR_USED_MEM_HIGH, 0);
}

namespace detail {

void configure_default_pool(int device) {
  if (device < 0 || device >= max_devices) return;
  if (pool_configured[device].load(std::memory_order_acquire)) [[likely]]
    return;
  std::lock_guard lock(configure_mutex);
  if (pool_configured[device].load(std::memory_order_relaxed)) return;
  detail::CaptureTolerantScope tolerant(device);  // beside a capture: relaxed mode leaves it valid (DESIGN 6)

  Device dev = Device::get(device);
  if (dev.supports_memory_pools()) {
    MemoryPoolRef pool = MemoryPoolRef::device_default(dev);
    // Only the driver's default (0) is replaced: a threshold somebody chose is kept.
    if (pool.release_threshold() == 0) pool.set_release_threshold(keep_all_pool_memory);
  }
  pool_configured[device].store(true, std::memory_order_release);
}

void trim_default_pool_quietly(int device) noexcept {
  try {
    if (device < 0 || device >= max_devices) return;
    CUmemoryPool pool = default_pools[device].load(std::memory_order_acquire);
    if (pool == nullptr) return;  // cudakit never allocated from it
    (void)cu.MemPoolTrimTo(pool, 0);
  } catch (...) {
  }
}

std::size_t default_pool_reserve_quietly(int device) noexcept {
  if (device < 0 || device >= max_devices) return OutOfMemory::no_pool;
  CUmemoryPool pool = default_pools[device].load(std::memory_order_acquire);
  cuuint64_t reserved = 0;
  try {
    if (pool == nullptr || cu.MemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) != CUDA_SUCCESS)
      return OutOfMemory::no_pool;
  } catch (...) {
    return OutOfMemory::no_pool;
  }
  return static_cast<std::size_t>(reserved);
}

void reset_pools_for_testing() {
  for (int d = 0; d < max_devices; ++d) {
    default_pools[d].store(nullptr);
    pool_configured[d].store(false);
  }
}

}  // namespace detail

}  // namespace cudakit
