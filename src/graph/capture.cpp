// Stream capture: the scope, and what a capture hands to its graph (DESIGN 6 and 9).
//
// A capture's books (its owning thread, its streams and their marks, the order of buffer
// uses among them) are the stream layer's (src/stream/capture_state.hpp), where streams
// and buffers reach them. Here a capture is a GraphCapture (graph_capture.hpp): those
// books, and what the capture hands to its graph at the end: the resources the graph keeps
// alive and the kernels launched so far, each kept once. Streams, buffers and launches hand
// over their part through the three hooks installed below, since they cannot name a graph's
// resources.
#include "cudakit/capture.hpp"

#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "cudakit/detail/capture_guard.hpp"
#include "device/capture_tolerant_scope.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "driver/checked_call.hpp"
#include "driver/profiler_names.hpp"
#include "driver/thread_words.hpp"
#include "cudakit/kernel.hpp"
#include "cudakit/memory_pool.hpp"
#include "graph/graph_capture.hpp"
#include "launch/launch_in_capture.hpp"
#include "stream/stream_state_of.hpp"
#include "stream/deferred.hpp"
#include "device/device_state.hpp"
#include "stream/event_pool.hpp"

namespace cudakit {

using driver::cu;

namespace detail {

namespace {

// A host callback submitted to a capturing stream: the graph owns it and runs it at every
// launch.
HostCallback* keep_callback(CaptureState* c, std::unique_ptr<HostCallback> callback) {
  return graph_capture(c).resources->add_callback(std::move(callback));
}

// A buffer used on a capturing stream: the graph keeps it alive, with how it was used.
void keep_buffer(CaptureState* c, Allocation* allocation, Access access) {
  graph_capture(c).resources->add_use(allocation, access);
}

// A kernel launched on a capturing stream: the graph keeps its module loaded, once per
// kernel. Noted as kept only once it is: when keeping it throws, the next launch of the
// kernel in this capture tries again.
void keep_kernel(CaptureState* c, const Function& function) {
  GraphCapture& g = graph_capture(c);
  if (g.kernels.contains(&function.state())) return;
  g.kernels.reserve(g.kernels.size() + 1);
  g.resources->keep(std::make_shared<const Function>(function));
  g.kernels.insert(&function.state());
}

[[maybe_unused]] const bool capture_hooks_installed =
    (keep_callback_for_capture = &keep_callback, keep_buffer_for_capture = &keep_buffer,
     keep_kernel_for_capture = &keep_kernel, true);

// Destroys a graph the capture will not hand out (a failed capture's partial graph); a
// failed destroy is parked (DESIGN 2), since the capture's own failure is what is raised.
void destroy_graph_parking_failure(CUgraph graph, const Resource& origin, const char* where) noexcept {
  if (graph == nullptr) return;
  if (CUresult r = cu.GraphDestroy(graph); r != CUDA_SUCCESS)
    park_driver_error(r, cu.GraphDestroy.name(), Resource::of(ResourceKind::graph, graph, origin.device), where);
}

CUstreamCaptureMode driver_mode(CaptureMode mode) {
  switch (mode) {
    case CaptureMode::per_thread: return CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    case CaptureMode::global: return CU_STREAM_CAPTURE_MODE_GLOBAL;
    case CaptureMode::relaxed: return CU_STREAM_CAPTURE_MODE_RELAXED;
  }
  return CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
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

}  // namespace

}  // namespace detail

// ---- the scope ----

Capture::Capture(StreamRef stream, CaptureMode mode) : stream_(stream), mode_(mode) {
  using namespace detail;
  stream.require_handle(cu.StreamBeginCapture.name());
  StreamState* s = stream_state_of(stream);
  Resource res = stream_resource_of(s);
  check_not_poisoned(cu.StreamBeginCapture.name(), res);
  if (s->marks.capture() != nullptr) throw_already_capturing(s);
  run_deferred_tasks_if_any();
  prepare_for_capture(s->device);

  auto state = std::make_unique<GraphCapture>();
  state->owner = std::this_thread::get_id();
  state->mode = driver_mode(mode);
  state->device = s->device;
  state->members.reserve(4);
  state->resources = make_ref<GraphResources>(s->device);

  // Claimed, its fence recorded, and marked capturing before the driver begins (join says
  // why): from here on, no other thread's free or hand-off lands on the stream, and of two
  // captures begun on it at once, the loser records nothing.
  if (!join_capture(state.get(), s)) throw_already_capturing(s);
  bool begun = false;
  try {
    checked_call(cu.StreamBeginCapture, res, stream.handle(), state->mode);
    begun = true;
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t id = 0;
    checked_call(cu.StreamGetCaptureInfo, res, stream.handle(), &status, &id, nullptr, nullptr, nullptr);
    state->id = id;
    register_capture(state.get());
  } catch (...) {
    if (begun) {  // never leave the stream capturing
      CUgraph partial = nullptr;
      if (cu.StreamEndCapture(stream.handle(), &partial) == CUDA_SUCCESS)
        destroy_graph_parking_failure(partial, res, "capture begin");
    }
    leave_capture(state.get(), s);
    throw;
  }
  state_ = state.release();
  profiler::push(profiler::Activity::capture);  // popped where the capture ends (end_capture)
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
std::optional<std::string> refusal_to_end_here(const GraphCapture* c) {
  if (c->mode == CU_STREAM_CAPTURE_MODE_RELAXED || c->owner == std::this_thread::get_id()) return std::nullopt;
  return "the capture on " + describe(stream_resource_of(c->members.front().get())) + " was begun by " + thread_words(c->owner) +
         " and must end there (" + thread_words(std::this_thread::get_id()) +
         " tried); only a relaxed capture may end on another thread";
}

// The error for a capture one of whose streams was destroyed while it ran: the capture
// fails, and the destroyed stream's handle is never touched again (it may name another
// thread's new stream by now).
std::exception_ptr destroyed_member_error(const StreamState* member, bool origin) {
  return std::make_exception_ptr(CaptureError(
      describe(stream_resource_of(member)) + (origin ? ", the stream the capture began on," : ", a stream that joined the capture,") +
          " was destroyed while the capture was in progress; the capture fails (destroy a capture's streams after it "
          "ends)",
      CUDA_ERROR_STREAM_CAPTURE_INVALIDATED));
}

// Joins every stream that joined the capture back into the origin (a fork left unjoined
// fails the capture: STREAM_CAPTURE_UNJOINED). Every join is tried; the first failure is
// returned, to be reported after the end (which must run in any case), even when the end
// succeeds (the user may have joined that stream already): a failed driver call is never
// swallowed. A stream destroyed meanwhile is not joined (its handle is dead) and fails the
// capture; each member is pinned while it is joined, so its owner cannot destroy it in
// the middle (Note [Pins and marks]).
std::exception_ptr join_forks_into_origin(const CaptureState* c, const PinnedStream& origin) {
  const StreamState* o = c->members.front().get();
  std::exception_ptr failed;
  if (!origin) failed = destroyed_member_error(o, true);
  for (std::size_t i = 1; i < c->members.size(); ++i) {
    StreamState* member = c->members[i].get();
    PinnedStream pinned(member);
    if (!pinned) {
      if (!failed) failed = destroyed_member_error(member, false);
      continue;
    }
    if (!origin) continue;  // nothing to join into
    try {
      order_after(o->handle, member->handle, member->device);
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
      if (cu.StreamEndCapture(origin, &again) == CUDA_SUCCESS)
        destroy_graph_parking_failure(again, Resource::of(ResourceKind::stream, origin, -1), "capture end");
    }
    return r;
  } catch (...) {
    return CUDA_ERROR_UNKNOWN;
  }
}

// Every stream of capture `c` leaves it, whatever the outcome (unmarked, out of the
// registry, uncounted: forget_capture), and `c` is freed with the references it holds.
void forget_and_free(GraphCapture* c) {
  std::unique_ptr<GraphCapture> owned(c);
  forget_capture(c);
}

// Ends capture `c` and frees its state. On failure the partial graph is destroyed and the
// resources released before the outcome is returned.
CaptureOutcome end_capture(GraphCapture* c) {
  profiler::pop();  // the range the constructor opened
  CaptureOutcome out;
  out.origin = stream_resource_of(c->members.front().get());
  out.resources = std::move(c->resources);
  {
    // The origin pinned until its capture ended: alive (its owner cannot destroy it
    // meanwhile), or destroyed already, and then its handle is not touched.
    PinnedStream origin(c->members.front().get());
    out.failed_join = join_forks_into_origin(c, origin);
    if (origin) out.end = end_driver_capture(c->members.front()->handle, out.graph);
  }
  forget_and_free(c);
  if (!out.succeeded()) {
    destroy_graph_parking_failure(out.graph, out.origin, "capture end");
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
