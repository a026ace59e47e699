// Stream capture: the scope, the tracking hook, joins and forks (DESIGN 6 and 9).
//
// Note [Tracking inside a capture]. Work on a capturing stream runs only when the graph
// is launched, perhaps never, perhaps a thousand times, perhaps on another stream. So a
// use inside a capture must not change the buffer's live tracking (its last writer stays
// the stream that really wrote it), and must not wait for anything recorded before the
// capture (the driver refuses that: STREAM_CAPTURE_ISOLATION). Instead the capture
//   - records the buffer in the graph's resources (kept alive; ordered at each launch,
//     graph_exec.cpp), and
//   - orders uses across the capture's own streams, like live tracking does across live
//     streams: an event recorded on one captured stream and waited on another, which the
//     driver turns into a graph edge.
// A stream outside the capture that must wait for a capturing stream's earlier work waits
// on that stream's capture fence, recorded just before the stream entered the capture.
#include "cudakit/capture.hpp"

#include <algorithm>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>

#include "cudakit/detail/capture_guard.hpp"
#include "device/capture_tolerant_scope.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "driver/checked_call.hpp"
#include "cudakit/kernel.hpp"
#include "cudakit/memory_pool.hpp"
#include "graph/capture_state.hpp"
#include "stream/deferred.hpp"
#include "device/device_state.hpp"
#include "stream/event_pool.hpp"

namespace cudakit {

using driver::cu;

namespace detail {

namespace {

[[maybe_unused]] const bool capture_hook_installed = (capture_use_hook = &capture_use, true);

std::string thread_words(std::thread::id id) {
  std::ostringstream out;
  out << "thread " << id;
  return out.str();
}

std::string stream_words(const StreamState* s) {
  return describe(Resource::of(ResourceKind::stream, s->handle, s->device));
}

Resource stream_resource(const StreamState* s) { return Resource::of(ResourceKind::stream, s->handle, s->device); }

CUstreamCaptureMode driver_mode(CaptureMode mode) {
  switch (mode) {
    case CaptureMode::per_thread: return CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    case CaptureMode::global: return CU_STREAM_CAPTURE_MODE_GLOBAL;
    case CaptureMode::relaxed: return CU_STREAM_CAPTURE_MODE_RELAXED;
  }
  return CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
}

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

// A capture counts from the moment the driver began it until it ended (capture_guard.hpp),
// under registry_mutex. Its end takes down exactly what its start counted, on whichever
// thread it runs: the owner thread's strict count included, through the pointer the
// capture keeps (a count left behind would defer every later free there, to a safe point
// that never comes).
void count_capture(CaptureState* c) {
  if (c->mode != CaptureMode::relaxed) {
    c->strict_count = &strict_captures_on_this_thread;
    c->strict_count->fetch_add(1, std::memory_order_relaxed);
  }
  if (c->mode == CaptureMode::global) global_mode_captures.fetch_add(1, std::memory_order_relaxed);
  active_captures.fetch_add(1, std::memory_order_acq_rel);
}

void uncount_capture(CaptureState* c) {
  if (c->strict_count != nullptr) c->strict_count->fetch_sub(1, std::memory_order_relaxed);
  c->strict_count = nullptr;
  if (c->mode == CaptureMode::global) global_mode_captures.fetch_sub(1, std::memory_order_relaxed);
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

// Records `s`'s capture fence: the work submitted to it so far (it is not capturing yet).
void record_fence(StreamState* s) {
  CUevent fence = s->capture_fence.load(std::memory_order_acquire);
  if (fence == nullptr) {
    CaptureTolerantScope tolerant(s->device);
    CUevent made = acquire_pooled_event(s->device);
    if (s->capture_fence.compare_exchange_strong(fence, made, std::memory_order_acq_rel)) fence = made;
    else release_pooled_event(s->device, made);
  }
  checked_call(cu.EventRecord, stream_resource(s), fence, s->handle);
}

}  // namespace

// `s` enters capture `c` in cudakit's books. A capture's start and a fork call this before
// the driver makes the stream capture (Note [Pins and marks]): the mark, then the wait for
// the threads that pinned `s` before they could see it (a free or a hand-off event from
// another thread). Their work on `s` is submitted before the capture begins, and all later
// work of theirs sees the mark and stays out of the capture, which would otherwise take it
// in as nodes of the graph.
// False, changing nothing, when `s` is in a capture already (two threads began captures on
// it at once: one of them wins, whole).
bool join_capture(CaptureState* c, StreamState* s) {
  c->members.reserve(c->members.size() + 1);
  if (!s->marks.mark_capturing(c, c->owner)) return false;
  c->members.emplace_back(s);
  return true;
}

void leave_capture(CaptureState* c, StreamState* s) noexcept {
  auto member = std::find(c->members.begin(), c->members.end(), s);
  if (member == c->members.end()) return;  // never joined: nothing to undo
  Ref<StreamState> held = std::move(*member);  // kept until it is unmarked
  c->members.erase(member);
  s->marks.unmark_capturing(c);
}

namespace {

[[noreturn]] void throw_already_capturing(const StreamState* s) {
  throw CaptureError(stream_words(s) + " is already capturing (a capture on it, or one it joined, is in progress); "
                     "captures do not nest");
}

// Everything a device needs that a capture may touch for the first time: done before
// the capture so that lazy set-up does not happen inside it (DESIGN 6).
void prepare_for_capture(int device) {
  ContextRef(library_context(device), device).make_current();
  service_stream(device);
  configure_default_pool(device);
  constexpr int warm_events = 4;
  CUevent events[warm_events] = {};
  int got = 0;
  try {
    for (; got < warm_events; ++got) events[got] = acquire_pooled_event(device);
  } catch (...) {
    for (int i = 0; i < got; ++i) release_pooled_event(device, events[i]);
    throw;
  }
  for (int i = 0; i < got; ++i) release_pooled_event(device, events[i]);
}

bool contains(const std::vector<StreamState*>& v, const StreamState* s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

void release_capture_fence(int device, CUevent fence) noexcept { release_pooled_event(device, fence); }

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

// ---- the tracking hook (Note [Tracking inside a capture]) ----

void capture_use(CaptureState* c, Allocation* allocation, StreamRef stream, Access access) {
  StreamState* s = stream_state_of(stream);
  if (s->marks.capture_owner() != std::this_thread::get_id()) {
    std::ostringstream what;
    what << "a use of buffer 0x" << std::hex << allocation->pointer;
    refuse_submission_from_other_thread(s, what.str().c_str());
  }
  // `c` is this thread's: it owns the capture (checked above).
  c->resources->add_use(allocation, access);
  if (manual_ordering_depth != 0) return;
  CaptureState::Order& o = c->order[allocation];
  if (access == Access::read) {
    if (o.writer == s || contains(o.readers, s)) return;
    if (o.writer != nullptr) order_after(s->handle, o.writer->handle, o.writer->device);
    o.readers.push_back(s);
    return;
  }
  if (o.writer != nullptr && o.writer != s) order_after(s->handle, o.writer->handle, o.writer->device);
  for (StreamState* r : o.readers)
    if (r != s) order_after(s->handle, r->handle, r->device);
  o.readers.clear();
  o.writer = s;
}

void note_launch_in_capture(StreamRef stream, const Function& function) {
  StreamState* s = stream_state_of(stream);
  auto* c = s->marks.capture();
  if (c == nullptr) return;
  if (s->marks.capture_owner() != std::this_thread::get_id())
    refuse_submission_from_other_thread(s, ("a launch of kernel '" + function.name() + "'").c_str());
  if (c->kernels.insert(&function.state()).second) c->resources->keep(std::make_shared<const Function>(function));
}

// ---- joins ----

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
    record_fence(to_state);
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
  if (state->marks.capture() != nullptr) return nullptr;
  record_fence(state);
  CaptureState* c = nullptr;
  {
    std::lock_guard lock(registry_mutex);
    auto it = recorded_in_capture().find(event);
    if (it != recorded_in_capture().end() && it->second->owner == std::this_thread::get_id()) c = it->second;
  }
  if (c == nullptr) return nullptr;
  if (!join_capture(c, state)) throw_already_capturing(state);
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
  CaptureState* c = nullptr;
  {
    std::lock_guard lock(registry_mutex);
    auto it = registry().find(id);
    if (it != registry().end()) c = it->second;
  }
  if (c == nullptr) return;  // a capture cudakit did not begin
  if (c->owner != std::this_thread::get_id())
    throw CaptureError("cuStreamWaitEvent on " + stream_words(state) + " from " + thread_words(std::this_thread::get_id()) +
                       " made it join a capture owned by " + thread_words(c->owner) +
                       "; work from another thread must not enter that graph");
  // The driver made the stream capture already, and the mark follows: an event recorded
  // in the capture other than through cudakit (EventRef::record marks before the wait).
  // A free or hand-off from another thread in between can still land in the capture.
  if (!join_capture(c, state)) throw_already_capturing(state);
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
    checked_call(cu.StreamWaitEvent, Resource::of(ResourceKind::stream, to, from->device), to, fence, 0);
    return;
  }
  order_after(to, from->handle, from->device);
}

}  // namespace detail

// ---- the scope ----

Capture::Capture(StreamRef stream, CaptureMode mode) : stream_(stream), mode_(mode) {
  using namespace detail;
  stream.require_handle(cu.StreamBeginCapture.name());
  StreamState* s = stream_state_of(stream);
  Resource res = stream_resource(s);
  check_not_poisoned(cu.StreamBeginCapture.name(), res);
  if (s->marks.capture() != nullptr) throw_already_capturing(s);
  run_deferred_tasks_if_any();
  prepare_for_capture(s->device);
  record_fence(s);

  auto state = std::make_unique<CaptureState>();
  state->owner = std::this_thread::get_id();
  state->mode = mode;
  state->device = s->device;
  state->members.reserve(4);
  state->resources = make_ref<GraphResources>(s->device);

  // Marked capturing before the driver begins (join says why): from here on, no other
  // thread's free or hand-off lands on the stream.
  if (!join_capture(state.get(), s)) throw_already_capturing(s);
  bool begun = false;
  try {
    checked_call(cu.StreamBeginCapture, res, stream.handle(), driver_mode(mode));
    begun = true;
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t id = 0;
    checked_call(cu.StreamGetCaptureInfo, res, stream.handle(), &status, &id, nullptr, nullptr, nullptr);
    state->id = id;
    if (mode != CaptureMode::relaxed) strict_count_owner.armed = true;  // made on this thread now
    std::lock_guard lock(registry_mutex);
    registry()[id] = state.get();
    count_capture(state.get());
  } catch (...) {
    if (begun) {  // never leave the stream capturing
      CUgraph partial = nullptr;
      if (cu.StreamEndCapture(stream.handle(), &partial) == CUDA_SUCCESS && partial != nullptr) cu.GraphDestroy(partial);
    }
    leave_capture(state.get(), s);
    throw;
  }
  state_ = state.release();
}

namespace detail {
namespace {

// How a capture ended: the graph and its resources, or what went wrong. On failure the
// graph is destroyed and the resources released already; what remains is the error, for
// Capture::end to throw or ~Capture to park.
struct CaptureOutcome {
  CUgraph graph = nullptr;
  Ref<GraphResources> resources;        // the graph's, when the capture succeeded
  CUresult end = CUDA_SUCCESS;          // cuStreamEndCapture's result
  std::exception_ptr failed_join;       // the first join of a forked stream that failed
  Resource origin;                      // the capturing stream

  bool succeeded() const noexcept { return end == CUDA_SUCCESS && !failed_join; }
};

// A strict capture ends on the thread that began it: the reason when this thread may not
// end capture `c`.
std::optional<std::string> refusal_to_end_here(const CaptureState* c) {
  if (c->mode == CaptureMode::relaxed || c->owner == std::this_thread::get_id()) return std::nullopt;
  return "the capture on " + stream_words(c->members.front().get()) + " was begun by " + thread_words(c->owner) +
         " and must end there (" + thread_words(std::this_thread::get_id()) +
         " tried); only a relaxed capture may end on another thread";
}

// Joins every stream that joined the capture back into the origin (a fork left unjoined
// fails the capture: STREAM_CAPTURE_UNJOINED). Every join is tried; the first failure is
// returned, to be reported after the end (which must run in any case), even when the end
// succeeds (the user may have joined that stream already): a failed driver call is never
// swallowed.
std::exception_ptr join_forks_into_origin(const CaptureState* c) {
  const StreamState* origin = c->members.front().get();
  std::exception_ptr failed;
  for (std::size_t i = 1; i < c->members.size(); ++i) {
    try {
      order_after(origin->handle, c->members[i]->handle, c->members[i]->device);
    } catch (...) {
      if (!failed) failed = std::current_exception();
    }
  }
  return failed;
}

// Ends the driver's capture on `origin`. A capture never leaves a stream capturing: the
// driver ends the capture when it reports an invalidated or unjoined one, but an end that
// failed for another reason may have left the stream in capture mode. Ask, and end it
// again (that graph is dropped; the first failure is the one reported).
CUresult end_driver_capture(CUstream origin, CUgraph& graph) noexcept {
  try {
    CUresult r = cu.StreamEndCapture(origin, &graph);
    if (r == CUDA_SUCCESS || is_sticky(r)) return r;
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (cu.StreamIsCapturing(origin, &status) == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE) {
      CUgraph again = nullptr;
      if (cu.StreamEndCapture(origin, &again) == CUDA_SUCCESS && again != nullptr) cu.GraphDestroy(again);
    }
    return r;
  } catch (...) {
    return CUDA_ERROR_UNKNOWN;
  }
}

// Every stream of capture `c` leaves it, whatever the outcome: unmarked, out of the
// registry, uncounted, released (with `c`, which this frees).
void forget_capture(CaptureState* c) {
  std::unique_ptr<CaptureState> owned(c);
  for (const Ref<StreamState>& m : c->members) m->marks.unmark_capturing(c);
  {
    std::lock_guard lock(registry_mutex);
    auto it = registry().find(c->id);
    if (it != registry().end() && it->second == c) registry().erase(it);
    std::erase_if(recorded_in_capture(), [c](const auto& entry) { return entry.second == c; });
    uncount_capture(c);
  }
}

// Ends capture `c` and frees its state. On failure the partial graph is destroyed and the
// resources released before the outcome is returned.
CaptureOutcome end_capture(CaptureState* c) {
  CaptureOutcome out;
  out.origin = stream_resource(c->members.front().get());
  out.resources = std::move(c->resources);
  out.failed_join = join_forks_into_origin(c);
  out.end = end_driver_capture(c->members.front()->handle, out.graph);
  forget_capture(c);
  if (!out.succeeded()) {
    if (out.graph != nullptr) cu.GraphDestroy(out.graph);
    out.graph = nullptr;
    out.resources.reset();
    run_deferred_tasks_if_any();
  }
  return out;
}

// A failed join is the first failure: what went wrong at the end may follow from it. The
// end's own failure is then parked, unless it is the capture's failure (a capture error).
void park_end_failure_after_failed_join(const CaptureOutcome& out) noexcept {
  if (out.end != CUDA_SUCCESS && !is_capture_error(out.end))
    park_driver_error(out.end, cu.StreamEndCapture.name(), out.origin, "~Capture");
}

[[noreturn]] void throw_failure(const CaptureOutcome& out) {
  if (out.failed_join) {
    park_end_failure_after_failed_join(out);
    std::rethrow_exception(out.failed_join);
  }
  check(out.end, cu.StreamEndCapture.name(), out.origin);
  std::terminate();  // unreachable: a failed outcome has a failed end or join
}

// A destructor reports a failure without throwing. A capture error at the end is not
// reported: the scope was leaving without the graph anyway.
void park_failure(const CaptureOutcome& out) noexcept {
  if (out.failed_join) {
    park_end_failure_after_failed_join(out);
    try {
      std::rethrow_exception(out.failed_join);
    } catch (const DriverError& e) {
      park_error({e.code(), "~Capture", e.what()});
    } catch (const std::exception& e) {
      park_error({CUDA_SUCCESS, "~Capture", e.what()});
    } catch (...) {
    }
    return;
  }
  if (!is_capture_error(out.end)) park_driver_error(out.end, cu.StreamEndCapture.name(), out.origin, "~Capture");
}

}  // namespace
}  // namespace detail

std::optional<Graph> Capture::end() {
  using namespace detail;
  if (state_ == nullptr) throw CaptureError("Capture::end: the capture has already ended");
  if (auto refusal = refusal_to_end_here(state_))
    throw CaptureError(*refusal, CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
  int device = state_->device;
  CaptureOutcome out = end_capture(std::exchange(state_, nullptr));
  if (!out.succeeded()) throw_failure(out);
  CUgraph graph = out.graph;
  std::size_t nodes = 0;
  CUresult r = cu.GraphGetNodes(graph, nullptr, &nodes);
  if (r != CUDA_SUCCESS || nodes == 0) {
    // A failed count is raised (and, sticky, poisons the device) before the destroy: the
    // first error must be the one kept, not a ContextPoisoned carrying cuGraphDestroy.
    auto destroy = [&] {
      CUresult d = cu.GraphDestroy(graph);
      if (d != CUDA_SUCCESS)
        park_driver_error(d, cu.GraphDestroy.name(), Resource::of(ResourceKind::graph, graph, device), "capture end");
    };
    try {
      check(r, cu.GraphGetNodes.name(), Resource::of(ResourceKind::graph, graph, device));
    } catch (...) {
      destroy();
      throw;
    }
    destroy();
    out.resources.reset();
    run_deferred_tasks_if_any();
    return std::nullopt;  // an empty capture yields no graph
  }
  Graph result(graph, device, std::move(out.resources));  // takes the graph; its core holds the resources
  run_deferred_tasks_if_any();
  return result;
}

Graph Capture::end_nonempty() {
  StreamRef stream = stream_;
  std::optional<Graph> graph = end();
  if (!graph)
    throw EmptyCapture("the capture on " + describe(Resource::of(ResourceKind::stream, stream.handle(), stream.device_ordinal())) +
                       " recorded no work (capture_nonempty needs at least one node)");
  return std::move(*graph);
}

Capture::~Capture() {
  using namespace detail;
  if (state_ == nullptr) return;
  try {
    if (auto refusal = refusal_to_end_here(state_))
      park_error({CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "~Capture", *refusal});
    CaptureOutcome out = end_capture(std::exchange(state_, nullptr));
    if (!out.succeeded()) {
      park_failure(out);
    } else if (out.graph != nullptr) {  // a scope left without end(): the graph is discarded
      CUresult r = cu.GraphDestroy(out.graph);
      if (r != CUDA_SUCCESS)
        park_driver_error(r, cu.GraphDestroy.name(),
                          Resource::of(ResourceKind::graph, out.graph, stream_.device_ordinal()), "~Capture");
      out.resources.reset();
    }
    run_deferred_tasks_if_any();
  } catch (const std::exception& e) {
    park_error({CUDA_SUCCESS, "~Capture", e.what()});
  }
}

bool is_capturing(StreamRef stream) {
  stream.require_handle(cu.StreamIsCapturing.name());
  Resource res = Resource::of(ResourceKind::stream, stream.handle(), stream.device_ordinal());
  // On a poisoned device, fail before the driver, carrying the original (DESIGN 7).
  check_not_poisoned(cu.StreamIsCapturing.name(), res);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  checked_call(cu.StreamIsCapturing, res, stream.handle(), &status);
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

}  // namespace cudakit
