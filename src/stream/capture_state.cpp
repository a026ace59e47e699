// The books of the captures in progress (capture_state.hpp): joins and leaves, the
// registry by capture id, the capture counts, and the waits between streams while
// captures run (DESIGN 6 and 9). A stream outside a capture waits for a capturing
// stream's earlier work on that stream's capture fence (Note [Tracking inside a capture]
// in src/memory/allocation.cpp).
#include "stream/capture_state.hpp"

#include <algorithm>
#include <mutex>
#include <string>
#include <utility>

#include "cudakit/detail/capture_counts.hpp"
#include "cudakit/detail/capture_guard.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "device/capture_tolerant_scope.hpp"
#include "driver/checked_call.hpp"
#include "driver/thread_words.hpp"
#include "stream/stream_state_of.hpp"
#include "stream/event_pool.hpp"

namespace cudakit::detail {

using driver::cu;

CapturedCallbackHook keep_callback_for_capture = nullptr;
void (*after_capture_read_hook)() = nullptr;

namespace {

std::string stream_words(const StreamState* s) { return describe(stream_resource_of(s)); }

// The captures in progress, by the driver's capture id: a stream that joins a capture
// through a raw event wait is found here.
std::mutex registry_mutex;
std::unordered_map<std::uint64_t, CaptureState*>& registry() {
  static auto* m = new std::unordered_map<std::uint64_t, CaptureState*>;
  return *m;
}
// Events recorded through cudakit on a stream of a capture in progress, by handle (under
// registry_mutex): a stream that waits on one joins that capture, and is marked first.
// A capture's entries go when it ends.
std::unordered_map<CUevent, CaptureState*>& recorded_in_capture() {
  static auto* m = new std::unordered_map<CUevent, CaptureState*>;
  return *m;
}

// A capture counts from the moment the driver began it until it ended (capture_counts.hpp),
// under registry_mutex. Its end takes down exactly what its start counted, on whichever
// thread it runs: the owner thread's strict count included, through the pointer the
// capture keeps (a count left behind would defer every later free there, to a safe point
// that never comes).
void count_capture(CaptureState* c) {
  if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
    c->strict_count = &strict_captures_on_this_thread;
    c->strict_count->fetch_add(1, std::memory_order_relaxed);
  }
  if (c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL) global_mode_captures.fetch_add(1, std::memory_order_relaxed);
  active_captures.fetch_add(1, std::memory_order_acq_rel);
}

void uncount_capture(CaptureState* c) {
  if (c->strict_count != nullptr) c->strict_count->fetch_sub(1, std::memory_order_relaxed);
  c->strict_count = nullptr;
  if (c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL) global_mode_captures.fetch_sub(1, std::memory_order_relaxed);
  active_captures.fetch_sub(1, std::memory_order_acq_rel);
}

// A thread that ends with strict captures still counted (their scopes live on, to be
// destroyed elsewhere) takes its count's address back from them: the count dies with
// the thread. Made when the thread first begins a strict capture.
struct StrictCountOwner {
  bool armed = false;
  ~StrictCountOwner() {
    if (strict_captures_on_this_thread.load(std::memory_order_relaxed) == 0) return;
    std::lock_guard lock(registry_mutex);
    for (auto& [id, c] : registry())
      if (c->strict_count == &strict_captures_on_this_thread) c->strict_count = nullptr;
  }
};
thread_local StrictCountOwner strict_count_owner;

}  // namespace

namespace {

// Records `s`'s capture fence: the work submitted to it so far. The caller holds the
// stream's claim (StreamMarks::claim_for_capture), so no capture begins on it meanwhile
// and the fence is recorded live, never into somebody's graph.
void record_fence(StreamState* s) {
  CUevent fence = s->capture_fence.load(std::memory_order_acquire);
  if (fence == nullptr) {
    CaptureTolerantScope tolerant(s->device);
    CUevent made = acquire_pooled_event(s->device);
    if (s->capture_fence.compare_exchange_strong(fence, made, std::memory_order_acq_rel)) fence = made;
    else release_pooled_event(s->device, made);
  }
  checked_call(cu.EventRecord, stream_resource_of(s), fence, s->handle);
}

// Claims `s` and records its fence: false, having recorded nothing, when a capture holds
// or claims it already. True: `s` is claimed, for the caller to mark or drop.
bool claim_and_record_fence(StreamState* s) {
  if (!s->marks.claim_for_capture()) return false;
  try {
    record_fence(s);
  } catch (...) {
    s->marks.drop_claim();
    throw;
  }
  return true;
}

// The claimed stream `s` enters capture `c` (room for it is reserved already).
void mark_claimed_member(CaptureState* c, StreamState* s) noexcept {
  s->marks.mark_claimed_capturing(c, c->owner);
  c->members.emplace_back(s);
}

}  // namespace

void release_capture_fence(int device, CUevent fence) noexcept { release_pooled_event(device, fence); }

// ---- joins ----

// `s` enters capture `c` in cudakit's books. A capture's start and a fork call this before
// the driver makes the stream capture (Note [Pins and marks]): the claim, the capture
// fence, the mark, then the wait for the threads that pinned `s` before they could see it
// (a free or a hand-off event from another thread). Their work on `s` is submitted before
// the capture begins, and all later work of theirs sees the mark and stays out of the
// capture, which would otherwise take it in as nodes of the graph.
// False, having recorded and changed nothing, when `s` is in a capture already, or another
// capture claimed it (two threads began captures on it at once: one of them wins, whole,
// and the loser's fence cannot land in the winner's capture).
bool join_capture(CaptureState* c, StreamState* s) {
  c->members.reserve(c->members.size() + 1);
  if (!claim_and_record_fence(s)) return false;
  mark_claimed_member(c, s);
  return true;
}

void leave_capture(CaptureState* c, StreamState* s) noexcept {
  auto member = std::find(c->members.begin(), c->members.end(), s);
  if (member == c->members.end()) return;  // never joined: nothing to undo
  Ref<StreamState> held = std::move(*member);  // kept until it is unmarked
  c->members.erase(member);
  s->marks.unmark_capturing(c);
}

void throw_already_capturing(const StreamState* s) {
  throw CaptureError(stream_words(s) + " is already capturing (a capture on it, or one it joined, is in progress "
                     "or beginning); captures do not nest");
}

// ---- the registry ----

void register_capture(CaptureState* c) {
  if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED) strict_count_owner.armed = true;  // made on this thread now
  std::lock_guard lock(registry_mutex);
  registry()[c->id] = c;
  count_capture(c);
}

void forget_capture(CaptureState* c) {
  for (const Ref<StreamState>& m : c->members) m->marks.unmark_capturing(c);
  std::lock_guard lock(registry_mutex);
  auto it = registry().find(c->id);
  if (it != registry().end() && it->second == c) registry().erase(it);
  std::erase_if(recorded_in_capture(), [c](const auto& entry) { return entry.second == c; });
  uncount_capture(c);
}

// ---- submissions from other threads (DESIGN 9) ----

void refuse_submission_from_other_thread(StreamState* state, const char* what) {
  if (state->marks.capture() == nullptr) return;
  std::thread::id owner = state->marks.capture_owner();
  std::thread::id me = std::this_thread::get_id();
  if (owner == me || owner == std::thread::id{}) return;
  throw CaptureError(std::string(what) + " on " + stream_words(state) + " from " + thread_words(me) +
                     " refused: the stream is being captured into a graph by " + thread_words(owner) +
                     ", and work from another thread would land silently in that graph; submit it from the "
                     "capturing thread, or to another stream");
}

// ---- waits between streams ----

void wait_while_capturing(StreamRef to, StreamState* to_state, StreamRef from, StreamState* from_state) {
  CaptureState* to_capture = to_state->marks.capture();
  CaptureState* from_capture = from_state->marks.capture();
  if (from_capture != nullptr) refuse_submission_from_other_thread(from_state, cu.EventRecord.name());
  if (to_capture != nullptr) refuse_submission_from_other_thread(to_state, cu.StreamWaitEvent.name());
  if (from_capture == to_capture) {  // neither captures, or both are in one capture (a graph edge)
    order_after(to.handle(), from.handle(), from.device_ordinal());
    return;
  }
  if (to_capture == nullptr) {
    // A fork: `to` joins `from`'s capture. Its work so far stays outside (its fence).
    // Marked before the wait that makes it capture (join).
    CaptureState* c = from_capture;
    if (!join_capture(c, to_state)) throw_already_capturing(to_state);  // another thread's capture took it meanwhile
    try {
      order_after(to.handle(), from.handle(), from.device_ordinal());
    } catch (...) {
      leave_capture(c, to_state);
      throw;
    }
    return;
  }
  if (from_capture == nullptr)
    throw CaptureError(stream_words(to_state) + " is capturing and cannot wait for work outside its capture (on " +
                       stream_words(from_state) + "): a graph cannot depend on work outside it; order "
                       "that work before the capture begins (the graph's launch waits for it)");
  throw CaptureError(stream_words(to_state) + " and " + stream_words(from_state) +
                     " are in two different captures; a wait between them would merge the captures, which is not "
                     "supported");
}

void note_event_record(StreamState* stream, CUevent event) {
  // Only records inside this thread's capture take the lock. An entry left behind by a
  // later record outside the capture costs one needless mark, which after_event_wait
  // undoes when the driver does not confirm the join.
  auto* c = stream->marks.capture();
  if (c == nullptr || stream->marks.capture_owner() != std::this_thread::get_id()) return;
  std::lock_guard lock(registry_mutex);
  recorded_in_capture()[event] = c;
}

CaptureState* before_event_wait(StreamRef, StreamState* state, CUevent event) {
  // Claimed while the fence is recorded, so that no capture begins on the stream meanwhile
  // and takes the fence in. No claim: a capture holds or claims the stream, and the wait
  // does not make it join another one.
  if (!claim_and_record_fence(state)) return nullptr;
  CaptureState* c = nullptr;
  try {
    std::lock_guard lock(registry_mutex);
    auto it = recorded_in_capture().find(event);
    if (it != recorded_in_capture().end() && it->second->owner == std::this_thread::get_id()) {
      c = it->second;  // this thread's capture: it cannot end meanwhile
      c->members.reserve(c->members.size() + 1);
    }
  } catch (...) {
    state->marks.drop_claim();
    throw;
  }
  if (c == nullptr) {
    state->marks.drop_claim();
    return nullptr;
  }
  mark_claimed_member(c, state);
  return c;
}

void undo_event_wait_join(StreamState* state, CaptureState* joined) noexcept {
  if (joined != nullptr) leave_capture(joined, state);
}

void after_event_wait(StreamRef stream, StreamState* state, CaptureState* joined) {
  if (joined == nullptr && state->marks.capture() != nullptr) return;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t id = 0;
  CUresult r = cu.StreamGetCaptureInfo(stream.handle(), &status, &id, nullptr, nullptr, nullptr);
  if (joined != nullptr) {
    if (r == CUDA_SUCCESS && status == CU_STREAM_CAPTURE_STATUS_ACTIVE && id == joined->id) return;  // confirmed
    leave_capture(joined, state);  // the driver joined it to no capture, or to another one (found below)
  }
  if (r != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_ACTIVE) return;
  // The capture and its owner are read under the registry's lock: a capture another
  // thread owns may end, and be freed, the moment the lock is released, while this
  // thread's own capture cannot end meanwhile.
  CaptureState* c = nullptr;
  std::thread::id owner;
  {
    std::lock_guard lock(registry_mutex);
    auto it = registry().find(id);
    if (it != registry().end()) {
      c = it->second;
      owner = c->owner;
    }
  }
  if (c == nullptr) return;  // a capture cudakit did not begin
  if (owner != std::this_thread::get_id())
    throw CaptureError("cuStreamWaitEvent on " + stream_words(state) + " from " + thread_words(std::this_thread::get_id()) +
                       " made it join a capture owned by " + thread_words(owner) +
                       "; work from another thread must not enter that graph");
  // The driver made the stream capture already, and the mark follows: an event recorded
  // in the capture other than through cudakit (EventRef::record marks before the wait).
  // A free or hand-off from another thread in between can still land in the capture.
  // Its fence was recorded before the wait (before_event_wait).
  c->members.reserve(c->members.size() + 1);
  if (!state->marks.mark_capturing(c, c->owner)) throw_already_capturing(state);
  c->members.emplace_back(state);
}

void wait_for_stream_work(CUstream to, int, StreamState* from) {
  // Another thread may own `from` and destroy it, or begin a capture on it, meanwhile: the
  // event recorded below would then be recorded into that capture. Pinned, then looked at
  // (Note [Pins and marks]): alive and not capturing while the pin is held.
  PinnedStream pinned(from);
  if (!pinned) return;  // a dead stream's work completed
  if (pinned.capturing()) {
    CUevent fence = from->capture_fence.load(std::memory_order_acquire);
    if (fence == nullptr)
      throw CaptureError("a buffer last used on " + stream_words(from) +
                         ", which is capturing now, is used on another stream outside that capture, and its earlier "
                         "work cannot be waited for from there: use the buffer inside the capture, or before it begins");
    count_cross_stream_wait();
    checked_call(cu.StreamWaitEvent, Resource::of(ResourceKind::stream, to, from->device), to, fence, 0);
    return;
  }
  order_after(to, from->handle, from->device);
}

}  // namespace cudakit::detail
