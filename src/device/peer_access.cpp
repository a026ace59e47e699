#include "cudakit/peer_access.hpp"

#include <atomic>
#include <cstdint>
#include <mutex>

#include "cudakit/context.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "device/device_state.hpp"
#include "device/device_testing.hpp"

namespace cudakit {

using driver::cu;

namespace {

enum PeerState : std::uint8_t { unknown = 0, enabled = 1, impossible = 2 };
std::atomic<std::uint8_t> peer_states[detail::max_devices][detail::max_devices];
std::mutex peer_mutex;

bool valid_pair(int from, int to) {
  return from >= 0 && to >= 0 && from < detail::max_devices && to < detail::max_devices && from != to;
}

std::uint8_t state_of(int from, int to) { return peer_states[from][to].load(std::memory_order_acquire); }

// cuCtxEnablePeerAccess from `from`'s context to `to`'s, once; the driver's result.
CUresult enable_once(int from, int to) {
  std::lock_guard lock(peer_mutex);
  if (state_of(from, to) == enabled) return CUDA_SUCCESS;
  CUcontext peer = detail::library_context(to);
  ContextRef(detail::library_context(from), from).make_current();
  CUresult r = cu.CtxEnablePeerAccess(peer, 0);
  if (r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) r = CUDA_SUCCESS;  // by us earlier, or by anyone
  if (r == CUDA_SUCCESS) peer_states[from][to].store(enabled, std::memory_order_release);
  return r;
}

}  // namespace

void enable_peer_access(Device from, Device to) {
  int f = from.ordinal(), t = to.ordinal();
  if (f == t) throw InvalidArgument("enable_peer_access: device " + std::to_string(f) + " cannot be its own peer");
  if (!valid_pair(f, t))
    throw InvalidArgument("enable_peer_access: devices " + std::to_string(f) + " and " + std::to_string(t) +
                          " are beyond the devices cudakit supports");
  if (state_of(f, t) == enabled) [[likely]]
    return;
  Resource res = Resource::of_device(f);
  check_not_poisoned(cu.CtxEnablePeerAccess.name(), res);
  if (!from.can_access_peer(to))
    throw InvalidArgument("enable_peer_access: " + describe(Resource::of_device(f)) + " cannot access the memory of " +
                          describe(Resource::of_device(t)) + " (cuDeviceCanAccessPeer says no)");
  check(enable_once(f, t), cu.CtxEnablePeerAccess.name(), res);
}

bool peer_access_enabled(int from, int to) noexcept { return valid_pair(from, to) && state_of(from, to) == enabled; }

namespace detail {

void enable_peer_access_for_copies(int a, int b) {
  if (!valid_pair(a, b)) return;
  for (auto [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
    if (state_of(from, to) != unknown) [[likely]]
      continue;
    Device f = Device::get(from), t = Device::get(to);
    // Where access cannot be enabled, the driver stages peer copies through the host:
    // slower, still correct. So a refusal is remembered, not thrown.
    if (!f.can_access_peer(t)) {
      peer_states[from][to].store(impossible, std::memory_order_release);
      continue;
    }
    CUresult r = enable_once(from, to);
    // A sticky error is no refusal: the context is dead, and the call that saw it must
    // say so. Taken for a refusal, the next call would fail naming itself.
    if (is_sticky(r)) check(r, cu.CtxEnablePeerAccess.name(), Resource::of_device(from));
    if (r != CUDA_SUCCESS) peer_states[from][to].store(impossible, std::memory_order_release);
  }
}

void reset_peer_access_for_testing() {
  for (auto& row : peer_states)
    for (auto& s : row) s.store(unknown);
}

}  // namespace detail

}  // namespace cudakit
