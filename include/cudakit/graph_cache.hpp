// A cache of executable graphs under keys the caller chooses (a batch size, a shape): the
// first run for a key captures the work and instantiates it, later runs replay it
// (DESIGN 6).
//
//   cudakit::GraphCache<int> cache({.capacity = 8});          // key: the batch size
//   cudakit::DeviceValue<int> position(stream, 0);             // device_value.hpp
//   for (int step = 0; step < steps; ++step) {
//     position.set(stream, prompt_length + step);              // stream-ordered, before the replay
//     cache.run(stream, batch, [&](cudakit::StreamRef s) { decode_step(s, batch, position); });
//   }
//
// Two ways to run, by what the caller knows about the work's arguments (the buffers it
// touches and the scalars it passes):
// - run(stream, key, work): they are those of the key's last capture. A cached key is
//   replayed as it is and `work` is not called. This is the decode loop: the buffers of
//   a batch size are made once, and what changes each step lives in device memory.
// - update_and_run(stream, key, work): they may have changed (new buffers, new scalars).
//   `work` is captured again (nothing runs while it is captured) and the key's executable
//   is updated in place from that graph (cuGraphExecUpdate) when the topology is the same,
//   or instantiated anew when it is not.
// The first run of a key (or the first after its eviction) captures and instantiates with
// either call. A replay "as it is" of work whose buffers were since replaced would read
// the old buffers (which the graph keeps alive, so it is never a use after free): call
// update_and_run once after replacing them.
//
// Values that change every step (a position, a sequence length) must not be kernel
// arguments of a cached graph, or every step would need update_and_run. Keep them in
// device memory that the kernels read: a DeviceValue<T> set before each run (a
// stream-ordered write, tracked like any buffer), or one the graph itself advances with a
// kernel at its end. For the rare case that must be a kernel argument, executable(key)
// and graph(key) give GraphExec::update_kernel_arguments its executable and node handles.
//
// Work that cannot be captured (it synchronizes, allocates or copies pageable memory on
// the stream: anything that throws CaptureError while captured, or a capture the driver
// invalidated) runs eagerly on the stream instead, at once and at every later run of that
// key; not_capturable_reason(key) keeps the CaptureError's message. Work that submits
// nothing to the stream it is given is remembered the same way (its capture recorded
// nothing; the call that found this counts as its eager run: it is not called again).
// erase(key) forgets the key, so the next run tries to capture it again. Any other
// exception from the work, the capture or the instantiation reaches the caller, and the
// key stays as it was.
//
// The work is `work(StreamRef)` or `work()`. It may be called once per run, or not at all
// (a hit), so it should only submit work: host-side effects that must happen every step
// belong outside it. It submits to the stream it is given (and streams that join that
// stream's capture, capture.hpp); work submitted to other streams is not part of the graph.
//
// Device-side loops: run_loop(stream, key, step) runs `step` again and again inside one
// launch, until the graph's own kernels end the loop. The step is
// `step(StreamRef, ConditionalHandle loop)`: it is captured once, as the body of a while
// node (graph.hpp's add_while) whose condition starts at 1 at every launch, and one of its
// kernels sets the condition to 0 (cudakit::device::set_condition, device/graph_condition.cuh)
// when the loop is done: after N steps, or when every sequence has finished. The loop's
// state (a step counter, the finished flags) lives in device memory the step's kernels
// read and write, like any value that changes every step. One host round trip then serves
// N steps, and each step computes what a run of the same work per launch computes.
//   cache.run_loop(stream, batch, [&](cudakit::StreamRef s, cudakit::ConditionalHandle loop) {
//     decode_step(s, batch, position);
//     launch(s, advance, LaunchConfig{1, 1}, loop.value, steps_left, finished);   // clears `loop`
//   });
// A loop key is replayed by run_loop and run alike; update_and_run refuses it (erase it to
// capture a new step). A step that cannot be captured is an error (CaptureError): the loop
// runs on the device, and no eager run can stand in for it. Conditional nodes need CUDA
// 12.3 drivers (FeatureUnavailable before).
//
// Bounded: at most `capacity` keys; a new key beyond that evicts the least recently run
// one (its executable is destroyed; queued replays still complete, graph_exec.hpp).
//
// Statistics: every run is exactly one of a hit, an update, a capture, a recapture (a
// changed topology, instantiated anew) or an eager run; evictions are counted apart. Each
// run also returns its outcome.
//
// Safety: an executable keeps alive every buffer its graph touches, so the caller may free
// its buffers while the cache holds graphs that use them; a replay orders those buffers on
// its stream like any launch (a later use on another stream waits for the replay), and
// replays of one key may go to different streams.
//
// Thread safety: a cache is used by one thread at a time, like a GraphExec: a call that
// finds another call in progress on another thread throws InvalidArgument instead of
// racing, and so does a call from inside the cache's own work. Give each thread its own
// cache (and its own stream); caches are independent of each other. The hit path makes no
// heap allocation.
#pragma once

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "cudakit/capture.hpp"
#include "cudakit/export.hpp"
#include "cudakit/graph.hpp"
#include "cudakit/graph_exec.hpp"
#include "cudakit/stream.hpp"

namespace cudakit {

/// Settings of a GraphCache.
struct GraphCacheOptions {
  /// The most keys held at once (at least 1); a new key beyond it evicts the least
  /// recently run one.
  std::size_t capacity = 16;
  /// The mode the work is captured in (capture.hpp).
  CaptureMode mode = CaptureMode::per_thread;
};

/// What one run of a GraphCache did.
enum class GraphCacheOutcome {
  hit,         ///< replayed the key's executable as it was
  updated,     ///< captured again; same topology: the executable was updated in place
  captured,    ///< the key's first capture: captured and instantiated
  recaptured,  ///< captured again; the topology changed: instantiated anew
  eager,       ///< the work cannot be captured: it ran eagerly on the stream
};

/// The decisions a GraphCache made so far, one count per outcome, and its evictions.
struct GraphCacheStatistics {
  std::uint64_t hits = 0;
  std::uint64_t updates = 0;
  std::uint64_t captures = 0;
  std::uint64_t recaptures = 0;
  std::uint64_t eager_runs = 0;
  std::uint64_t evictions = 0;

  /// Every run so far (each is one outcome).
  std::uint64_t runs() const noexcept { return hits + updates + captures + recaptures + eager_runs; }
  /// Instantiations so far (captures and recaptures).
  std::uint64_t instantiations() const noexcept { return captures + recaptures; }
};

namespace detail {

inline std::size_t combine_hashes(std::size_t seed, std::size_t value) noexcept {
  return seed ^ (value + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2));
}

template <class T>
concept std_hashable = requires(const T& value) {
  { std::hash<T>{}(value) } -> std::convertible_to<std::size_t>;
};
template <class T>
concept tuple_like = requires { std::tuple_size<T>::value; };

template <class T>
std::size_t graph_key_hash(const T& key) {
  if constexpr (std_hashable<T>) {
    return std::hash<T>{}(key);
  } else if constexpr (tuple_like<T>) {
    return std::apply(
        [](const auto&... part) {
          std::size_t seed = 0;
          ((seed = combine_hashes(seed, graph_key_hash(part))), ...);
          return seed;
        },
        key);
  } else {
    static_assert(std_hashable<T>,
                  "GraphCache: the key type has no std::hash and is not a std::pair, std::tuple or std::array of "
                  "hashable parts: give the cache a Hash");
    return 0;
  }
}

}  // namespace detail

/// The default hash of GraphCache keys: std::hash where it exists (integers, enums,
/// strings), and part by part for std::pair, std::tuple and std::array (a shape).
template <class Key>
struct GraphKeyHash {
  /// The key's hash.
  std::size_t operator()(const Key& key) const { return detail::graph_key_hash(key); }
};

namespace detail {

/// One key's state: its executable and the graph it was instantiated from, or why its
/// work cannot be captured.
struct GraphCacheEntry {
  GraphExec executable;
  Graph graph;                 // the executable's own graph: its nodes name the executable's
  std::string not_capturable;  // not empty: the work runs eagerly; the reason
  bool loop = false;           // run_loop's: a while node around the captured step
};

/// The work of one run without its type (no allocation): calls `work(stream)` or `work()`.
class GraphWork {
 public:
  template <class F>
  explicit GraphWork(F& work) noexcept
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(work)))), call_(&call<F>) {
    static_assert(std::is_invocable_v<F&, StreamRef> || std::is_invocable_v<F&>,
                  "GraphCache: the work must be callable as work(StreamRef) or work()");
  }
  void operator()(StreamRef stream) const { call_(object_, stream); }

 private:
  template <class F>
  static void call(void* object, StreamRef stream) {
    run_capture_work(*static_cast<F*>(object), stream);
  }
  void* object_;
  void (*call_)(void*, StreamRef);
};

/// The step of a run_loop without its type (no allocation): calls `step(stream, loop)`.
class LoopWork {
 public:
  template <class F>
  explicit LoopWork(F& step) noexcept
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(step)))), call_(&call<F>) {
    static_assert(std::is_invocable_v<F&, StreamRef, ConditionalHandle>,
                  "GraphCache::run_loop: the step must be callable as step(StreamRef, ConditionalHandle)");
  }
  void operator()(StreamRef stream, ConditionalHandle loop) const { call_(object_, stream, loop); }

 private:
  template <class F>
  static void call(void* object, StreamRef stream, ConditionalHandle loop) {
    (*static_cast<F*>(object))(stream, loop);
  }
  void* object_;
  void (*call_)(void*, StreamRef, ConditionalHandle);
};

/// The cache's decisions, the same for every key type (graph_cache.cpp).
/// A cached key under run(): replays it, or runs the work eagerly when it cannot be captured.
CUDAKIT_API GraphCacheOutcome replay_entry(GraphCacheEntry& entry, StreamRef stream, GraphWork work,
                                           GraphCacheStatistics& statistics);
/// A new key, or a cached one under update_and_run(): captures the work and instantiates,
/// updates or re-instantiates the entry's executable, then launches it; or runs the work
/// eagerly when it cannot be captured (remembering why).
CUDAKIT_API GraphCacheOutcome capture_entry(GraphCacheEntry& entry, StreamRef stream, GraphWork work,
                                            CaptureMode mode, GraphCacheStatistics& statistics);
/// A new run_loop key: captures the step into the body of a while node, instantiates and
/// launches it. Throws CaptureError when the step cannot be captured.
CUDAKIT_API GraphCacheOutcome capture_loop_entry(GraphCacheEntry& entry, StreamRef stream, LoopWork step,
                                                 CaptureMode mode, GraphCacheStatistics& statistics);
/// InvalidArgument: run_loop on a key that holds plain work, or update_and_run on a loop key.
[[noreturn]] CUDAKIT_API void throw_graph_cache_kind_mismatch(bool entry_is_loop, const char* call);
CUDAKIT_API void check_graph_cache_capacity(std::size_t capacity);
[[noreturn]] CUDAKIT_API void throw_graph_cache_in_use(std::thread::id holder, const char* call);

/// Claims a cache for this thread for one call (the one-thread rule); a second thread, or
/// a call from inside the cache's own work, is refused.
class GraphCacheUse {
 public:
  GraphCacheUse(std::atomic<std::thread::id>& user, const char* call) : user_(user) {
    std::thread::id none{};
    if (!user.compare_exchange_strong(none, std::this_thread::get_id(), std::memory_order_acquire)) [[unlikely]]
      throw_graph_cache_in_use(none, call);
  }
  ~GraphCacheUse() { user_.store(std::thread::id{}, std::memory_order_release); }
  GraphCacheUse(const GraphCacheUse&) = delete;
  GraphCacheUse& operator=(const GraphCacheUse&) = delete;

 private:
  std::atomic<std::thread::id>& user_;
};

}  // namespace detail

/// Executable graphs under keys of type Key (see above). Not copyable or movable (hold it
/// in a std::unique_ptr to move it).
template <class Key, class Hash = GraphKeyHash<Key>, class KeyEqual = std::equal_to<Key>>
class GraphCache {
 public:
  /// An empty cache. InvalidArgument when the capacity is 0.
  explicit GraphCache(GraphCacheOptions options = {}) : options_(options) {
    detail::check_graph_cache_capacity(options.capacity);
  }
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;

  /// Runs `work` for `key` on `stream`, whose arguments are those of the key's last
  /// capture: replays the key's executable as it is (`work` is not called), or captures,
  /// instantiates and launches it on the key's first run. Runs `work` eagerly for a key
  /// that cannot be captured.
  template <class F>
  GraphCacheOutcome run(StreamRef stream, const Key& key, F&& work) {
    detail::GraphCacheUse use(user_, "GraphCache::run");
    return run_key(stream, key, detail::GraphWork(work), Arguments::unchanged);
  }

  /// Runs `work` for `key` on `stream`, whose arguments may differ from the last capture:
  /// captures it again and updates the key's executable in place (same topology) or
  /// instantiates it anew (changed topology), then launches it. Runs `work` eagerly for a
  /// key that cannot be captured.
  template <class F>
  GraphCacheOutcome update_and_run(StreamRef stream, const Key& key, F&& work) {
    detail::GraphCacheUse use(user_, "GraphCache::update_and_run");
    return run_key(stream, key, detail::GraphWork(work), Arguments::may_have_changed);
  }

  /// Runs `step` on the device again and again within one launch, until one of its kernels
  /// sets the loop's condition to 0 (see above): the key's first run captures the step
  /// into a while node and instantiates it, later runs replay it.
  template <class F>
  GraphCacheOutcome run_loop(StreamRef stream, const Key& key, F&& step) {
    detail::GraphCacheUse use(user_, "GraphCache::run_loop");
    detail::LoopWork work(step);
    auto found = index_.find(key);
    if (found != index_.end()) {
      touch(found->second);
      detail::GraphCacheEntry& entry = found->second->entry;
      if (!entry.loop) detail::throw_graph_cache_kind_mismatch(false, "GraphCache::run_loop");
      entry.executable.launch(stream);
      ++statistics_.hits;
      return GraphCacheOutcome::hit;
    }
    detail::GraphCacheEntry entry;
    GraphCacheOutcome outcome = detail::capture_loop_entry(entry, stream, work, options_.mode, statistics_);
    insert_new(key, std::move(entry));
    return outcome;
  }

  /// The counts of each outcome so far, and the evictions.
  GraphCacheStatistics statistics() const {
    detail::GraphCacheUse use(user_, "GraphCache::statistics");
    return statistics_;
  }
  /// The number of keys held (capturable or not).
  std::size_t size() const {
    detail::GraphCacheUse use(user_, "GraphCache::size");
    return recency_.size();
  }
  /// The most keys it holds.
  std::size_t capacity() const noexcept { return options_.capacity; }
  /// Whether `key` is held (with an executable, or remembered as not capturable).
  bool contains(const Key& key) const {
    detail::GraphCacheUse use(user_, "GraphCache::contains");
    return index_.count(key) != 0;
  }
  /// Why `key`'s work cannot be captured (the CaptureError's message); none when the key
  /// is capturable or not held.
  std::optional<std::string> not_capturable_reason(const Key& key) const {
    detail::GraphCacheUse use(user_, "GraphCache::not_capturable_reason");
    auto found = index_.find(key);
    if (found == index_.end() || found->second->entry.not_capturable.empty()) return std::nullopt;
    return found->second->entry.not_capturable;
  }
  /// The executable held for `key` (null when none), for in-place argument updates
  /// (GraphExec::update_kernel_arguments). Valid until the next call that changes this
  /// key (update_and_run, erase, clear, or its eviction).
  GraphExec* executable(const Key& key) {
    detail::GraphCacheUse use(user_, "GraphCache::executable");
    auto found = index_.find(key);
    if (found == index_.end() || !found->second->entry.executable) return nullptr;
    return &found->second->entry.executable;
  }
  /// The graph that executable(key) was instantiated from, whose kernel_nodes() name the
  /// executable's nodes (empty when none). Valid as long as executable(key).
  GraphRef graph(const Key& key) const {
    detail::GraphCacheUse use(user_, "GraphCache::graph");
    auto found = index_.find(key);
    return found == index_.end() ? GraphRef{} : found->second->entry.graph.ref();
  }

  /// Forgets `key` (its executable, or that it cannot be captured); whether it was held.
  bool erase(const Key& key) {
    detail::GraphCacheUse use(user_, "GraphCache::erase");
    auto found = index_.find(key);
    if (found == index_.end()) return false;
    auto slot = found->second;
    index_.erase(found);
    recency_.erase(slot);
    return true;
  }
  /// Forgets every key. The statistics stay.
  void clear() {
    detail::GraphCacheUse use(user_, "GraphCache::clear");
    index_.clear();
    recency_.clear();
  }

 private:
  struct Slot {
    Key key;
    detail::GraphCacheEntry entry;
  };
  using SlotIterator = typename std::list<Slot>::iterator;

  enum class Arguments { unchanged, may_have_changed };

  GraphCacheOutcome run_key(StreamRef stream, const Key& key, detail::GraphWork work, Arguments arguments) {
    auto found = index_.find(key);
    if (found == index_.end()) return run_new_key(stream, key, work);
    touch(found->second);
    detail::GraphCacheEntry& entry = found->second->entry;
    if (arguments == Arguments::unchanged) return detail::replay_entry(entry, stream, work, statistics_);
    if (entry.loop) detail::throw_graph_cache_kind_mismatch(true, "GraphCache::update_and_run");
    return detail::capture_entry(entry, stream, work, options_.mode, statistics_);
  }

  // The key becomes the most recently run (a splice: no allocation).
  void touch(SlotIterator slot) noexcept {
    if (slot != recency_.begin()) recency_.splice(recency_.begin(), recency_, slot);
  }

  GraphCacheOutcome run_new_key(StreamRef stream, const Key& key, detail::GraphWork work) {
    detail::GraphCacheEntry entry;
    GraphCacheOutcome outcome = detail::capture_entry(entry, stream, work, options_.mode, statistics_);
    insert_new(key, std::move(entry));
    return outcome;
  }

  void insert_new(const Key& key, detail::GraphCacheEntry entry) {
    recency_.push_front(Slot{key, std::move(entry)});
    try {
      index_.emplace(key, recency_.begin());
    } catch (...) {
      recency_.pop_front();
      throw;
    }
    if (recency_.size() > options_.capacity) evict_least_recent();
  }

  void evict_least_recent() {
    index_.erase(recency_.back().key);
    recency_.pop_back();
    ++statistics_.evictions;
  }

  GraphCacheOptions options_;
  std::list<Slot> recency_;  // most recently run first
  std::unordered_map<Key, SlotIterator, Hash, KeyEqual> index_;
  GraphCacheStatistics statistics_;
  mutable std::atomic<std::thread::id> user_{};
};

}  // namespace cudakit
