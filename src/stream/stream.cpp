#include "cudakit/stream.hpp"

#include <mutex>
#include <string>
#include <unordered_map>

#include "cudakit/detail/capture_guard.hpp"
#include "device/capture_tolerant_scope.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "device/device_state.hpp"
#include "driver/profiler_names.hpp"
#include "stream/capture_state.hpp"
#include "stream/create_prologue.hpp"
#include "stream/event_pool.hpp"
#include "stream/host_callbacks.hpp"
#include "stream/stream_state_of.hpp"

namespace cudakit {

using driver::cu;

namespace {
Resource stream_resource(CUstream s, int device) { return Resource::of(ResourceKind::stream, s, device); }

CUstream create_stream(ContextRef context, int priority) {
  Resource res = detail::begin_create(context, cu.StreamCreateWithPriority.name());
  auto [least, greatest] = context.stream_priority_range();
  if (priority > least || priority < greatest)
    throw InvalidArgument("stream priority " + std::to_string(priority) + " is outside device " +
                          std::to_string(context.device_ordinal()) + "'s range [" + std::to_string(greatest) +
                          " (most urgent), " + std::to_string(least) + " (least urgent)]");
  CUstream s = nullptr;
  // DESIGN 1: never a blocking stream.
  context.make_current();
  detail::CaptureTolerantScope tolerant;  // a stream made while a capture runs leaves it valid
  check(cu.StreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, priority), cu.StreamCreateWithPriority.name(), res);
  detail::profiler::name_stream(s, context.device_ordinal());
  return s;
}
// A capturing stream's work runs only when its graph is launched: there is nothing to
// wait for or query yet, and the driver would invalidate the capture (DESIGN 6).
void refuse_if_capturing(StreamRef stream, const char* call) {
  if (detail::active_captures.load(std::memory_order_relaxed) == 0) [[likely]]
    return;
  detail::StreamState* s = detail::stream_state_of(stream);
  if (s->marks.capture() == nullptr) return;
  throw CaptureError(std::string(call) + " on " + describe(stream_resource(stream.handle(), stream.device_ordinal())) +
                     " refused: the stream is capturing, so its work runs only when the graph is launched and there "
                     "is nothing to wait for yet (the driver would invalidate the capture); synchronize after the "
                     "capture ends, or on a stream outside it");
}
}  // namespace

void StreamRef::throw_empty(const char* call) {
  throw EmptyHandle(std::string(call) +
                    ": use of an empty Stream (moved-from or default-constructed); cudakit never falls back to the "
                    "legacy default stream");
}

void StreamRef::throw_destroyed(const char* call) const {
  throw EmptyHandle(std::string(call) + ": use of a StreamRef to " +
                    describe(stream_resource(handle_, device_)) +
                    " after its Stream was destroyed (or released); a StreamRef does not keep its stream alive, so "
                    "keep the Stream until its last use");
}

bool StreamRef::query() const {
  require_handle(cu.StreamQuery.name());
  require_live(cu.StreamQuery.name());
  refuse_if_capturing(*this, cu.StreamQuery.name());
  Resource res = stream_resource(handle_, device_);
  check_not_poisoned(cu.StreamQuery.name(), res);
  CUresult r = cu.StreamQuery(handle_);
  if (r == CUDA_ERROR_NOT_READY) return false;
  if (r != CUDA_SUCCESS) [[unlikely]] {
    res.last_launch = detail::last_launch_of(state_);  // a kernel's fault surfaces here
    check(r, cu.StreamQuery.name(), res);
  }
  return true;
}

void StreamRef::synchronize() const {
  require_handle(cu.StreamSynchronize.name());
  require_live(cu.StreamSynchronize.name());
  refuse_if_capturing(*this, cu.StreamSynchronize.name());
  Resource res = stream_resource(handle_, device_);
  check_not_poisoned(cu.StreamSynchronize.name(), res);
  CUresult r = cu.StreamSynchronize(handle_);
  if (r != CUDA_SUCCESS) [[unlikely]] {
    res.last_launch = detail::last_launch_of(state_);  // a kernel's fault surfaces here
    check(r, cu.StreamSynchronize.name(), res);
  }
}

void StreamRef::wait(EventRef event) const {
  require_handle(cu.StreamWaitEvent.name());
  require_live(cu.StreamWaitEvent.name());
  if (!event) detail::throw_empty_handle("Event");
  Resource res = stream_resource(handle_, device_);
  check_not_poisoned(cu.StreamWaitEvent.name(), res);
  if (detail::active_captures.load(std::memory_order_relaxed) != 0) [[unlikely]] {
    // The wait may make this stream join a capture (the event was recorded in one).
    detail::StreamState* s = detail::stream_state_of(*this);
    detail::check_capturing_thread(s, cu.StreamWaitEvent.name());
    detail::CaptureState* joined = detail::before_event_wait(*this, s, event.handle());
    if (CUresult r = cu.StreamWaitEvent(handle_, event.handle(), 0); r != CUDA_SUCCESS) {
      detail::undo_event_wait_join(s, joined);
      check(r, cu.StreamWaitEvent.name(), res);
    }
    detail::after_event_wait(*this, s, joined);
    return;
  }
  check(cu.StreamWaitEvent(handle_, event.handle(), 0), cu.StreamWaitEvent.name(), res);
}

void StreamRef::wait(StreamRef other) const {
  require_handle(cu.StreamWaitEvent.name());
  other.require_handle(cu.EventRecord.name());
  require_live(cu.StreamWaitEvent.name());
  other.require_live(cu.EventRecord.name());
  if (other.handle_ == handle_) return;  // stream order already holds
  check_not_poisoned(cu.StreamWaitEvent.name(), stream_resource(handle_, device_));
  if (detail::active_captures.load(std::memory_order_relaxed) != 0) [[unlikely]] {
    detail::wait_while_capturing(*this, detail::stream_state_of(*this), other, detail::stream_state_of(other));
    return;
  }
  detail::order_after(handle_, other.handle_, other.device_);
}

int StreamRef::priority() const {
  require_handle(cu.StreamGetPriority.name());
  require_live(cu.StreamGetPriority.name());
  int p = 0;
  Resource res = stream_resource(handle_, device_);
  check_not_poisoned(cu.StreamGetPriority.name(), res);
  check(cu.StreamGetPriority(handle_, &p), cu.StreamGetPriority.name(), res);
  return p;
}

namespace detail {

namespace {
// Runs `callback` on the driver's thread, where nothing may escape: what it throws is
// parked as `origin`, said by `words()` (made only then).
template <class Words>
void run_parking_what_it_throws(HostCallback& callback, const char* origin, Words words) noexcept {
  try {
    callback.run();
  } catch (const std::exception& e) {
    park_error({CUDA_SUCCESS, origin, words() + " threw: " + e.what()});
  } catch (...) {
    park_error({CUDA_SUCCESS, origin, words() + " threw an exception that is not a std::exception"});
  }
}

void CUDA_CB run_host_callback(void* data) {
  std::unique_ptr<HostCallback> callback(static_cast<HostCallback*>(data));
  run_parking_what_it_throws(*callback, "host callback", [&] {
    return "a host callback on " + describe(stream_resource(callback->stream, callback->device));
  });
}
}  // namespace

void CUDA_CB run_kept_host_callback(void* data) noexcept {
  run_parking_what_it_throws(*static_cast<HostCallback*>(data), "graph host node",
                             [] { return std::string("a graph's host callback"); });
}

void enqueue_host_callback(const StreamRef& ref, std::unique_ptr<HostCallback> callback) {
  CUstream stream = ref.handle();
  int device = ref.device_ordinal();
  callback->stream = stream;
  callback->device = device;
  Resource res = stream_resource(stream, device);
  check_not_poisoned(cu.LaunchHostFunc.name(), res);
  if (active_captures.load(std::memory_order_relaxed) != 0) {
    StreamState* s = stream_state_of(ref);
    if (auto* capture = capture_owned_here(s, [] { return std::string(cu.LaunchHostFunc.name()); })) {
      // Captured: a host node that runs at every launch, so the graph owns the callable.
      HostCallback* owned = keep_callback_for_capture(capture, std::move(callback));
      check(cu.LaunchHostFunc(stream, &run_kept_host_callback, owned), cu.LaunchHostFunc.name(), res);
      return;
    }
  }
  // A stream captured outside cudakit would replay a callable that frees itself after its
  // first run: refuse it.
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  check(cu.StreamIsCapturing(stream, &status), cu.StreamIsCapturing.name(), res);
  if (status != CU_STREAM_CAPTURE_STATUS_NONE)
    throw CaptureError("cuLaunchHostFunc on " + describe(res) +
                       " refused: the stream is being captured by a capture cudakit did not begin, and the graph "
                       "could not own the callback; capture with cudakit::capture");
  check(cu.LaunchHostFunc(stream, &run_host_callback, callback.get()), cu.LaunchHostFunc.name(), res);
  callback.release();  // the driver owns it now; run_host_callback frees it
}

}  // namespace detail

Stream::Stream(CUstream handle, int device, detail::StreamState* state) noexcept {
  state->handle = handle;
  state->device = device;
  ref_ = StreamRef(handle, device, state);
}

// The state is made before the stream: when making it throws, there is no handle to leak.
Stream::Stream(ContextRef context, int priority)
    : Stream(std::make_unique<detail::StreamState>(), context, priority) {}

Stream::Stream(std::unique_ptr<detail::StreamState> state, ContextRef context, int priority)
    : Stream(create_stream(context, priority), context.device_ordinal(), state.get()) {
  state.release();  // the Stream holds its first reference
}

Stream::Stream(Device device, int priority)
    : Stream(ContextRef(detail::library_context(device.ordinal()), device.ordinal()), priority) {}

Stream Stream::adopt(CUstream handle, int device) {
  if (handle == nullptr || handle == CU_STREAM_LEGACY || handle == CU_STREAM_PER_THREAD)
    throw InvalidArgument("Stream::adopt: the legacy or per-thread default stream cannot be adopted; cudakit uses "
                          "only non-blocking streams it can own");
  unsigned flags = 0;
  Resource res = stream_resource(handle, device);
  check_not_poisoned(cu.StreamGetFlags.name(), res);
  check(cu.StreamGetFlags(handle, &flags), cu.StreamGetFlags.name(), res);
  if ((flags & CU_STREAM_NON_BLOCKING) == 0)
    throw InvalidArgument("Stream::adopt: " + describe(stream_resource(handle, device)) +
                          " is a blocking stream (it synchronizes with the legacy default stream); create it with "
                          "CU_STREAM_NON_BLOCKING");
  auto state = std::make_unique<detail::StreamState>();  // when this throws, the caller still owns the handle
  return Stream(handle, device, state.release());
}

void Stream::reset() noexcept {
  if (!ref_) return;
  StreamRef ref = std::exchange(ref_, {});
  detail::StreamState* state = ref.state();
  if (state != nullptr) detail::end_generation(state);  // every ref made from this owner is stale now
  try {
    const bool capturing = state != nullptr && state->marks.capture() != nullptr;
    if (state != nullptr && state->trackers() > 0) {
      // A buffer still names this stream as its owner, writer or reader: finish the
      // stream's work so that "dead" means "done" for that buffer (detail/stream_state.hpp).
      // A capturing stream's live work is what came before its capture, its capture fence
      // (synchronizing the stream itself would be refused and invalidate the capture).
      // The fence wait is a call the driver refuses on a thread that is capturing (it
      // would invalidate this thread's capture), so it runs under a tolerant scope.
      CUevent fence = capturing ? state->capture_fence.load(std::memory_order_acquire) : nullptr;
      detail::CaptureTolerantScope tolerant_wait;
      CUresult r = capturing ? (fence != nullptr ? cu.EventSynchronize(fence) : CUDA_SUCCESS)
                             : cu.StreamSynchronize(ref.handle());
      if (r != CUDA_SUCCESS) {
        Resource res = stream_resource(ref.handle(), ref.device_ordinal());
        res.last_launch = detail::last_launch_of(state);
        park_driver_error(r, capturing ? cu.EventSynchronize.name() : cu.StreamSynchronize.name(), res, "~Stream");
      }
    }
    if (capturing)
      park_error({CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "~Stream",
                  describe(stream_resource(ref.handle(), ref.device_ordinal())) +
                      " was destroyed while a capture it takes part in is in progress; that capture fails"});
    // Dead from now on, once the threads that pinned the handle before they could see that
    // are done with it (a buffer freed or ordered on another thread: Note [Pins and marks]).
    if (state != nullptr) state->marks.mark_dead();
    detail::CaptureTolerantScope tolerant;  // destroying a stream beside a capture leaves it valid
    CUresult r = cu.StreamDestroy(ref.handle());
    if (r != CUDA_SUCCESS)
      park_driver_error(r, cu.StreamDestroy.name(), stream_resource(ref.handle(), ref.device_ordinal()), "~Stream");
  } catch (const std::exception& e) {
    park_error({CUDA_SUCCESS, "~Stream", e.what()});
  }
  if (state != nullptr) detail::release(state);
}

namespace detail {

namespace {
std::mutex borrowed_mutex;
// Each state's first reference is the registry's, and the registry is never destroyed:
// trackers may name a borrowed stream's state past the end of static destruction.
std::unordered_map<CUstream, Ref<StreamState>>& borrowed() {
  static auto* m = new std::unordered_map<CUstream, Ref<StreamState>>;
  return *m;
}
}  // namespace

StreamState* borrowed_stream_state(CUstream handle, int device) {
  std::lock_guard lock(borrowed_mutex);
  auto& m = borrowed();
  auto it = m.find(handle);
  if (it != m.end() && it->second->device == device) return it->second.get();
  // A handle the registry knows on another device names another stream: the one it named
  // was destroyed (a borrowed stream outlives its buffers' uses, StreamRef says), and the
  // driver gave its handle to a new stream. The new stream gets a state of its own; the
  // old one lives on while trackers still name it.
  auto s = make_ref<StreamState>();
  s->handle = handle;
  s->device = device;
  if (it != m.end()) {
    it->second = std::move(s);
    return it->second.get();
  }
  return m.emplace(handle, std::move(s)).first->second.get();
}

}  // namespace detail

}  // namespace cudakit
