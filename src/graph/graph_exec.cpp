// Executable graphs (graph_exec.hpp): instantiate, launch with launch-time tracking,
// update, and the exclusive-use rule.
#include "cudakit/graph_exec.hpp"

#include <sstream>
#include <string>
#include <thread>

#include "cudakit/detail/capture_guard.hpp"
#include "device/capture_tolerant_scope.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "driver/checked_call.hpp"
#include "driver/thread_words.hpp"
#include "stream/capture_state.hpp"
#include "stream/stream_state_of.hpp"
#include "stream/deferred.hpp"
#include "device/device_state.hpp"
#include "graph/graph_resources.hpp"

namespace cudakit {

using driver::cu;
using detail::BufferUse;

namespace detail {

struct ExecState {
  CUgraphExec handle = nullptr;
  int device = -1;
  CUcontext context = nullptr;  // the device's primary context, made current for launches
  Ref<GraphCore> core;          // the graph it was instantiated from: node handles stay valid
  std::vector<BufferUse> uses;  // ordered on the launch stream before every launch
  std::size_t node_count = 0;
  Ref<GraphResources> runs;  // the resources of the graph it runs now
  Ref<GraphResources> own;   // buffers given by update_kernel_arguments
  // The stream of the last launch (a tracker slot: its Stream synchronizes before it is
  // destroyed). Launches of one executable run in order, so its queued work covers every
  // launch (Note [Graph lifetimes]).
  TrackerRef last_stream;
  std::atomic<std::thread::id> user{};  // the thread inside a launch, upload or update
};

}  // namespace detail

namespace {

Resource exec_resource(const detail::ExecState& s) { return Resource::of(ResourceKind::graph_exec, s.handle, s.device); }

using detail::thread_words;

// An executable is used by one thread at a time (a CUDA rule): a second thread is
// refused instead of racing.
class ExclusiveUse {
 public:
  ExclusiveUse(detail::ExecState& s, const char* call) : s_(s) {
    std::thread::id none{};
    std::thread::id me = std::this_thread::get_id();
    if (!s.user.compare_exchange_strong(none, me, std::memory_order_acquire)) {
      throw InvalidArgument(std::string(call) + ": " + describe(exec_resource(s)) + " is in use by " +
                            thread_words(none) + " (a launch, upload or update) while " + thread_words(me) +
                            " tried to use it; an executable graph is used by one thread at a time (a CUDA rule): "
                            "give each thread its own executable, or serialize the calls");
    }
  }
  ~ExclusiveUse() { s_.user.store(std::thread::id{}, std::memory_order_release); }
  ExclusiveUse(const ExclusiveUse&) = delete;
  ExclusiveUse& operator=(const ExclusiveUse&) = delete;

 private:
  detail::ExecState& s_;
};

const char* instantiate_words(CUgraphInstantiateResult result) {
  switch (result) {
    case CUDA_GRAPH_INSTANTIATE_SUCCESS: return "the driver reported no reason";
    case CUDA_GRAPH_INSTANTIATE_ERROR: return "instantiation failed for an unexpected reason (the driver's error says which)";
    case CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE: return "the graph's structure is invalid (for example, a cycle)";
    case CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED:
      return "the graph holds a node that a graph launched from the device cannot run";
    case CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED:
      return "the graph's nodes belong to more than one context, which a graph launched from the device cannot have";
    case CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED:
      return "a condition made for this graph is used by none of its conditional nodes";
  }
  return "an unknown instantiation result";
}

const char* update_words(CUgraphExecUpdateResult result) {
  switch (result) {
    case CU_GRAPH_EXEC_UPDATE_SUCCESS: return "the driver reported no reason";
    case CU_GRAPH_EXEC_UPDATE_ERROR: return "the update failed for an unexpected reason (the driver's error says which)";
    case CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED:
      return "the graph's topology changed (a node or an edge was added or removed)";
    case CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED: return "a node's type changed";
    case CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED: return "a kernel node's function changed";
    case CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED:
      return "a node's parameters changed in a way an update cannot express (for example, a copy between other "
             "kinds of memory, or a fill with another element size)";
    case CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED: return "something about the node cannot be updated";
    case CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE:
      return "a kernel node's function changed in a way an update cannot express (for example, to a kernel of another "
             "context, or one that differs in its use of device-side launches)";
    case CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED:
      return "a node's attributes changed in a way an update cannot express";
  }
  return "an unknown update result";
}

std::string node_words(CUgraphNode node) {
  if (node == nullptr) return {};
  std::ostringstream out;
  out << "node " << static_cast<const void*>(node);
  CUgraphNodeType type{};
  if (cu.GraphNodeGetType(node, &type) == CUDA_SUCCESS) {
    switch (type) {
      case CU_GRAPH_NODE_TYPE_KERNEL: out << " (a kernel node)"; break;
      case CU_GRAPH_NODE_TYPE_MEMCPY: out << " (a copy node)"; break;
      case CU_GRAPH_NODE_TYPE_MEMSET: out << " (a fill node)"; break;
      case CU_GRAPH_NODE_TYPE_HOST: out << " (a host node)"; break;
      case CU_GRAPH_NODE_TYPE_GRAPH: out << " (a child graph node)"; break;
      case CU_GRAPH_NODE_TYPE_EMPTY: out << " (an empty node)"; break;
      case CU_GRAPH_NODE_TYPE_WAIT_EVENT: out << " (an event wait node)"; break;
      case CU_GRAPH_NODE_TYPE_EVENT_RECORD: out << " (an event record node)"; break;
      case CU_GRAPH_NODE_TYPE_CONDITIONAL: out << " (a conditional node)"; break;
      default: out << " (node type " << static_cast<int>(type) << ")"; break;
    }
  }
  return out.str();
}

void add_launch_use(std::vector<BufferUse>& uses, const BufferUse& use) {
  for (BufferUse& u : uses)
    if (u.allocation == use.allocation) {
      if (use.access == Access::write) u.access = Access::write;
      return;
    }
  uses.push_back(use);
}

// What an executable holds for its launches (the resources of its graph, the buffers of
// argument updates) is let go once its last launch completed: a host function on the
// device's service stream, ordered after the last launch stream (launches of one
// executable run in order), queues the release (Note [Graph lifetimes]).
// The driver carries the reference as `resources`: detached where the host function is
// queued, adopted back here.
void CUDA_CB release_when_done(void* resources) {
  auto* held = static_cast<detail::GraphResources*>(resources);
  detail::release_at_safe_point(detail::Ref<detail::GraphResources>(held, detail::adopt));
}

// What letting go does with an error: a destructor parks it (it cannot throw); an update
// throws a sticky one after letting go (the device can do no more work, and the caller
// must hear why), and parks the rest (the update itself succeeded).
enum class ReleaseErrors { park, throw_sticky };

void release_after_last_launch(detail::Ref<detail::GraphResources> own, detail::StreamState* last, int device,
                               ReleaseErrors errors = ReleaseErrors::park) {
  if (!own) return;
  // Pinned, then looked at: its owner may destroy it meanwhile (Note [Pins and marks]).
  detail::PinnedStream pinned(last);
  if (!pinned || detail::poison_of(device) != nullptr) {
    // Never launched, or its stream finished (a dead stream's work completed), or the
    // context is dead (nothing runs any more): nothing to wait for.
    return;
  }
  try {
    CUstream service = detail::service_stream(device);
    detail::wait_for_stream_work(service, device, last);
    checked_call(cu.LaunchHostFunc, Resource::of(ResourceKind::stream, service, device), service, &release_when_done,
                 own.get());
    (void)own.detach();  // queued: release_when_done adopts it
    return;
  } catch (const DriverError& e) {
    // Nothing runs on a poisoned device any more: released as the error leaves.
    if (errors == ReleaseErrors::throw_sticky && is_sticky(e.code())) throw;
    park_error({e.code(), "~GraphExec", std::string("could not queue the release of a graph's buffers after the "
                                                    "executable's last launch: ") + e.what()});
  } catch (const std::exception& e) {
    park_error({CUDA_SUCCESS, "~GraphExec", std::string("could not queue the release of a graph's buffers after the "
                                                        "executable's last launch: ") + e.what()});
  }
  // The fallback: wait here for the last launch stream, then let go. If even that fails
  // on a live context, the buffers are kept (a leak rather than a use after free).
  // (Not while this thread captures: the synchronize would invalidate that capture.)
  // A last launch stream that another thread captures now is waited for through its
  // capture fence, which stands for the work before the capture (synchronizing the stream
  // would invalidate that capture).
  CUresult r = CUDA_ERROR_UNKNOWN;
  if (!detail::unsafe_calls_would_invalidate_a_capture()) {
    try {
      if (!pinned.capturing()) {
        r = cu.StreamSynchronize(last->handle);
      } else if (CUevent fence = last->capture_fence.load(std::memory_order_acquire)) {
        r = cu.EventSynchronize(fence);
      }
    } catch (...) {
    }
  }
  if (r == CUDA_SUCCESS || detail::poison_of(device) != nullptr) return;
  park_driver_error(r, cu.StreamSynchronize.name(), Resource::of(ResourceKind::stream, last->handle, device),
                    "~GraphExec (its buffers are kept: their last launch could not be waited for)");
  (void)own.detach();  // kept: a leak rather than a use after free
}

}  // namespace

GraphExec::GraphExec(const Graph& graph, const InstantiateOptions& options) {
  if (!graph) detail::throw_empty_handle("Graph");
  detail::run_deferred_tasks_if_any();
  int device = graph.device_ordinal();
  Resource res = Resource::of(ResourceKind::graph, graph.handle(), device);
  check_not_poisoned(cu.GraphInstantiateWithParams.name(), res);
  ContextRef(detail::library_context(device), device).make_current();

  CUDA_GRAPH_INSTANTIATE_PARAMS p{};
  if (options.upload_on) {
    p.flags |= CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
    p.hUploadStream = options.upload_on.handle();
  }
  if (options.auto_free_on_launch) p.flags |= CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
  if (options.device_launch) p.flags |= CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH;
  if (options.use_node_priority) p.flags |= CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
  p.result_out = CUDA_GRAPH_INSTANTIATE_SUCCESS;
  CUgraphExec exec = nullptr;
  CUresult r = cu.GraphInstantiateWithParams(&exec, graph.handle(), &p);
  if (r != CUDA_SUCCESS || p.result_out != CUDA_GRAPH_INSTANTIATE_SUCCESS) {
    if (exec != nullptr && r == CUDA_SUCCESS) cu.GraphExecDestroy(exec);
    if (r != CUDA_SUCCESS && (is_sticky(r) || is_capture_error(r) || r == CUDA_ERROR_OUT_OF_MEMORY))
      check(r, cu.GraphInstantiateWithParams.name(), res);  // poisons, or says what the capture error means
    std::string message = "cuGraphInstantiateWithParams on " + describe(res) + ": ";
    if (r != CUDA_SUCCESS) message += error_name(r) + ": " + error_description(r) + ": ";
    message += instantiate_words(p.result_out);
    if (p.hErrNode_out != nullptr) message += "; the node that caused it: " + node_words(p.hErrNode_out);
    throw GraphInstantiateError(message, r, p.result_out, p.hErrNode_out);
  }

  auto state = std::make_unique<detail::ExecState>();
  state->handle = exec;
  state->device = device;
  state->context = detail::library_context(device);
  try {
    state->uses = graph.resources()->uses();
    state->node_count = graph.node_count();
  } catch (...) {
    cu.GraphExecDestroy(exec);
    throw;
  }
  state->core = detail::Ref<detail::GraphCore>(graph.core());
  state->runs = detail::Ref<detail::GraphResources>(graph.resources());
  state_ = state.release();
}

detail::ExecState& GraphExec::checked(const char* call) const {
  if (state_ == nullptr) [[unlikely]]
    throw EmptyHandle(std::string(call) + ": use of an empty GraphExec (moved-from or default-constructed)");
  return *state_;
}

CUgraphExec GraphExec::handle() const noexcept { return state_ != nullptr ? state_->handle : nullptr; }
int GraphExec::device_ordinal() const noexcept { return state_ != nullptr ? state_->device : -1; }

std::size_t GraphExec::node_count() const { return checked("GraphExec::node_count").node_count; }

void GraphExec::launch(StreamRef stream) {
  detail::ExecState& s = checked(cu.GraphLaunch.name());
  stream.require_handle(cu.GraphLaunch.name());
  ExclusiveUse exclusive(s, cu.GraphLaunch.name());
  detail::run_deferred_tasks_if_any();
  Resource res = exec_resource(s);
  check_not_poisoned(cu.GraphLaunch.name(), res);
  if (stream.device_ordinal() != s.device)
    throw InvalidArgument("cuGraphLaunch: " + describe(res) + " cannot be launched on a stream of device " +
                          std::to_string(stream.device_ordinal()));
  if (detail::active_captures.load(std::memory_order_relaxed) != 0) [[unlikely]] {
    detail::StreamState* st = detail::stream_state_of(stream);
    detail::check_capturing_thread(st, cu.GraphLaunch.name());
    if (st->marks.capture() != nullptr)
      throw CaptureError("cuGraphLaunch of " + describe(res) + " onto " +
                         describe(Resource::of(ResourceKind::stream, stream.handle(), stream.device_ordinal())) +
                         " refused: the stream is capturing; embed the Graph in the capture's graph with add_child, "
                         "or capture the work itself");
  }
  ContextRef(s.context, s.device).make_current();  // a thread-local compare (DESIGN 8)
  // Launch-time tracking (DESIGN 6): the replay is ordered after earlier uses of its
  // buffers on other streams, and later uses elsewhere are ordered after the replay.
  for (const BufferUse& u : s.uses) u.allocation->use(stream, u.access);
  checked_call(cu.GraphLaunch, res, s.handle, stream.handle());
  // A fault in the graph is reported by a later synchronize, which names this launch.
  detail::StreamState* st = detail::stream_state_of(stream);
  st->last_launch.store("a graph executable", std::memory_order_relaxed);
  if (s.last_stream != st) [[unlikely]]
    s.last_stream = detail::TrackerRef(st);
}

void GraphExec::upload(StreamRef stream) {
  detail::ExecState& s = checked(cu.GraphUpload.name());
  stream.require_handle(cu.GraphUpload.name());
  ExclusiveUse exclusive(s, cu.GraphUpload.name());
  Resource res = exec_resource(s);
  check_not_poisoned(cu.GraphUpload.name(), res);
  if (detail::active_captures.load(std::memory_order_relaxed) != 0)
    detail::check_capturing_thread(detail::stream_state_of(stream), cu.GraphUpload.name());
  checked_call(cu.GraphUpload, res, s.handle, stream.handle());
}

void GraphExec::update(const Graph& graph) {
  detail::ExecState& s = checked(cu.GraphExecUpdate.name());
  if (!graph) detail::throw_empty_handle("Graph");
  ExclusiveUse exclusive(s, cu.GraphExecUpdate.name());
  Resource res = exec_resource(s);
  check_not_poisoned(cu.GraphExecUpdate.name(), res);
  if (graph.device_ordinal() != s.device)
    throw InvalidArgument("cuGraphExecUpdate: " + describe(res) + " cannot take a graph of device " +
                          std::to_string(graph.device_ordinal()));
  std::vector<BufferUse> uses = graph.resources()->uses();
  if (s.own)
    for (const BufferUse& u : s.own->uses()) add_launch_use(uses, u);
  std::size_t nodes = graph.node_count();
  ContextRef(detail::library_context(s.device), s.device).make_current();
  CUgraphExecUpdateResultInfo info{};
  info.result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
  CUresult r = cu.GraphExecUpdate(s.handle, graph.handle(), &info);
  if (r == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE || (r == CUDA_SUCCESS && info.result != CU_GRAPH_EXEC_UPDATE_SUCCESS)) {
    std::string message = "cuGraphExecUpdate of " + describe(res) + " from " +
                          describe(Resource::of(ResourceKind::graph, graph.handle(), graph.device_ordinal())) + ": " +
                          update_words(info.result);
    if (info.errorNode != nullptr) {
      message += "; at " + node_words(info.errorNode);
      if (info.errorFromNode != nullptr) message += ", on its edge from " + node_words(info.errorFromNode);
    }
    message += "; the executable is unchanged: instantiate the new graph instead";
    throw GraphUpdateError(message, info.result, info.errorNode, info.errorFromNode);
  }
  check(r, cu.GraphExecUpdate.name(), res);
  // The executable runs the new graph from now on: hold its resources, and let the old
  // ones go once the launches queued so far completed (Note [Graph lifetimes]).
  detail::Ref<detail::GraphResources> replaced =
      std::exchange(s.runs, detail::Ref<detail::GraphResources>(graph.resources()));
  s.uses = std::move(uses);
  s.node_count = nodes;
  release_after_last_launch(std::move(replaced), s.last_stream.get(), s.device, ReleaseErrors::throw_sticky);
}

void GraphExec::update_kernel_node(GraphNode node, CUfunction expected, void** params, const BufferUse* uses,
                                   std::size_t count, const std::size_t* sizes) {
  detail::ExecState& s = checked(cu.GraphExecKernelNodeSetParams.name());
  if (!node) detail::throw_empty_handle("GraphNode");
  ExclusiveUse exclusive(s, cu.GraphExecKernelNodeSetParams.name());
  Resource res = exec_resource(s);
  check_not_poisoned(cu.GraphExecKernelNodeSetParams.name(), res);
  CUDA_KERNEL_NODE_PARAMS p{};
  checked_call(cu.GraphKernelNodeGetParams, res, node.handle(), &p);
  if (expected != nullptr && p.func != expected)
    throw InvalidArgument("update_kernel_arguments: " + node_words(node.handle()) +
                          " launches another kernel than the one whose arguments were given");
  if (sizes != nullptr) detail::check_raw_arguments(p.func, s.device, sizes, count);
  for (std::size_t i = 0; i < count; ++i)
    if (uses[i].allocation != nullptr && uses[i].allocation->device != s.device)
      throw InvalidArgument("update_kernel_arguments: argument " + std::to_string(i + 1) + " is a buffer on device " +
                            std::to_string(uses[i].allocation->device) + ", the executable runs on device " +
                            std::to_string(s.device));
  if (!s.own) s.own = detail::make_ref<detail::GraphResources>(s.device);
  // Kept before the driver sees them: never a node without its buffers.
  for (std::size_t i = 0; i < count; ++i) s.own->add_use(uses[i].allocation, uses[i].access);
  p.kernelParams = count == 0 ? nullptr : params;
  p.extra = nullptr;
  ContextRef(detail::library_context(s.device), s.device).make_current();
  checked_call(cu.GraphExecKernelNodeSetParams, res, s.handle, node.handle(), &p);
  for (std::size_t i = 0; i < count; ++i)
    if (uses[i].allocation != nullptr) add_launch_use(s.uses, uses[i]);
}

void GraphExec::update_kernel_arguments(GraphNode node, const KernelArgs& args) {
  std::vector<void*> pointers;
  std::vector<BufferUse> uses;
  std::vector<std::size_t> sizes;
  const auto& entries = args.entries();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    pointers.push_back(args.value_pointer(i));
    uses.push_back({entries[i].allocation, entries[i].access});
    sizes.push_back(entries[i].size);
  }
  update_kernel_node(node, nullptr, pointers.data(), uses.data(), entries.size(), sizes.data());
}

void GraphExec::reset() noexcept {
  detail::ExecState* s = std::exchange(state_, nullptr);
  if (s == nullptr) return;
  try {
    detail::CaptureTolerantScope tolerant;  // destroying an executable beside a capture leaves it valid
    CUresult r = cu.GraphExecDestroy(s->handle);
    if (r != CUDA_SUCCESS) park_driver_error(r, cu.GraphExecDestroy.name(), exec_resource(*s), "~GraphExec");
  } catch (const std::exception& e) {
    park_error({CUDA_SUCCESS, "~GraphExec", e.what()});
  }
  release_after_last_launch(std::move(s->runs), s->last_stream.get(), s->device);
  release_after_last_launch(std::move(s->own), s->last_stream.get(), s->device);
  delete s;  // lets go of the last launch stream, then of the graph
  detail::run_deferred_tasks_if_any();
}

}  // namespace cudakit
