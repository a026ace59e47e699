// A fake CUDA driver for unit tests (DESIGN 6): installed into cudakit's driver table
// in place of libcuda, it runs without a GPU.
//
// - Host memory stands in for device memory; streams run synchronously (work runs when
//   it is submitted, host callbacks too).
// - Every handle goes through a ledger: a leak or a double destroy fails the test.
// - Faults are scripted: "fail the 3rd cuEventRecord with CUDA_ERROR_OUT_OF_MEMORY".
// - Calls can be slowed (delay()), to widen the window of a race between threads, or
//   held at a point the test chooses (on_call()), to run a race in a fixed order.
// - Every call is counted and logged, so tests can assert "no event was recorded" and
//   the fault sweep can fail each call an operation makes, one at a time.
// - An ordering model (vector clocks per stream, snapshots in events) checks that every
//   pair of conflicting memory accesses on different streams was ordered: a missing
//   wait is a hazard the test sees, even though the fake runs everything in order.
//
// Areas of the driver are implemented in separate files (fake_core.cpp, fake_memory.cpp,
// ...), each registering its entries through implement<>().
#pragma once

#include <cuda.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "cudakit/driver.hpp"

namespace cudakit::fake {

using driver::EntryId;

/// Depth of fake driver entries (and of kernel replays run outside one) on this thread: a
/// heap-counting test ignores what the fake itself allocates (its call log, its ordering
/// model, the kernel bodies) while this is nonzero.
extern thread_local int inside_fake_driver;

/// A scripted fault: the nth call (1-based) of an entry returns `code`; nth == 0 fails
/// every call from now on.
struct Fault {
  EntryId entry;
  int nth;
  CUresult code;
};

/// A conflicting pair of memory accesses that no stream order, event or synchronize
/// ordered.
struct Hazard {
  std::string description;
};

/// Vector clock: how much of each stream's work (by stream id) is known complete/ordered.
using Clock = std::map<std::uint64_t, std::uint64_t>;

struct FakeStream {
  std::uint64_t id = 0;
  int device = 0;
  unsigned flags = 0;
  int priority = 0;
  Clock clock;  // what this stream's next operation is ordered after (includes itself)
  // capture state (fake_graph.cpp)
  bool capturing = false;
  CUgraph capture_graph = nullptr;
};

struct FakeEvent {
  int device = 0;
  unsigned flags = 0;
  bool recorded = false;
  Clock snapshot;
  CUstream stalled_on = nullptr;  // recorded on a stalled stream: not complete while it stays stalled
};

struct Allocation {
  std::size_t bytes = 0;
  int device = 0;
  bool pinned_host = false;  // cuMemHostAlloc
  bool async = false;        // from cuMemAllocAsync
  unsigned host_flags = 0;   // cuMemHostAlloc's flags
  bool mapped = false;       // a virtual-memory mapping made accessible (its bytes count in its chunk)
  bool managed = false;      // cuMemAllocManaged (not counted against the device's memory)
  bool shared_mapping = false;  // an mmap of a shared pool's memory (fake_ipc.cpp), unmapped there
};

// Virtual-memory state (fake_virtual_memory.cpp).
struct Reservation {
  std::size_t bytes = 0;
  std::size_t host_bytes = 0;  // the host addresses behind it (inaccessible until mapped)
  void* host_base = nullptr;
};
struct PhysicalChunk {
  std::size_t bytes = 0;
  int device = 0;
  int mappings = 0;
  bool released = false;  // cuMemRelease'd: gone once its last mapping is
  CUmemAllocationHandleType shareable = CU_MEM_HANDLE_TYPE_NONE;
  int fd = -1;            // the memfd holding a shareable chunk's bytes (and an import's)
  bool imported = false;  // cuMemImportFromShareableHandle: another chunk's memory
};
struct Mapping {
  std::size_t bytes = 0;
  CUmemGenericAllocationHandle handle = 0;
  bool accessible = false;  // cuMemSetAccess gave a device read-write access
  std::set<int> devices;    // the devices that may access it
};

// Memory-area state (fake_memory.cpp).
struct HostRegistration {
  std::size_t bytes = 0;
  unsigned flags = 0;
};
struct FakePool {
  std::uint64_t release_threshold = 0;  // the driver's default
  std::uint64_t reserved = 0;           // not released at synchronize: the fake does not model that
  std::uint64_t reserved_high = 0, used_high = 0;
};

struct Access {
  std::uintptr_t begin = 0, end = 0;
  bool write = false;
  std::uint64_t stream = 0;  // 0 = the host
  std::uint64_t tick = 0;    // the stream's clock value at the access
  std::string what;
};

struct DeviceConfig {
  std::string name = "Fake GPU";
  int major = 9, minor = 0;
  std::size_t total_memory = 16ull << 30;
  std::map<int, int> attributes;  // overrides of the defaults
};

class Driver {
 public:
  Driver();
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  /// The fake in use (one at a time).
  static Driver& current();

  // ---- configuration (before use) ----
  std::vector<DeviceConfig> devices{DeviceConfig{}};
  int driver_version = 13000;
  /// Entries to remove (as if the driver were older).
  std::set<EntryId> missing;

  /// Installs this fake into cudakit's driver table.
  void install();

  // ---- faults ----
  void fail(EntryId entry, int nth, CUresult code) { std::lock_guard l(mutex); faults.push_back({entry, nth, code}); }
  void clear_faults() { std::lock_guard l(mutex); faults.clear(); }
  /// Every call of `entry` from now on sleeps for `delay` before it does its work (outside
  /// the fake's lock): it widens the window between what the caller checked and what the
  /// call finds, so that a race between threads shows in a few runs instead of one in
  /// thousands. Zero ends it.
  void delay(EntryId entry, std::chrono::microseconds delay) {
    delays[static_cast<std::size_t>(entry)].store(static_cast<int>(delay.count()), std::memory_order_relaxed);
  }
  /// Runs `hook` on the calling thread at the start of every call of `entry` from now on,
  /// before the call does its work (outside the fake's lock): a race test holds one thread
  /// inside a driver call until another got somewhere, so the race runs in the order the
  /// test chooses. An empty function ends it. Set and cleared while no other thread calls
  /// the fake (before the threads start, after they are joined).
  void on_call(EntryId entry, std::function<void()> hook) {
    auto i = static_cast<std::size_t>(entry);
    hooked[i].store(false, std::memory_order_release);
    hooks[i] = std::move(hook);
    if (hooks[i]) hooked[i].store(true, std::memory_order_release);
  }
  /// Ends a sticky error (a real driver never does; tests do, to clean up).
  void clear_sticky();
  /// The sticky error every call returns now, or CUDA_SUCCESS.
  CUresult sticky() const;
  /// Entries a sticky error leaves working (empty: it fails every call). A real driver
  /// still answers device queries (cuDeviceGetCount, cuDeviceGetAttribute, ...) after
  /// one; the fault sweep spares those.
  std::set<EntryId> sticky_spares;
  /// Destroys every stream and event still live (after a test left them behind on purpose).
  void destroy_leftovers();

  // ---- observation ----
  int calls(EntryId entry) const;
  std::vector<EntryId> log() const;
  void clear_log();
  std::vector<Hazard> hazards() const;

  /// Live handles of a kind ("stream", "event", "memory", "context retain", ...).
  std::size_t live(const std::string& kind) const;
  /// Everything the ledger found wrong: leaks and double destroys. Empty when clean.
  std::vector<std::string> ledger_problems() const;

  // ---- for the area files ----
  template <EntryId Id, class Fn>
  void implement(Fn* fn) {
    static_assert(std::is_same_v<Fn*, typename driver::EntryType<Id>::type>,
                  "a fake entry must have the signature of its pinned ABI version");
    impls[static_cast<std::size_t>(Id)] = reinterpret_cast<void*>(fn);
  }

  // Ledger.
  void created(const std::string& kind, const void* handle);
  /// False (and a recorded problem) when the handle is not live.
  bool destroyed(const std::string& kind, const void* handle);
  bool is_live(const std::string& kind, const void* handle) const;

  // Ordering model.
  FakeStream* stream(CUstream s);
  FakeEvent* event(CUevent e);
  /// Records an access by the work just submitted to `s` (nullptr: by the host, which
  /// must be ordered after everything it touches).
  void access(CUstream s, std::uintptr_t begin, std::size_t bytes, bool write, const std::string& what);
  /// Advances `s`'s own clock: a new operation was submitted.
  void tick(CUstream s);
  /// The host waited for `s` (synchronize) / for an event.
  void host_waits(const Clock& c);
  Clock host_clock;

  /// Finds the allocation holding `ptr`, or null.
  const Allocation* allocation_of(std::uintptr_t ptr, std::uintptr_t* base = nullptr) const;

  mutable std::recursive_mutex mutex;
  std::vector<Fault> faults;
  std::vector<EntryId> call_log;
  /// Every call that returned a scripted fault or the sticky error, in order (never
  /// cleared by clear_log: the fault sweep counts the releases that failed).
  std::vector<std::pair<EntryId, CUresult>> failed_calls;
  int call_counts[driver::entry_count] = {};
  std::atomic<int> delays[driver::entry_count] = {};  // microseconds, by entry (delay())
  std::function<void()> hooks[driver::entry_count];   // by entry (on_call())
  std::atomic<bool> hooked[driver::entry_count] = {};
  void* impls[driver::entry_count] = {};
  std::map<std::string, std::set<const void*>> ledger;
  std::vector<std::string> problems;
  std::map<CUstream, FakeStream> streams;
  /// Streams whose work never completes (a collective waiting for a rank that never comes):
  /// cuStreamQuery and cuEventQuery of events recorded on them say CUDA_ERROR_NOT_READY
  /// until the stream leaves the set. Tests must not synchronize them meanwhile.
  std::set<CUstream> stalled;
  std::map<CUevent, FakeEvent> events;
  std::map<std::uintptr_t, Allocation> allocations;  // by base address
  std::vector<Access> accesses;
  std::vector<Hazard> found_hazards;
  /// Memory freed and not handed out again (base -> bytes): an access to it is a use
  /// after free, which access() reports as a hazard. Forgotten when the range (or part of
  /// it) is allocated or registered again.
  std::map<std::uintptr_t, std::size_t> freed;
  void forget_freed(std::uintptr_t begin, std::size_t bytes);
  std::uint64_t next_stream_id = 1;
  std::map<int, int> primary_retains;  // device -> retain count
  CUcontext current_context = nullptr;  // per fake (tests are single-context per thread)
  int initialized = 0;

  // Memory area (fake_memory.cpp).
  std::map<std::uintptr_t, HostRegistration> host_registrations;  // by first byte
  std::map<int, FakePool> pools;                                  // default pool by device
  std::set<std::pair<int, int>> peer_access;                      // (from, to) enabled
  /// cuDeviceGetP2PAttribute answers other than the defaults (rank 0, access, atomics):
  /// (from, to, CUdevice_P2PAttribute) -> value.
  std::map<std::tuple<int, int, int>, int> p2p_attributes;
  /// Page-locked host memory the fake grants in all (cuMemHostAlloc beyond: out of memory).
  std::size_t pinned_host_limit = std::size_t(64) << 30;
  /// Async copies that were given pageable host memory (neither cuMemHostAlloc'd nor
  /// registered). The driver may read or write such memory after the call returns, or
  /// block for it; cudakit stages pageable memory instead, so tests expect none.
  std::vector<std::string> pageable_async_copies;

  // Virtual memory (fake_virtual_memory.cpp): the driver's rules are checked there.
  std::map<std::uintptr_t, Reservation> reservations;  // by base address
  std::map<CUmemGenericAllocationHandle, PhysicalChunk> physical;
  std::map<std::uintptr_t, Mapping> mappings;  // by first byte
  /// What cuMemGetAllocationGranularity answers (minimum and recommended alike).
  std::size_t vmm_granularity = std::size_t(2) << 20;
  CUmemGenericAllocationHandle next_physical_handle = 0x1000;
  /// Device memory in use on `device`: allocations and live physical chunks.
  std::size_t device_memory_used(int device) const;
  /// Whether [p, p + bytes) is device memory a copy may use: inside one allocation, or
  /// across accessible virtual-memory mappings that follow each other without a gap.
  bool device_range_valid(std::uintptr_t p, std::size_t bytes) const;

  // Per-area state hooks (each area file may keep its own state in maps keyed by handle).
  std::map<std::string, std::function<void()>> on_destroy;
};

/// Each area registers its entries; called by Driver::install().
void register_core(Driver& d);
void register_memory(Driver& d);
void register_modules(Driver& d);
void register_graphs(Driver& d);
void register_virtual_memory(Driver& d);
void register_managed_memory(Driver& d);
/// Gives back what virtual memory a test left behind: the host addresses behind
/// reservations and the files of shareable chunks (~Driver).
void release_virtual_memory_left_behind(Driver& d);
/// Sharing between processes (fake_ipc.cpp): shareable pools and IPC events.
/// Registered last: it wraps some of the memory and event entries of the other areas.
void register_ipc(Driver& d);
/// Releases what the IPC area still holds (shared mappings, files) when a fake goes.
void forget_ipc_state();

/// A fake context handle for device `d` (stable).
CUcontext context_of(int device);
int device_of(CUcontext context);
/// The calling thread's current context, read without a (counted) driver call.
CUcontext current_context();

// ---- stream capture, for the other area files (fake_graphs.cpp) ----

/// For entries that submit work to `s`: when `s` is capturing, records `replay` (which
/// issues the same operation on the stream it is given) as a node of the capture's graph,
/// sets *result and returns true; the entry then returns *result without running the work.
/// A `programmatic` kernel launch (programmatic stream serialization) gets programmatic
/// edges from the kernel nodes it depends on, as the driver captures them (CUDA 12.3+).
bool capture_operation(CUstream s, CUgraphNodeType type, const char* what, std::function<CUresult(CUstream)> replay,
                       CUresult* result, bool programmatic = false);
/// For the driver's "potentially unsafe" calls (cuMemAlloc, cuMemFree, ...): when this
/// thread may not make one now (capture modes, as the real driver rules), invalidates the
/// offending captures and returns CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; else CUDA_SUCCESS.
CUresult unsafe_call(const char* what);
/// Synchronize or query of `s`: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (and the capture
/// invalidated) when `s` is capturing; else CUDA_SUCCESS.
CUresult refuse_if_capturing(CUstream s);
/// Context synchronize: refused while any stream captures.
CUresult refuse_context_sync();
/// cuEventRecord on a capturing stream makes a captured event (returns true, *result set);
/// on another stream it forgets that the event was captured (returns false).
bool capture_event_record(CUevent e, CUstream s, CUresult* result);
/// cuStreamWaitEvent across capture boundaries: joins, merges and isolation errors.
/// Returns true (with *result) when the capture rules decided the call.
bool capture_event_wait(CUstream s, CUevent e, CUresult* result);
/// Query or synchronize of an event last recorded in a capture that goes on:
/// CUDA_ERROR_CAPTURED_EVENT, and the capture is invalidated; an event of an invalidated
/// or ended capture is INVALID_VALUE until recorded outside a capture.
CUresult refuse_captured_event(CUevent e);
/// Runs a host function (cuLaunchHostFunc, a graph's host node) as the driver would: no
/// CUDA call is allowed inside it, and one made there is a problem the test reports.
void run_host_function(CUhostFn fn, void* data);

// ---- graph helpers for tests (fake_graphs.cpp) ----

/// A fake kernel for graph kernel nodes: its parameters have these sizes, and a replay
/// runs `body` on the host with a pointer to each parameter's value. A body may call
/// kernel_access() and set_conditional().
CUfunction make_kernel(std::vector<std::size_t> parameter_sizes, std::function<void(void* const* params)> body);
/// From a fake kernel's body: an access to device memory by the kernel, for the ordering
/// model (on the stream the replay runs on).
void kernel_access(std::uintptr_t begin, std::size_t bytes, bool write, const char* what);
/// A kernel node's attribute as set with cuGraphKernelNodeSetAttribute (none if unset).
std::optional<CUlaunchAttributeValue> kernel_node_attribute(CUgraphNode node, CUlaunchAttributeID id);
/// The edge from `from` to `to` (its type and ports), none when `to` does not depend on `from`.
std::optional<CUgraphEdgeData> edge_between(CUgraphNode from, CUgraphNode to);
/// The nodes of a graph, as the fake holds them.
std::size_t node_count(CUgraph graph);
/// From a fake kernel's body: what cudaGraphSetConditional does on the device.
void set_conditional(CUgraphConditionalHandle handle, unsigned value);
/// While on, graph launches are queued instead of run: "replays still in flight". A host
/// function submitted to any stream meanwhile runs after them (run_pending_replays): the
/// fake does not model which stream waits for which, so it orders it after every replay.
void defer_graph_replays(bool on);
/// Runs the queued replays, in launch order, then the host functions queued behind them.
void run_pending_replays();
std::size_t pending_replays();
/// Internal (a sticky error): the context is gone, and with it every capture in progress;
/// their streams leave capture mode and the partial graphs go.
void end_every_capture();
/// Internal (cuStreamDestroy): a stream destroyed while it captures. The fake's model (the
/// device test StreamDestroyedMidCapture.* shows the driver's): its capture is invalidated;
/// a forked stream leaves it, and an origin takes it down with its partial graph.
void stream_destroyed_while_capturing(CUstream s);
/// Internal (cuLaunchHostFunc): queues the function behind the replays in flight, if any.
bool defer_host_function_behind_replays(CUhostFn fn, void* data);

}  // namespace cudakit::fake
