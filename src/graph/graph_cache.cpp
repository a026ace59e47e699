// The graph cache's decisions (graph_cache.hpp): replay, capture and instantiate, update
// in place, instantiate anew, or run eagerly; and its one-thread rule.
#include "cudakit/graph_cache.hpp"

#include <optional>
#include <string>
#include <utility>

#include "cudakit/error.hpp"
#include "driver/profiler_names.hpp"
#include "driver/thread_words.hpp"

namespace cudakit::detail {

namespace {

// What a capture of the work gave: its graph, or why there is none, and whether the work
// already ran outside any graph (a capture that recorded nothing: what the work submitted
// went to other streams, or nowhere).
struct CaptureAttempt {
  std::optional<Graph> graph;
  std::string not_capturable;
  bool work_ran = false;
};

// Ends a capture whose work was refused, dropping its partial graph. Ended here rather than
// by the scope's destructor, so that a driver failure reaches the caller instead of being
// parked (the work must not then run eagerly on a device that failed).
void discard(Capture& scope) {
  try {
    std::optional<Graph> partial = scope.end();
  } catch (const CaptureError&) {
    // The driver had invalidated the capture: nothing to drop.
  }
}

CaptureAttempt capture_work(StreamRef stream, GraphWork work, CaptureMode mode) {
  CaptureAttempt attempt;
  profiler::Range range(profiler::Activity::graph_cache_capture);
  Capture scope(stream, mode);  // a stream that cannot begin a capture is the caller's error: it propagates
  try {
    work(stream);
  } catch (const CaptureError& e) {
    attempt.not_capturable = e.what();
    discard(scope);
    return attempt;
  }
  try {
    attempt.graph = scope.end();
  } catch (const CaptureError& e) {
    attempt.not_capturable = e.what();
    return attempt;
  }
  if (!attempt.graph) {
    attempt.not_capturable =
        "the work submitted nothing to the stream it was given, so its capture recorded nothing (work submitted to "
        "other streams runs at once, outside any graph)";
    attempt.work_ran = true;
  }
  return attempt;
}

GraphCacheOutcome run_eagerly(StreamRef stream, GraphWork work, GraphCacheStatistics& statistics) {
  work(stream);
  ++statistics.eager_runs;
  return GraphCacheOutcome::eager;
}

// The executable now runs `graph`: updated in place when the topology allows, otherwise
// instantiated anew (the entry then keeps `graph`, whose nodes name the new executable's).
// A replaced executable and graph go to `replaced`, for the caller to destroy after its
// launch: a failure while letting them go is parked (they are destroyed), and must not keep
// this run from launching or from reporting its own errors.
GraphCacheOutcome update_or_instantiate(GraphCacheEntry& entry, Graph graph, GraphCacheEntry& replaced) {
  if (!entry.executable) {
    entry.executable = GraphExec(graph);
    entry.graph = std::move(graph);
    return GraphCacheOutcome::captured;
  }
  try {
    profiler::Range range(profiler::Activity::graph_cache_update);
    entry.executable.update(graph);
    return GraphCacheOutcome::updated;
  } catch (const GraphUpdateError&) {
    // The topology, a node's type or a kernel changed in a way an update cannot express.
  }
  GraphExec fresh(graph);
  replaced.executable = std::exchange(entry.executable, std::move(fresh));
  replaced.graph = std::exchange(entry.graph, std::move(graph));
  return GraphCacheOutcome::recaptured;
}

void count(GraphCacheOutcome outcome, GraphCacheStatistics& statistics) noexcept {
  switch (outcome) {
    case GraphCacheOutcome::hit: ++statistics.hits; break;
    case GraphCacheOutcome::updated: ++statistics.updates; break;
    case GraphCacheOutcome::captured: ++statistics.captures; break;
    case GraphCacheOutcome::recaptured: ++statistics.recaptures; break;
    case GraphCacheOutcome::eager: ++statistics.eager_runs; break;
  }
}

}  // namespace

GraphCacheOutcome replay_entry(GraphCacheEntry& entry, StreamRef stream, GraphWork work,
                               GraphCacheStatistics& statistics) {
  if (!entry.executable) [[unlikely]]
    return run_eagerly(stream, work, statistics);
  profiler::Range range(profiler::Activity::graph_cache_hit);
  entry.executable.launch(stream);
  ++statistics.hits;
  return GraphCacheOutcome::hit;
}

GraphCacheOutcome capture_entry(GraphCacheEntry& entry, StreamRef stream, GraphWork work, CaptureMode mode,
                                GraphCacheStatistics& statistics) {
  if (!entry.not_capturable.empty()) return run_eagerly(stream, work, statistics);
  GraphCacheEntry replaced;  // destroyed after this run's launch (update_or_instantiate)
  CaptureAttempt attempt = capture_work(stream, work, mode);
  if (!attempt.graph) {
    replaced = std::exchange(entry, GraphCacheEntry{});
    entry.not_capturable = std::move(attempt.not_capturable);
    if (attempt.work_ran) {
      ++statistics.eager_runs;
      return GraphCacheOutcome::eager;
    }
    return run_eagerly(stream, work, statistics);
  }
  GraphCacheOutcome outcome = update_or_instantiate(entry, std::move(*attempt.graph), replaced);
  entry.executable.launch(stream);
  count(outcome, statistics);
  return outcome;
}

GraphCacheOutcome capture_loop_entry(GraphCacheEntry& entry, StreamRef stream, LoopWork step, CaptureMode mode,
                                     GraphCacheStatistics& statistics) {
  // The condition belongs to the outer graph and exists before the step is captured: the
  // step's kernels take its handle as an argument. It starts at 1 at every launch, so
  // each launch runs the body at least once.
  Graph outer(Device::get(stream.device_ordinal()));
  const ConditionalHandle loop = outer.make_condition(1, ConditionStart::default_each_launch);
  auto body = [&](StreamRef s) { step(s, loop); };
  CaptureAttempt attempt = capture_work(stream, GraphWork(body), mode);
  if (!attempt.graph) {
    if (attempt.work_ran)
      throw CaptureError("GraphCache::run_loop: the step submitted nothing to the stream it was given, so there is no "
                         "loop body to run (it ran once, outside any graph)");
    throw CaptureError("GraphCache::run_loop: the step cannot be captured, and a device-side loop has no eager "
                       "stand-in: " + attempt.not_capturable);
  }
  // The captured step becomes the while node's body (a child graph: the outer graph keeps
  // what the step's nodes touch alive).
  ConditionalNode node = outer.add_while(loop);
  node.body.add_child(*attempt.graph);
  entry.executable = GraphExec(outer);
  entry.graph = std::move(outer);
  entry.loop = true;
  entry.executable.launch(stream);
  ++statistics.captures;
  return GraphCacheOutcome::captured;
}

void throw_graph_cache_kind_mismatch(bool entry_is_loop, const char* call) {
  if (entry_is_loop)
    throw InvalidArgument(std::string(call) + ": the key holds a device-side loop (run_loop), whose step takes the "
                          "loop's condition; erase the key and call run_loop with the new step instead");
  throw InvalidArgument(std::string(call) + ": the key holds work captured by run or update_and_run; a key is "
                        "either a loop or plain work: use another key for the loop, or erase this one first");
}

void check_graph_cache_capacity(std::size_t capacity) {
  if (capacity == 0)
    throw InvalidArgument("GraphCache: a capacity of 0 keys holds nothing; give it room for at least 1 key");
}

void throw_graph_cache_in_use(std::thread::id holder, const char* call) {
  std::thread::id me = std::this_thread::get_id();
  if (holder == me)
    throw InvalidArgument(std::string(call) + ": called from inside the work that this graph cache is running on " +
                          thread_words(me) + "; the cache is busy until that run returns: use a second cache for "
                          "nested work, or submit it directly");
  throw InvalidArgument(std::string(call) + ": the graph cache is in use by " + thread_words(holder) + " while " +
                        thread_words(me) + " tried to use it; a graph cache is used by one thread at a time (like "
                        "an executable graph): give each thread its own cache, or serialize the calls");
}

}  // namespace cudakit::detail
