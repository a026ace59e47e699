#include "cudakit/event.hpp"

#include <cstdint>
#include <utility>

#include "cudakit/detail/capture_guard.hpp"
#include "device/capture_tolerant_scope.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "cudakit/stream.hpp"
#include "device/device_state.hpp"
#include "stream/capture_state.hpp"
#include "stream/create_prologue.hpp"
#include "stream/event_pool.hpp"
#include "stream/stream_state_of.hpp"

namespace cudakit {

using driver::cu;

namespace {
Resource event_resource(CUevent e, int device) { return Resource::of(ResourceKind::event, e, device); }

CUevent create_event(ContextRef context, unsigned flags) {
  Resource res = detail::begin_create(context, cu.EventCreate.name());
  context.make_current();
  detail::CaptureTolerantScope tolerant;  // an event made while a capture runs leaves it valid
  CUevent e = nullptr;
  check(cu.EventCreate(&e, flags), cu.EventCreate.name(), res);
  return e;
}

unsigned event_flags(EventTiming timing, EventWait wait) {
  unsigned flags = CU_EVENT_DEFAULT;
  if (timing == EventTiming::disabled) flags |= CU_EVENT_DISABLE_TIMING;
  if (wait == EventWait::blocking) flags |= CU_EVENT_BLOCKING_SYNC;
  return flags;
}
}  // namespace

void EventRef::require_handle(const char* call) const {
  if (handle_ == nullptr) [[unlikely]]
    throw EmptyHandle(std::string(call) + ": use of an empty Event (moved-from or default-constructed)");
}

void EventRef::record(StreamRef stream) const {
  require_handle(cu.EventRecord.name());
  stream.require_handle(cu.EventRecord.name());
  Resource res = event_resource(handle_, device_);
  check_not_poisoned(cu.EventRecord.name(), res);
  if (detail::active_captures.load(std::memory_order_relaxed) != 0) [[unlikely]] {
    detail::StreamState* s = detail::stream_state_of(stream);
    detail::check_capturing_thread(s, cu.EventRecord.name());  // DESIGN 9
    check(cu.EventRecord(handle_, stream.handle()), cu.EventRecord.name(), res);
    detail::note_event_record(s, handle_);  // a stream that waits on it may join a capture
    return;
  }
  check(cu.EventRecord(handle_, stream.handle()), cu.EventRecord.name(), res);
}

bool EventRef::query() const {
  require_handle(cu.EventQuery.name());
  Resource res = event_resource(handle_, device_);
  check_not_poisoned(cu.EventQuery.name(), res);
  CUresult r = cu.EventQuery(handle_);
  if (r == CUDA_ERROR_NOT_READY) return false;
  check(r, cu.EventQuery.name(), res);
  return true;
}

void EventRef::synchronize() const {
  require_handle(cu.EventSynchronize.name());
  Resource res = event_resource(handle_, device_);
  check_not_poisoned(cu.EventSynchronize.name(), res);
  check(cu.EventSynchronize(handle_), cu.EventSynchronize.name(), res);
}

std::chrono::duration<float, std::milli> elapsed_time(EventRef start, EventRef end) {
  if (!start || !end) detail::throw_empty_handle("Event");
  float ms = 0;
  Resource res = event_resource(end.handle(), end.device_ordinal());
  check_not_poisoned(cu.EventElapsedTime.name(), res);
  check(cu.EventElapsedTime(&ms, start.handle(), end.handle()), cu.EventElapsedTime.name(), res);
  return std::chrono::duration<float, std::milli>(ms);
}

Event::Event(ContextRef context, EventTiming timing, EventWait wait)
    : ref_(create_event(context, event_flags(timing, wait)), context.device_ordinal()) {}

Event::Event(Device device, EventTiming timing, EventWait wait)
    : Event(ContextRef(detail::library_context(device.ordinal()), device.ordinal()), timing, wait) {}

void Event::record(StreamRef stream) const { ref_.record(stream); }

void Event::reset() noexcept {
  if (!ref_) return;
  EventRef ref = std::exchange(ref_, {});
  try {
    detail::CaptureTolerantScope tolerant;  // destroying an event beside a capture leaves it valid
    CUresult r = cu.EventDestroy(ref.handle());
    if (r != CUDA_SUCCESS)
      park_driver_error(r, cu.EventDestroy.name(), event_resource(ref.handle(), ref.device_ordinal()), "~Event");
  } catch (const std::exception& e) {
    park_error({CUDA_SUCCESS, "~Event", e.what()});
  }
}

// ---- the pool ----

namespace detail {

CUevent acquire_pooled_event(int device) {
  DeviceState& s = device_state(device);
  {
    std::lock_guard lock(s.pool_mutex);
    if (!s.free_events.empty()) {
      CUevent e = s.free_events.back();
      s.free_events.pop_back();
      return e;
    }
  }
  CaptureTolerantScope tolerant(device);  // the pool may grow inside a capture (DESIGN 6)
  return create_event(ContextRef(library_context(device), device), CU_EVENT_DISABLE_TIMING);
}

void release_pooled_event(int device, CUevent event) noexcept {
  try {
    DeviceState& s = device_state(device);
    std::lock_guard lock(s.pool_mutex);
    s.free_events.push_back(event);
  } catch (...) {
    park_error({CUDA_SUCCESS, "event pool", "could not return an event to the pool; it leaks"});
  }
}

void release_event_pool(DeviceState& s) noexcept {
  std::lock_guard lock(s.pool_mutex);
  for (CUevent e : s.free_events) {
    CUresult r = cu.EventDestroy(e);
    if (r != CUDA_SUCCESS) park_driver_error(r, cu.EventDestroy.name(), event_resource(e, s.ordinal), "event pool");
  }
  s.free_events.clear();
}

namespace {

// One hand-off event per device cached in each thread: a record plus a wait is the
// hottest cross-stream path, and the pool's mutex would cost more than the calls it
// serves. Reusing the event at once is safe: a wait captures the event's state when it
// is enqueued, so re-recording it later does not change what was waited for.
struct ThreadEventCache {
  CUevent events[max_devices] = {};
  std::uint64_t generations[max_devices] = {};

  CUevent take(int device, std::uint64_t generation) {
    if (device < 0 || device >= max_devices || events[device] == nullptr || generations[device] != generation)
      return nullptr;
    return std::exchange(events[device], nullptr);
  }
  bool keep(int device, std::uint64_t generation, CUevent e) {
    if (device < 0 || device >= max_devices || events[device] != nullptr) return false;
    events[device] = e;
    generations[device] = generation;
    return true;
  }
  void flush() noexcept {
    for (int d = 0; d < max_devices; ++d) {
      CUevent e = std::exchange(events[d], nullptr);
      if (e == nullptr) continue;
      // Only if the device state it came from still exists (not reset by a unit test).
      DeviceState* s = nullptr;
      try {
        s = &device_state(d);
      } catch (...) {
      }
      if (s != nullptr && s->generation == generations[d]) release_pooled_event(d, e);
    }
  }
  ~ThreadEventCache() { flush(); }
};

thread_local ThreadEventCache thread_events;
thread_local std::uint64_t cross_stream_waits = 0;

}  // namespace

void flush_thread_event_cache() noexcept { thread_events.flush(); }

std::uint64_t cross_stream_waits_on_this_thread() noexcept { return cross_stream_waits; }

void count_cross_stream_wait() noexcept { ++cross_stream_waits; }

void order_after(CUstream to, CUstream from, int device) {
  count_cross_stream_wait();
  std::uint64_t generation = device_state(device).generation;
  CUevent e = thread_events.take(device, generation);
  if (e == nullptr) e = acquire_pooled_event(device);
  auto give_back = [&] {
    if (!thread_events.keep(device, generation, e)) release_pooled_event(device, e);
  };
  CUresult r = cu.EventRecord(e, from);
  if (r != CUDA_SUCCESS) {
    give_back();
    check(r, cu.EventRecord.name(), Resource::of(ResourceKind::stream, from, device));
  }
  r = cu.StreamWaitEvent(to, e, 0);
  give_back();
  check(r, cu.StreamWaitEvent.name(), Resource::of(ResourceKind::stream, to, device));
}

}  // namespace detail

}  // namespace cudakit
