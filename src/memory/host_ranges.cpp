// The registry of page-locked host ranges (detail/host_ranges.hpp).
#include "memory/host_ranges.hpp"

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <shared_mutex>

namespace cudakit::detail {

namespace {

struct Range {
  std::uintptr_t end;
  Allocation* allocation;
};

struct Registry {
  std::shared_mutex mutex;
  std::map<std::uintptr_t, Range> ranges;  // by first byte
  std::atomic<std::size_t> count{0};
};

Registry& registry() {
  static auto* r = new Registry;  // never destroyed: pinned buffers may outlive statics
  return *r;
}

}  // namespace

void register_host_range(const void* begin, std::size_t bytes, Allocation* allocation) {
  Registry& r = registry();
  auto b = reinterpret_cast<std::uintptr_t>(begin);
  std::unique_lock lock(r.mutex);
  r.ranges[b] = Range{b + bytes, allocation};
  r.count.store(r.ranges.size(), std::memory_order_release);
}

void unregister_host_range(const void* begin) noexcept {
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  r.ranges.erase(reinterpret_cast<std::uintptr_t>(begin));
  r.count.store(r.ranges.size(), std::memory_order_release);
}

Allocation* find_host_range(const void* p, std::size_t bytes) noexcept {
  Registry& r = registry();
  if (r.count.load(std::memory_order_acquire) == 0) return nullptr;
  auto b = reinterpret_cast<std::uintptr_t>(p);
  std::shared_lock lock(r.mutex);
  auto it = r.ranges.upper_bound(b);
  if (it == r.ranges.begin()) return nullptr;
  --it;
  if (b + bytes > it->second.end || b < it->first) return nullptr;
  return it->second.allocation;
}

}  // namespace cudakit::detail
