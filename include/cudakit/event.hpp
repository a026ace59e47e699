// Events: an owner and a ref; timing off unless asked.
//
// Thread safety: an EventRef may be recorded, queried and waited from any thread; the
// owner is moved or destroyed by one thread at a time.
#pragma once

#include <cuda.h>

#include <chrono>
#include <utility>

#include "cudakit/export.hpp"
#include "cudakit/context.hpp"

namespace cudakit {

class StreamRef;

/// Whether an event records timestamps. Timing costs a little on every record, so it is
/// off unless asked for.
enum class EventTiming {
  disabled,  ///< CU_EVENT_DISABLE_TIMING: for ordering and completion only
  enabled,   ///< timestamps, for elapsed_time()
};
/// How a host waiting on the event waits: spinning (lowest latency) or blocking (frees
/// the CPU core).
enum class EventWait {
  spin,      ///< the driver's default: a waiting host thread polls
  blocking,  ///< CU_EVENT_BLOCKING_SYNC: a waiting host thread sleeps until completion
};

/// A non-owning view of an event: a handle and its device's ordinal, trivially
/// copyable. It does not keep the event alive. Every call below throws EmptyHandle on
/// an empty ref, ContextPoisoned on a poisoned device and DriverError when the driver
/// fails.
class CUDAKIT_API EventRef {
 public:
  /// An empty ref.
  EventRef() = default;
  /// Views `handle`, an event of device `device` (nothing is checked).
  EventRef(CUevent handle, int device) noexcept : handle_(handle), device_(device) {}

  /// The driver's handle (null when empty) and the device's ordinal (-1 when empty).
  CUevent handle() const noexcept { return handle_; }
  int device_ordinal() const noexcept { return device_; }
  /// Whether the ref has a handle.
  explicit operator bool() const noexcept { return handle_ != nullptr; }

  /// Records the event on `stream`: it completes when the stream's work so far does.
  /// Throws CaptureError when another thread's capture owns `stream` (DESIGN 9).
  void record(StreamRef stream) const;
  /// True once the recorded work completed; false while it has not (not an error).
  bool query() const;
  /// Blocks the calling thread until the recorded work completed.
  void synchronize() const;

  /// Same handle.
  friend bool operator==(const EventRef& a, const EventRef& b) noexcept { return a.handle_ == b.handle_; }

 private:
  void require_handle(const char* call) const;
  CUevent handle_ = nullptr;
  int device_ = -1;
};

/// Time between two recorded timing events (both created with EventTiming::enabled),
/// both completed. Throws EmptyHandle for an empty ref, DriverError otherwise (for
/// example CUDA_ERROR_NOT_READY while one has not completed, CUDA_ERROR_INVALID_HANDLE
/// for an event without timing).
CUDAKIT_API std::chrono::duration<float, std::milli> elapsed_time(EventRef start, EventRef end);

/// Owns an event (cuEventCreate), destroyed with the owner; a failed destroy is parked.
/// Move-only. The calls are EventRef's, and throw as they do.
class CUDAKIT_API Event {
 public:
  /// Creates an event in `context` (the device's primary context).
  explicit Event(ContextRef context, EventTiming timing = EventTiming::disabled, EventWait wait = EventWait::spin);
  /// The same in the device's primary context. Both throw DriverError when creation fails.
  explicit Event(Device device, EventTiming timing = EventTiming::disabled, EventWait wait = EventWait::spin);

  /// Takes ownership of a raw event created in device `device`'s primary context.
  static Event adopt(CUevent handle, int device) noexcept { return Event(EventRef(handle, device)); }

  /// An empty owner (what a moved-from one becomes): calls that need the event throw
  /// EmptyHandle.
  Event() = default;
  Event(Event&& other) noexcept : ref_(std::exchange(other.ref_, {})) {}
  Event& operator=(Event&& other) noexcept {
    if (this != &other) {
      reset();
      ref_ = std::exchange(other.ref_, {});
    }
    return *this;
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() { reset(); }

  /// A non-owning view, valid while this owner lives.
  EventRef ref() const noexcept { return ref_; }
  operator EventRef() const noexcept { return ref_; }
  /// The driver's handle (null when empty), and whether the owner holds an event.
  CUevent handle() const noexcept { return ref_.handle(); }
  explicit operator bool() const noexcept { return static_cast<bool>(ref_); }
  /// Gives up ownership: the caller destroys the returned handle.
  CUevent release() noexcept { return std::exchange(ref_, {}).handle(); }

  /// EventRef::record, query and synchronize on the owned event.
  void record(StreamRef stream) const;
  bool query() const { return ref_.query(); }
  void synchronize() const { ref_.synchronize(); }

 private:
  explicit Event(EventRef ref) noexcept : ref_(ref) {}
  void reset() noexcept;
  EventRef ref_;
};

}  // namespace cudakit
