// Internal: idle library handles (cuBLAS, cuBLASLt), kept per device for reuse.
//
// Creating a cuBLAS handle costs milliseconds and a workspace; a Blas takes one from here
// and gives it back when it goes. The pool prefers the handle last bound to the asking
// stream, so a stream that makes a Blas again and again finds its own handle (and its
// workspace already ordered on it). Handles live as long as the process, as the driver's
// primary contexts do; unit tests release them with the device states
// (on_device_states_reset_for_testing).
//
// A slot is a PooledHandle (pooled_handle.hpp): `int device`, `CUstream stream` (the
// stream it was last bound to), `Slot* next` (the idle list's link, so giving back never
// allocates), `static create(device)` and `bind(stream, operation)`.
#pragma once

#include <cuda.h>

#include <memory>
#include <mutex>
#include <vector>

#include "cudakit/error.hpp"
#include "cudakit/stream.hpp"

namespace cudakit::detail {

template <class Slot>
class HandlePool {
 public:
  /// An idle slot of `device`: the one last bound to `stream` when it is idle, else any;
  /// null when the device has none.
  std::unique_ptr<Slot> take(int device, CUstream stream) {
    if (device < 0 || device >= max_devices) return nullptr;
    Shelf& shelf = shelves_[device];
    std::lock_guard lock(shelf.mutex);
    Slot** chosen = nullptr;
    for (Slot** p = &shelf.idle; *p != nullptr; p = &(*p)->next) {
      if ((*p)->stream == stream) {
        chosen = p;
        break;
      }
      if (chosen == nullptr) chosen = p;
    }
    if (chosen == nullptr) return nullptr;
    Slot* slot = *chosen;
    *chosen = slot->next;
    slot->next = nullptr;
    return std::unique_ptr<Slot>(slot);
  }

  /// take() for `stream`'s device, after the checks every lease makes: EmptyHandle for an
  /// empty stream (`operation` names the caller), ContextPoisoned on a poisoned device.
  std::unique_ptr<Slot> take_for(StreamRef stream, const char* operation) {
    stream.require_handle(operation);
    check_not_poisoned(operation, Resource::of(ResourceKind::stream, stream.handle(), stream.device_ordinal()));
    return take(stream.device_ordinal(), stream.handle());
  }

  /// Puts a slot back on its device's idle list (never allocates, never throws).
  void give_back(std::unique_ptr<Slot> slot) noexcept {
    Shelf& shelf = shelves_[slot->device];
    std::lock_guard lock(shelf.mutex);
    slot->next = shelf.idle;
    shelf.idle = slot.release();
  }

  /// Every idle slot of every device, taken out of the pool.
  std::vector<std::unique_ptr<Slot>> take_all() {
    std::vector<std::unique_ptr<Slot>> out;
    for (Shelf& shelf : shelves_) {
      std::lock_guard lock(shelf.mutex);
      while (shelf.idle != nullptr) {
        Slot* slot = shelf.idle;
        shelf.idle = slot->next;
        slot->next = nullptr;
        out.emplace_back(slot);
      }
    }
    return out;
  }

 private:
  struct Shelf {
    std::mutex mutex;
    Slot* idle = nullptr;
  };
  Shelf shelves_[max_devices];
};

/// The process's pool of `Slot`s.
template <class Slot>
HandlePool<Slot>& pool_of() {
  static auto* p = new HandlePool<Slot>;  // never destroyed: handles outlive main's statics
  return *p;
}

/// A handle for `stream`'s device, from the pool or new (Slot::create), bound to `stream`
/// unless it is already (Slot::bind; one that fails to bind goes back to the pool, still a
/// good handle). Throws EmptyHandle, ContextPoisoned, FeatureUnavailable, BlasError or
/// DriverError; `operation` names the caller in messages.
template <class Slot>
std::unique_ptr<Slot> lease_handle(StreamRef stream, const char* operation) {
  HandlePool<Slot>& pool = pool_of<Slot>();
  std::unique_ptr<Slot> slot = pool.take_for(stream, operation);
  if (slot == nullptr) slot = Slot::create(stream.device_ordinal());
  if (slot->stream != stream.handle()) {
    try {
      slot->bind(stream, operation);
    } catch (...) {
      pool.give_back(std::move(slot));
      throw;
    }
  }
  return slot;
}

/// Gives a leased handle back to the pool (it stays bound to its stream).
template <class Slot>
void return_handle(std::unique_ptr<Slot> slot) noexcept {
  if (slot != nullptr) pool_of<Slot>().give_back(std::move(slot));
}

/// Destroys every idle handle of the pool (unit tests, with the device states).
template <class Slot>
void release_idle_handles() {
  pool_of<Slot>().take_all();
}

}  // namespace cudakit::detail
