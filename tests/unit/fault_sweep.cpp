// The fault-injection sweep's machinery (see fault_sweep.hpp for the rules).
#include "fault_sweep.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>

#include "cudakit/error.hpp"
#include "cudakit/ipc_error.hpp"
#include "device/device_state.hpp"
#include "driver/driver_testing.hpp"
#include "library_reset.hpp"

namespace cudakit::testing::sweep {

namespace {

const char* name_of(EntryId e) { return driver::entry_info(e).name; }

std::string ordinal(int n) {
  const char* suffix = (n % 100 >= 11 && n % 100 <= 13) ? "th" : n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
  return std::to_string(n) + suffix;
}

// ---- a fresh fake driver per run ----

class FreshDriver {
 public:
  explicit FreshDriver(const Operation& op) : fake_(std::make_unique<fake::Driver>()) {
    fake_->devices.resize(static_cast<std::size_t>(op.devices));
    // A real driver still answers device queries after a sticky error.
    for (std::size_t i = 0; i < driver::entry_count; ++i)
      if (is_device_level(static_cast<EntryId>(i))) fake_->sticky_spares.insert(static_cast<EntryId>(i));
    fake_->install();
    detail::clear_poison_for_testing();
    drain_parked_errors();
    forget_cached_current_context();
  }
  ~FreshDriver() {
    driver::testing::reset();
    detail::clear_poison_for_testing();
    drain_parked_errors();
    forget_cached_current_context();
  }
  fake::Driver& fake() { return *fake_; }

 private:
  std::unique_ptr<fake::Driver> fake_;
};

// ---- a watchdog: a run that hangs (a deadlock in an error path) aborts, named ----

class Watchdog {
 public:
  Watchdog() : thread_([this] { watch(); }) {}
  ~Watchdog() {
    {
      std::lock_guard l(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void arm(std::string label) {
    std::lock_guard l(mutex_);
    label_ = std::move(label);
    deadline_ = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    cv_.notify_all();
  }

 private:
  void watch() {
    std::unique_lock l(mutex_);
    while (!stop_) {
      if (deadline_ != never && std::chrono::steady_clock::now() >= deadline_) {
        std::fprintf(stderr, "fault sweep: hung for 60 s in: %s\n", label_.c_str());
        std::abort();
      }
      if (deadline_ == never) cv_.wait(l);
      else cv_.wait_until(l, deadline_);
    }
  }
  static constexpr std::chrono::steady_clock::time_point never = std::chrono::steady_clock::time_point::max();
  std::mutex mutex_;
  std::condition_variable cv_;
  std::string label_;
  std::chrono::steady_clock::time_point deadline_ = never;
  bool stop_ = false;
  std::thread thread_;
};

// ---- what a run ended in ----

struct Outcome {
  enum Kind { completed, driver_error, poisoned, other_cudakit_error, std_exception, unknown_exception } kind = completed;
  CUresult code = CUDA_SUCCESS;
  std::string call, resource, what;
  CUresult original_code = CUDA_SUCCESS;  // ContextPoisoned only
  std::string original_call;
  std::optional<bool> returned;

  std::string describe() const {
    switch (kind) {
      case completed: return "completed without an exception";
      case driver_error: return "threw DriverError: " + what;
      case poisoned: return "threw ContextPoisoned: " + what;
      case other_cudakit_error: return "threw a cudakit::Error that is not a DriverError: " + what;
      case std_exception: return "threw a std::exception that is not a cudakit::Error: " + what;
      case unknown_exception: return "threw something that is not a std::exception";
    }
    return "?";
  }
};

Outcome run(const Operation& op, Scene& scene) {
  Outcome o;
  try {
    op.run(scene);
  } catch (const ContextPoisoned& e) {
    o.kind = Outcome::poisoned;
    o.code = e.code();
    o.call = e.call();
    o.resource = e.resource();
    o.what = e.what();
    o.original_code = e.original().code();
    o.original_call = e.original().call();
  } catch (const DriverError& e) {
    o.kind = Outcome::driver_error;
    o.code = e.code();
    o.call = e.call();
    o.resource = e.resource();
    o.what = e.what();
  } catch (const GraphInstantiateError& e) {
    // Instantiation's documented error (graph_exec.hpp) is not a DriverError: it also
    // carries the instantiate result and the failing node. It carries the code, and its
    // message starts "<call> on <resource>: ", as a DriverError's does; read them there.
    o.kind = Outcome::driver_error;
    o.code = e.code();
    o.what = e.what();
    std::size_t on = o.what.find(" on "), colon = o.what.find(": ");
    o.call = o.what.substr(0, std::min(on, colon));
    if (on != std::string::npos && colon != std::string::npos && on < colon) o.resource = o.what.substr(on + 4, colon - on - 4);
  } catch (const IpcError& e) {
    // An import the driver refused is IpcError (ipc_error.hpp), carrying the driver's code,
    // its message starting "<call> on <resource>: " as a DriverError's does.
    o.kind = e.code() == CUDA_SUCCESS ? Outcome::other_cudakit_error : Outcome::driver_error;
    o.code = e.code();
    o.what = e.what();
    std::size_t on = o.what.find(" on "), colon = o.what.find(": ");
    o.call = o.what.substr(0, std::min(on, colon));
    if (on != std::string::npos && colon != std::string::npos && on < colon) o.resource = o.what.substr(on + 4, colon - on - 4);
  } catch (const Error& e) {
    o.kind = Outcome::other_cudakit_error;
    o.what = e.what();
  } catch (const std::exception& e) {
    o.kind = Outcome::std_exception;
    o.what = e.what();
  } catch (...) {
    o.kind = Outcome::unknown_exception;
  }
  o.returned = scene.take_returned();
  return o;
}

std::string parked_lines(const std::vector<ParkedError>& parked) {
  std::string s;
  for (const auto& p : parked) s += "\n      parked by " + p.origin + ": " + p.message;
  return s;
}

// Whether an error's call() names `call`: the entry's name, or the name with what it
// was asked in parentheses ("cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)").
bool names_call(const std::string& named, const char* call) {
  return named == call || named.rfind(std::string(call) + "(", 0) == 0;
}

bool parked_has(const std::vector<ParkedError>& parked, CUresult code, const char* call) {
  return std::any_of(parked.begin(), parked.end(), [&](const ParkedError& p) {
    return p.code == code && p.message.find(call) != std::string::npos;
  });
}

// Calls made since position `from` of the log that a poisoned device must not make.
std::vector<EntryId> forbidden_on_poisoned(const std::vector<EntryId>& log, std::size_t from) {
  std::vector<EntryId> out;
  for (std::size_t i = from; i < log.size(); ++i)
    if (!is_device_level(log[i]) && !is_release(log[i])) out.push_back(log[i]);
  return out;
}

std::string names(const std::vector<EntryId>& entries) {
  std::string s;
  for (EntryId e : entries) s += (s.empty() ? "" : ", ") + std::string(name_of(e));
  return s;
}

// After the scene is gone: every handle still live in the fake must be one whose release
// failed (the driver refused it, so it is not cudakit's leak), and nothing else may be
// wrong in the ledger. Cleans the leftovers so the next run starts clean.
void check_ledger(fake::Driver& fake, std::vector<std::string>& problems, const std::string& label) {
  std::size_t failed_releases = 0, failed_context_releases = 0;
  for (const auto& [entry, code] : fake.failed_calls) {
    if (entry == EntryId::DevicePrimaryCtxRelease) ++failed_context_releases;
    else if (is_release(entry)) ++failed_releases;
  }
  std::size_t live_handles = 0;
  std::string live_words;
  {
    std::lock_guard l(fake.mutex);
    for (const auto& [kind, handles] : fake.ledger) {
      live_handles += handles.size();
      if (!handles.empty()) live_words += " " + std::to_string(handles.size()) + " " + kind;
    }
  }
  std::size_t retains = 0;
  for (const auto& [device, n] : fake.primary_retains) retains += static_cast<std::size_t>(std::max(n, 0));
  if (live_handles != failed_releases)
    problems.push_back(label + ": " + std::to_string(live_handles) + " handle(s) live at the end (" + live_words +
                       " ) but " + std::to_string(failed_releases) + " release(s) failed: a leak");
  if (retains != failed_context_releases)
    problems.push_back(label + ": " + std::to_string(retains) + " primary-context retain(s) left at the end but " +
                       std::to_string(failed_context_releases) + " release(s) failed: a leak");
  // Clean what the failed releases left.
  fake.destroy_leftovers();
  {
    std::lock_guard l(fake.mutex);
    for (auto& [kind, handles] : fake.ledger) handles.clear();
    for (auto& [device, n] : fake.primary_retains) n = 0;
  }
  for (const auto& p : fake.ledger_problems()) problems.push_back(label + ": the fake's ledger: " + p);
}

// Destroys the scene, resets the library's per-device state, and checks the ledger.
void finish(std::unique_ptr<Scene>& scene, fake::Driver& fake, std::vector<std::string>& problems,
            const std::string& label) {
  scene.reset();
  cudakit::testing::reset_library_state();
  auto parked = drain_parked_errors();
  if (!parked.empty()) problems.push_back(label + ": errors parked during cleanup:" + parked_lines(parked));
  check_ledger(fake, problems, label);
}

// One run: `op` with the nth call of `entry` failing with `code`.
void run_case(const Operation& op, EntryId entry, int nth, CUresult code, const std::string& label,
              std::vector<std::string>& problems) {
  FreshDriver fresh(op);
  fake::Driver& fake = fresh.fake();
  const bool sticky = is_sticky(code);
  const char* call = name_of(entry);
  const bool recovers =
      std::find(op.recovers.begin(), op.recovers.end(), entry) != op.recovers.end() || recovered_by_design(entry, code);
  auto scene = std::make_unique<Scene>(fake);

  // ---- the faulted run ----
  fake.fail(entry, nth, code);
  std::size_t failures_before = fake.failed_calls.size();
  Outcome first = run(op, *scene);
  auto parked = drain_parked_errors();
  bool fault_hit = false;
  for (std::size_t i = failures_before; i < fake.failed_calls.size(); ++i)
    if (fake.failed_calls[i].first == entry && fake.failed_calls[i].second == code) fault_hit = true;
  if (!fault_hit) {
    problems.push_back(label + ": the call was never made (the operation is not deterministic?); it " +
                       first.describe());
    finish(scene, fake, problems, label);
    return;
  }
  auto fail = [&](const std::string& why) {
    problems.push_back(label + ": " + why + "; the operation " + first.describe() + parked_lines(parked));
  };

  if (first.kind == Outcome::driver_error) {
    if (first.code != code) fail("the exception carries " + error_name(first.code) + ", not the injected code");
    else if (!names_call(first.call, call))
      fail("the exception names the call '" + first.call + "', not " + call);
    else if (first.resource.empty() && !is_process_level(entry)) fail("the exception names no resource");
    else if (!sticky && !parked.empty()) fail("errors were parked besides the exception");
    if (code == CUDA_ERROR_NOT_READY && is_query(entry)) fail("NOT_READY from a query is 'false', not an error");
  } else if (first.kind == Outcome::poisoned) {
    // Only after a sticky failure of a release (parked in a destructor), when the
    // operation then went on on the poisoned device.
    // Or after a sticky failure of a capture scope's mode restore (also a destructor's).
    if (!(sticky && (is_release(entry) || entry == EntryId::ThreadExchangeStreamCaptureMode) &&
          parked_has(parked, code, call)))
      fail("ContextPoisoned instead of the original error");
    else if (first.original_code != code || !names_call(first.original_call, call))
      fail("ContextPoisoned does not carry the original error");
  } else if (first.kind == Outcome::completed) {
    if (recovers) {
      // the operation handled it
    } else if (code == CUDA_ERROR_NOT_READY && is_query(entry)) {
      if (!parked.empty()) fail("NOT_READY from a query parked an error");
      if (first.returned.has_value() && *first.returned) fail("NOT_READY from a query answered true");
    } else if (is_release(entry)) {
      if (!parked_has(parked, code, call)) fail("a failed release was neither thrown nor parked with its code and call");
      else if (!sticky && parked.size() != 1) fail("one failed release parked more than one error");
    } else if (parked_has(parked, code, call)) {
      // Not a release, but made by a destructor before its release (the synchronize
      // before cuMemFree, a free's wait for another stream): parked like the release
      // (DESIGN 2), with its code and call, since a destructor cannot throw.
      if (!sticky && parked.size() != 1) fail("one failed call parked more than one error");
    } else {
      fail("the failure was swallowed");
    }
  } else {
    fail("the failure did not become a DriverError");
  }

  // ---- afterwards: usable again, or cleanly dead ----
  fake.clear_faults();
  std::size_t log_before = fake.log().size();
  Outcome again = run(op, *scene);
  auto parked_again = drain_parked_errors();
  auto after = [&](const std::string& why) {
    problems.push_back(label + ": run again afterwards, " + why + "; it " + again.describe() + parked_lines(parked_again));
  };
  if (!sticky) {
    if (again.kind != Outcome::completed) after("it must succeed (the objects must stay usable)");
    else if (!parked_again.empty()) after("it parked errors");
  } else {
    auto forbidden = forbidden_on_poisoned(fake.log(), log_before);
    if (!forbidden.empty()) after("the poisoned device saw driver calls: " + names(forbidden));
    if (again.kind == Outcome::poisoned) {
      if (again.original_code != code || !names_call(again.original_call, call)) after("ContextPoisoned does not carry the original");
    } else if (again.kind != Outcome::completed) {
      after("it must throw ContextPoisoned (or complete from caches)");
    }
    fake.clear_sticky();
  }
  finish(scene, fake, problems, label);
}

}  // namespace

// ---- Scene ----

Scene::~Scene() {
  while (!objects_.empty()) objects_.pop_back();
}

Scene::Suspended Scene::suspend() {
  std::lock_guard l(fake_.mutex);
  Suspended s;
  s.faults = std::exchange(fake_.faults, {});
  s.log = fake_.call_log;
  s.counts.assign(std::begin(fake_.call_counts), std::end(fake_.call_counts));
  return s;
}

void Scene::resume(Suspended saved) {
  std::lock_guard l(fake_.mutex);
  fake_.faults = std::move(saved.faults);
  fake_.call_log = std::move(saved.log);
  std::copy(saved.counts.begin(), saved.counts.end(), std::begin(fake_.call_counts));
}

Device Scene::device(int ordinal) {
  std::optional<Device> d;
  setup([&] { d = Device::get(ordinal); });
  return *d;
}

ContextRef Scene::context(int ordinal) {
  return given<Context>("context " + std::to_string(ordinal), [&] { return Context::primary(Device::get(ordinal)); }).ref();
}

StreamRef Scene::stream(int i) {
  return given<Stream>("stream " + std::to_string(i), [&] { return Stream(Device::get(0)); }).ref();
}

EventRef Scene::event(int i) {
  StreamRef s = stream(0);
  return given<Event>("event " + std::to_string(i), [&] {
           Event e(Device::get(0));
           e.record(s);
           return e;
         }).ref();
}

EventRef Scene::timed_event(int i) {
  StreamRef s = stream(0);
  return given<Event>("timed event " + std::to_string(i), [&] {
           Event e(Device::get(0), EventTiming::enabled);
           e.record(s);
           return e;
         }).ref();
}

namespace {
struct RawStream {
  CUstream handle = nullptr;
  RawStream() = default;
  RawStream(RawStream&& o) noexcept : handle(std::exchange(o.handle, nullptr)) {}
  ~RawStream() {
    if (handle) driver::cu.StreamDestroy(handle);
  }
};
}  // namespace

CUstream Scene::raw_stream() {
  ContextRef c = context(0);
  return given<RawStream>("raw stream", [&] {
           c.make_current();
           RawStream r;
           check(driver::cu.StreamCreateWithPriority(&r.handle, CU_STREAM_NON_BLOCKING, 0), "cuStreamCreateWithPriority",
                 Resource::none());
           return r;
         }).handle;
}

// ---- the registry ----

namespace {
std::vector<Operation>& registry() {
  static std::vector<Operation> ops;
  return ops;
}
}  // namespace

bool add(const std::string& area, std::vector<Operation> operations) {
  (void)area;
  for (auto& op : operations) registry().push_back(std::move(op));
  return true;
}

const std::vector<Operation>& operations() { return registry(); }

// ---- the sweeps ----

std::vector<EntryId> calls_of(const Operation& op) {
  FreshDriver fresh(op);
  std::vector<EntryId> calls;
  Outcome o;
  {
    Scene scene(fresh.fake());
    o = run(op, scene);
    calls = fresh.fake().log();
  }
  // Reset before throwing too: state left behind would break the next operation's test.
  cudakit::testing::reset_library_state();
  drain_parked_errors();
  if (o.kind != Outcome::completed) throw std::runtime_error(op.name + " fails without a fault: it " + o.describe());
  return calls;
}

std::vector<std::string> sweep_faults(const Operation& op) {
  std::vector<std::string> problems;
  Watchdog watchdog;

  // Enumerate the calls the operation makes, on a fresh fake without faults.
  std::vector<EntryId> calls;
  {
    watchdog.arm(op.name + ": the run without faults");
    FreshDriver fresh(op);
    auto scene = std::make_unique<Scene>(fresh.fake());
    Outcome o = run(op, *scene);
    calls = fresh.fake().log();
    auto parked = drain_parked_errors();
    if (o.kind != Outcome::completed) problems.push_back(op.name + ": fails without a fault: it " + o.describe());
    if (!parked.empty()) problems.push_back(op.name + ": parks errors without a fault:" + parked_lines(parked));
    finish(scene, fresh.fake(), problems, op.name + " (without faults)");
    if (!problems.empty()) return problems;
  }
  if (calls.empty()) problems.push_back(op.name + ": makes no driver call (nothing to sweep; is the operation right?)");

  const bool verbose = std::getenv("CUDAKIT_SWEEP_VERBOSE") != nullptr;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    EntryId entry = calls[i];
    int nth = static_cast<int>(std::count(calls.begin(), calls.begin() + static_cast<std::ptrdiff_t>(i) + 1, entry));
    for (CUresult code : codes_for(entry)) {
      // The fake's sticky error is process-wide, but a real one kills one context: with
      // two devices the fake would fail device 1's calls too, which no driver does. So
      // two-device operations get the non-sticky codes only (fault_sweep.hpp).
      if (op.devices > 1 && is_sticky(code)) continue;
      std::string label = op.name + ": call " + std::to_string(i + 1) + "/" + std::to_string(calls.size()) + ", the " +
                          ordinal(nth) + " " + name_of(entry) + ", failing with " + error_name(code);
      watchdog.arm(label);
      run_case(op, entry, nth, code, label, problems);
      if (verbose) std::fprintf(stderr, "%s\n", label.c_str());
      if (problems.size() >= 25) {
        problems.push_back(op.name + ": (stopped after 25 problems)");
        return problems;
      }
    }
  }
  return problems;
}

std::vector<std::string> sweep_poisoned(const Operation& op) {
  std::vector<std::string> problems;
  if (op.devices > 1) return problems;  // the fake cannot poison one device of two (see sweep_faults)
  Watchdog watchdog;
  constexpr CUresult sticky_code = CUDA_ERROR_ILLEGAL_ADDRESS;
  const char* poisoning_call = "cuStreamSynchronize";
  // warm: the operation ran once before the poison (its inputs exist, caches are
  // filled); cold: its first run is on the poisoned device.
  for (bool warm : {true, false}) {
    std::string label = op.name + (warm ? " (after a successful run)" : " (first run)") + " on a poisoned device";
    watchdog.arm(label);
    FreshDriver fresh(op);
    fake::Driver& fake = fresh.fake();
    auto scene = std::make_unique<Scene>(fake);
    if (warm) {
      Outcome o = run(op, *scene);
      if (o.kind != Outcome::completed) problems.push_back(label + ": fails without a fault: it " + o.describe());
    }
    // An unrelated sticky error poisons device 0.
    StreamRef poisoner = scene->given<Stream>("poisoner", [] { return Stream(Device::get(0)); }).ref();
    fake.fail(EntryId::StreamSynchronize, 0, sticky_code);
    try {
      poisoner.synchronize();
      problems.push_back(label + ": the poisoning synchronize did not throw");
    } catch (const DriverError&) {
    }
    fake.clear_faults();
    drain_parked_errors();

    std::size_t log_before = fake.log().size();
    Outcome o = run(op, *scene);
    auto forbidden = forbidden_on_poisoned(fake.log(), log_before);
    auto parked = drain_parked_errors();
    auto fail = [&](const std::string& why) {
      problems.push_back(label + ": " + why + "; it " + o.describe() + parked_lines(parked));
    };
    if (!forbidden.empty()) fail("the driver saw calls on the poisoned device: " + names(forbidden));
    if (o.kind == Outcome::poisoned) {
      if (o.original_code != sticky_code || o.original_call != poisoning_call) fail("ContextPoisoned does not carry the original");
    } else if (o.kind != Outcome::completed) {
      fail("it must throw ContextPoisoned (or complete from caches)");
    }
    for (const auto& p : parked)
      if (p.message.find("poisoned") == std::string::npos)
        problems.push_back(label + ": a parked error does not say the context is poisoned: " + p.message);

    // Destructors on the poisoned device, with the driver still failing every call:
    // no throw (it would terminate), no hang (the watchdog), parked errors that say so.
    watchdog.arm(label + ": destroying the scene");
    scene.reset();
    auto parked_by_destructors = drain_parked_errors();
    for (const auto& p : parked_by_destructors)
      if (p.message.find("poisoned") == std::string::npos || p.code != sticky_code)
        problems.push_back(label + ": a destructor parked an error that does not carry the poison: " + p.origin + ": " +
                           p.message);
    fake.clear_sticky();
    finish(scene, fake, problems, label);
  }
  return problems;
}

std::vector<std::string> sweep_old_drivers(const Operation& op) {
  std::vector<std::string> problems;
  Watchdog watchdog;
  std::vector<EntryId> calls = calls_of(op);
  std::vector<int> versions;  // the driver versions just before each newer entry
  for (EntryId e : calls) {
    int since = driver::entry_info(e).introduced_in;
    if (since > driver::minimum_driver_version) versions.push_back(since - 10);
  }
  std::sort(versions.begin(), versions.end());
  versions.erase(std::unique(versions.begin(), versions.end()), versions.end());
  for (int version : versions) {
    std::string label = op.name + " on a CUDA " + driver::version_string(version) + " driver";
    watchdog.arm(label);
    // A fresh fake as old as `version`: every later entry is missing.
    std::vector<std::string> missing_names;
    auto fake = std::make_unique<fake::Driver>();
    fake->devices.resize(static_cast<std::size_t>(op.devices));
    fake->driver_version = version;
    for (std::size_t i = 0; i < driver::entry_count; ++i)
      if (driver::entry_infos[i].introduced_in > version) {
        fake->missing.insert(static_cast<EntryId>(i));
        missing_names.push_back(driver::entry_infos[i].name);
      }
    fake->install();
    detail::clear_poison_for_testing();
    drain_parked_errors();
    forget_cached_current_context();
    {
      auto scene = std::make_unique<Scene>(*fake);
      try {
        op.run(*scene);
      } catch (const FeatureUnavailable& e) {
        if (std::find(missing_names.begin(), missing_names.end(), e.entry()) == missing_names.end())
          problems.push_back(label + ": FeatureUnavailable names " + e.entry() + ", which this driver has");
        else if (std::string(e.what()).find(driver::version_string(version)) == std::string::npos)
          problems.push_back(label + ": FeatureUnavailable does not name the driver's version: " + e.what());
      } catch (const std::exception& e) {
        problems.push_back(label + ": threw something other than FeatureUnavailable: " + e.what());
      }
      auto parked = drain_parked_errors();
      if (!parked.empty()) problems.push_back(label + ": parked errors:" + parked_lines(parked));
      finish(scene, *fake, problems, label);
    }
    driver::testing::reset();
    detail::clear_poison_for_testing();
    forget_cached_current_context();
  }
  return problems;
}

// ---- entry classes ----

bool recovered_by_design(EntryId e, CUresult code) {
  // An allocation that fails for lack of memory trims the device's default pool (or a
  // PoolResource's pool) and tries once more before reporting OutOfMemory
  // (device_buffer.hpp, memory_pool.hpp, pool_resource.hpp):
  // with one failing call, the second try succeeds, as it is meant to.
  // A refused switch to relaxed capture mode (CaptureTolerantScope) leaves the thread in
  // its own mode and goes on: the lazy set-up it wraps is not stream-ordered, so the
  // worst case is an invalidated capture, reported at its end. Sticky codes are thrown.
  if (e == EntryId::ThreadExchangeStreamCaptureMode) return !is_sticky(code);
  return code == CUDA_ERROR_OUT_OF_MEMORY &&
         (e == EntryId::MemAlloc || e == EntryId::MemAllocAsync || e == EntryId::MemAllocFromPoolAsync);
}

bool is_query(EntryId e) { return e == EntryId::StreamQuery || e == EntryId::EventQuery; }

bool is_sync(EntryId e) {
  return e == EntryId::StreamSynchronize || e == EntryId::EventSynchronize || e == EntryId::CtxSynchronize;
}

bool is_release(EntryId e) {
  switch (e) {
    case EntryId::DevicePrimaryCtxRelease:
    case EntryId::StreamDestroy:
    case EntryId::EventDestroy:
    case EntryId::MemFree:
    case EntryId::MemFreeAsync:
    case EntryId::MemFreeHost:
    case EntryId::MemHostUnregister:
    case EntryId::MemRelease:
    case EntryId::MemAddressFree:
    case EntryId::ModuleUnload:
    case EntryId::LibraryUnload:
    case EntryId::GraphDestroy:
    case EntryId::GraphExecDestroy:
    case EntryId::MemPoolDestroy:
      return true;
    default:
      return false;
  }
}

bool is_device_level(EntryId e) {
  switch (e) {
    case EntryId::Init:
    case EntryId::DriverGetVersion:
    case EntryId::GetErrorName:
    case EntryId::GetErrorString:
    case EntryId::DeviceGet:
    case EntryId::DeviceGetCount:
    case EntryId::DeviceGetName:
    case EntryId::DeviceGetUuid:
    case EntryId::DeviceGetAttribute:
    case EntryId::DeviceTotalMem:
    case EntryId::DeviceGetPCIBusId:
    case EntryId::DeviceCanAccessPeer:
    // A library and its kernels belong to no context (library.hpp: context-independent
    // loading): a device's sticky error does not reach them, and cudakit does not refuse
    // them on a poisoned device. Their per-device functions (cuKernelGetFunction) do.
    case EntryId::LibraryLoadData:
    case EntryId::LibraryUnload:
    case EntryId::LibraryGetKernel:
    case EntryId::LibraryGetKernelCount:
    case EntryId::LibraryEnumerateKernels:
    case EntryId::KernelGetName:
      return true;
    default:
      return false;
  }
}

bool is_process_level(EntryId e) {
  // cuLibraryLoadData too: a library belongs to no context (library.hpp); before it is
  // loaded there is nothing to name, and no device it could poison.
  return e == EntryId::Init || e == EntryId::DriverGetVersion || e == EntryId::DeviceGetCount ||
         e == EntryId::LibraryLoadData;
}

std::vector<CUresult> codes_for(EntryId e) {
  std::vector<CUresult> codes = {CUDA_ERROR_OUT_OF_MEMORY};
  // cuFuncGetParamInfo answers INVALID_VALUE for "past the last parameter": that is how
  // a kernel's parameter list ends, and an injected one is indistinguishable from it (the
  // operation then sees fewer parameters and says so as InvalidArgument). Not injected.
  if (e != EntryId::FuncGetParamInfo) codes.push_back(CUDA_ERROR_INVALID_VALUE);
  // A sticky error belongs to a context: process-wide calls (no device, nothing to
  // poison) cannot meet one.
  if (!is_process_level(e)) {
    codes.push_back(CUDA_ERROR_LAUNCH_FAILED);
    codes.push_back(CUDA_ERROR_ILLEGAL_ADDRESS);
  }
  if (is_query(e) || is_sync(e)) codes.push_back(CUDA_ERROR_NOT_READY);
  return codes;
}

}  // namespace cudakit::testing::sweep
