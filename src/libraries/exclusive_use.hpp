// Internal: the check that a cuBLAS or cuBLASLt handle is used by one thread at a time.
//
// cuBLAS handles are not safe to use from two threads at once (cuBLAS's documentation),
// and nothing in the library would notice: two GEMMs would race on the handle's stream
// binding and workspace. Every call on a Blas or BlasLt holds a Guard on its handle for
// the call's length; a second thread arriving meanwhile gets HandleInUse, and the handle
// stays with the first. The holder's thread id is the lock itself: one compare-and-swap
// to take it and one store to give it back per call.
#pragma once

#include <atomic>
#include <thread>

#include "cudakit/error.hpp"
#include "cudakit/stream.hpp"

namespace cudakit::detail {

class ExclusiveUse {
 public:
  /// Holds the handle for one call; throws HandleInUse naming `operation` and `resource`
  /// (the handle's stream) when another thread holds it.
  class Guard {
   public:
    Guard(ExclusiveUse& use, const char* operation, const Resource& resource) : use_(use) {
      std::thread::id holder{};
      if (!use.holder_.compare_exchange_strong(holder, std::this_thread::get_id(), std::memory_order_acquire,
                                               std::memory_order_relaxed)) [[unlikely]]
        refuse(holder, operation, resource);
    }
    ~Guard() { use_.holder_.store(std::thread::id{}, std::memory_order_release); }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    ExclusiveUse& use_;
  };

 private:
  [[noreturn]] static void refuse(std::thread::id holder, const char* operation, const Resource& resource);
  std::atomic<std::thread::id> holder_{};  // the thread in a call; none between calls
};

/// The stream a call on a Blas or BlasLt goes to, as a Resource for messages. Throws
/// EmptyHandle naming `what` when the object is empty (`slot` null: moved-from or
/// default-constructed).
inline Resource call_resource(const void* slot, StreamRef stream, const char* what) {
  if (slot == nullptr) [[unlikely]]
    throw_empty_handle(what);
  return Resource::of(ResourceKind::stream, stream.handle(), stream.device_ordinal());
}

}  // namespace cudakit::detail
