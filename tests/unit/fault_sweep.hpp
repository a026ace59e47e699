// The fault-injection sweep: every public operation, every driver call it
// makes, every error class.
//
// An operation is a name and a lambda that performs it on a Scene. The sweep runs it
// once on a fresh fake driver to list the driver calls it makes (so a driver call added
// to the library later is swept without editing any test), then once more per call and
// per error class, from a fresh fake, with that one call failing. Each run must end in
// one of the documented ways:
//
//   - the error reaches the caller as a cudakit::DriverError with the injected code,
//     naming the failed call (call()) and the resource (resource());
//   - the failed call was a release inside a destructor: nothing is thrown, and the
//     error is parked (DESIGN 2) with its code and call;
//   - CUDA_ERROR_NOT_READY from a query (cuStreamQuery, cuEventQuery): the operation
//     answers false (DESIGN 4), with nothing thrown or parked;
//   - a call a destructor makes before its release (the synchronize before cuMemFree, a
//     wait for another stream): parked like the release, with its code and call;
//   - OUT_OF_MEMORY from cuMemAlloc/cuMemAllocAsync: may end in success (the pool is
//     trimmed and the allocation tried again, memory_pool.hpp); recovered_by_design().
//
// A call named with a detail ("cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_...)") names the call;
// GraphInstantiateError (instantiation's documented error) counts as a DriverError with
// its code and the call and resource its message starts with. cuFuncGetParamInfo gets no
// INVALID_VALUE (its own "past the last parameter"). Library entries belong to no context:
// cuLibraryLoadData is process-level, and library calls are allowed on a poisoned device.
//
// and afterwards: the scene's objects are usable again (non-sticky codes: the operation
// run again succeeds) or cleanly dead (sticky codes: it throws ContextPoisoned carrying
// the original error, before any driver call but device queries and releases, DESIGN 7);
// nothing leaks (the fake's ledger and its primary-context retains, after the objects
// are gone and reset_library_state()); nothing crashes or hangs (a
// watchdog aborts a run that takes more than a minute, naming it).
//
// A second pass runs every operation on a device that an unrelated sticky error
// poisoned earlier (DESIGN 7), and destroys the scene while the driver still fails
// every call: destructors must neither throw nor hang, and what they park must say
// "poisoned". A third runs it on drivers older than the newest entries it calls: it
// must throw FeatureUnavailable naming the entry (or work without it), leaking nothing.
//
// Areas registered: devices, contexts, streams and events (fault_sweep_test.cpp); memory
// (fault_sweep_memory_test.cpp); modules, libraries and launches
// (fault_sweep_launch_test.cpp); capture and graphs (fault_sweep_graph_test.cpp).
//
// Cost: every call of an operation is swept, repeated occurrences included, from a
// fresh fake each time. The whole sweep (about 170 operations, some with 30 calls) takes
// about 2 s in the default build; if it grows past a minute, sweep each distinct entry of
// an operation once per error class instead of every occurrence.
//
// ---- Adding operations (other areas: memory, launch, graphs, ...) ----
//
// In your area's test file (or a new tests/unit/fault_sweep_<area>_test.cpp), register
// a table at namespace scope; each line is one operation, run from a fresh state:
//
//   #include "fault_sweep.hpp"
//   namespace sweep = cudakit::testing::sweep;
//   static const bool memory_ops = sweep::add("memory", {
//       {"DeviceBuffer(Stream, n)", [](sweep::Scene& s) { DeviceBuffer<int> b(s.stream(), 256); }},
//       {"copy H2D", [](sweep::Scene& s) { auto& b = s.given<DeviceBuffer<int>>("b", [&] { return DeviceBuffer<int>(s.stream(), 4); });
//                                          int h[4] = {}; copy(s.stream(), b, std::span(h)); }},
//   });
//
// - Inputs the operation works on (a stream, a recorded event, a buffer, a module) come
//   from the scene: s.stream(), s.event(), s.timed_event(), s.context(), s.device(), or
//   s.given<T>(key, make) for anything else. They are made on first use *outside* the
//   fault and the call log, and kept for the scene's life (so "usable afterwards" is
//   checked on the same objects); the scene destroys them, newest first.
// - What the operation creates itself (the resource under test) is a local: its
//   destructor's driver calls are swept too.
// - A query reports its answer with s.returned(bool) so NOT_READY is checked to be false.
// - Registration names must be unique; the test is
//   Call/FaultSweep.EndsCleanlyWhateverTheDriverAnswers/<name> (non-alphanumeric
//   characters become '_'), so --gtest_filter='*/Stream_adopt' runs one operation.
// - An operation that deliberately recovers from a failed call (a fallback) lists that
//   entry in its third field: {"name", fn, {EntryId::MemAllocAsync}}.
// - An operation that needs two devices (peer access) says so in its fourth field:
//   {"name", fn, {}, 2}; s.device(1), s.stream() on device 0 only. Such an operation gets
//   no sticky codes and no poisoned pass: the fake's sticky error fails every call of the
//   process, where a real one kills one context, so it would fail device 1's calls as no
//   driver does. (Sticky errors are swept on every one-device operation.)
// - CUDAKIT_SWEEP_VERBOSE=1 prints every case as it runs.
// - A new release entry (a destroy/free/unload called from destructors) is already in
//   release_entries() below if it is in driver_entries.hpp; check the list when adding one.
#pragma once

#include <cuda.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cudakit/context.hpp"
#include "cudakit/device.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/event.hpp"
#include "cudakit/stream.hpp"
#include "fake_driver.hpp"

namespace cudakit::testing::sweep {

using driver::EntryId;

/// The state an operation runs in: the fake driver and the operation's inputs.
class Scene {
 public:
  explicit Scene(fake::Driver& fake) : fake_(fake) {}
  ~Scene();
  Scene(const Scene&) = delete;
  Scene& operator=(const Scene&) = delete;

  fake::Driver& fake() { return fake_; }

  // ---- inputs: made on first use, outside the fault and the call log ----
  Device device(int ordinal = 0);
  /// A retained primary context.
  ContextRef context(int ordinal = 0);
  /// Stream `i` on device 0 (priority 0).
  StreamRef stream(int i = 0);
  /// Event `i` (timing off), recorded on stream(0).
  EventRef event(int i = 0);
  /// Timing event `i`, recorded on stream(0).
  EventRef timed_event(int i = 0);
  /// A raw non-blocking stream that the scene destroys at the end (for adopt()).
  CUstream raw_stream();

  /// Any other input, made by `make()` on first use (outside the fault and the log) and
  /// destroyed with the scene, newest first.
  template <class T, class Make>
  T& given(const std::string& key, Make&& make) {
    for (auto& [k, p] : objects_)
      if (k == key) return *static_cast<T*>(p.get());
    std::shared_ptr<T> made;
    setup([&] { made = std::make_shared<T>(make()); });
    objects_.emplace_back(key, made);
    return *made;
  }

  /// Runs `fn` with the scripted fault suspended and its driver calls left out of the
  /// call log and the call counts (a sticky error already raised still applies).
  template <class F>
  void setup(F&& fn) {
    Suspended saved = suspend();
    try {
      fn();
    } catch (...) {
      resume(std::move(saved));
      throw;
    }
    resume(std::move(saved));
  }

  /// A query operation reports its answer (checked to be false under NOT_READY).
  void returned(bool value) { returned_ = value; }
  std::optional<bool> take_returned() { return std::exchange(returned_, std::nullopt); }

 private:
  struct Suspended {
    std::vector<fake::Fault> faults;
    std::vector<EntryId> log;
    std::vector<int> counts;
  };
  Suspended suspend();
  void resume(Suspended saved);

  fake::Driver& fake_;
  std::vector<std::pair<std::string, std::shared_ptr<void>>> objects_;
  std::optional<bool> returned_;
};

/// One public operation.
struct Operation {
  std::string name;
  std::function<void(Scene&)> run;
  /// Entries whose failure the operation handles itself (a fallback): their failure
  /// may end without an exception or a parked error.
  std::vector<EntryId> recovers = {};
  /// How many devices the fake driver has (2 for peer access and copies between devices).
  int devices = 1;
};

/// Adds an area's operations to the sweep. Returns true, for a namespace-scope
/// `static const bool registered = sweep::add(...)`.
bool add(const std::string& area, std::vector<Operation> operations);
/// Every registered operation, in registration order.
const std::vector<Operation>& operations();

/// The driver calls the operation makes from a fresh state, in order (its inputs'
/// calls left out). Throws if the operation fails without a fault.
std::vector<EntryId> calls_of(const Operation& op);
/// Every problem the sweep finds for one operation (empty when it behaves).
std::vector<std::string> sweep_faults(const Operation& op);
/// Every problem found running the operation on a device poisoned by an earlier
/// sticky error, and destroying its scene while the driver still fails.
std::vector<std::string> sweep_poisoned(const Operation& op);
/// Every problem found running the operation on drivers older than the entries it
/// calls (for each entry newer than the oldest supported driver: a driver just before
/// it, lacking every entry of its version and later). The operation must throw
/// FeatureUnavailable naming a missing entry, or work without it; nothing leaks.
std::vector<std::string> sweep_old_drivers(const Operation& op);

// ---- entry classes the sweep's rules depend on ----

/// Queries whose CUDA_ERROR_NOT_READY means "not yet", answered false.
bool is_query(EntryId e);
/// Waits: they get CUDA_ERROR_NOT_READY injected too (it must surface as an error).
bool is_sync(EntryId e);
/// Releases (destroy, free, unload, primary-context release): called from destructors,
/// where a failure is parked, not thrown.
bool is_release(EntryId e);
/// Calls about the process or a device, not a context: allowed on a poisoned device.
bool is_device_level(EntryId e);
/// Calls with no resource to name (process-wide).
bool is_process_level(EntryId e);
/// Whether the library recovers from `code` failing a call of `e` by design (a fallback
/// every operation making the call shares), so the failure may end without an error.
bool recovered_by_design(EntryId e, CUresult code);
/// The error classes the sweep injects into a call of `e`.
std::vector<CUresult> codes_for(EntryId e);

}  // namespace cudakit::testing::sweep
