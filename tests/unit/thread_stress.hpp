// Thread stress on the fake driver (DESIGN 4, "Threads"): many threads doing
// what the headers say may be done from any thread at once, so that the TSan build of
// the unit tests (CMakePresets.json, preset tsan) checks the library's shared state:
// the device table, the library's context retain, the priority cache, the event pool,
// the poison marks and the parked errors.
//
// Each thread runs the registered actions round-robin (each thread from a different
// starting point, so every pair of actions runs side by side somewhere). An action uses
// the thread's own stream and device, and the streams and events all threads share.
//
// ---- Adding actions (launches, copies, capture, graphs, ...) ----
//
// In your area's test file, at namespace scope:
//
//   #include "thread_stress.hpp"
//   namespace stress = cudakit::testing::stress;
//   static const bool memory_actions = stress::add("memory", {
//       {"upload on the own stream, read on a shared one",
//        [](stress::Worker& w) { DeviceBuffer<int> b(w.own, 64); ... w.any_shared_stream() ... }},
//   });
//
// An action must leave nothing behind (the fake's ledger is checked at the end) and may
// count host callbacks it expects to run in Shared::callbacks_expected. Things one
// thread must own (a capture scope, one buffer being mutated) stay inside the action.
#pragma once

#include <atomic>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cudakit/device.hpp"
#include "cudakit/event.hpp"
#include "cudakit/stream.hpp"

namespace cudakit::testing::stress {

/// What every thread sees.
struct Shared {
  std::vector<Device> devices;
  std::vector<StreamRef> streams;  // shared streams, on every device
  std::vector<EventRef> events;    // shared events, recorded and waited by any thread
  std::atomic<int> callbacks_expected{0};
  std::atomic<int> callbacks_run{0};
  std::atomic<int> callbacks_thrown{0};  // each parks one error
};

/// One thread's own state.
struct Worker {
  int index = 0;
  Shared* shared = nullptr;
  Device device;      // the thread's device (threads alternate devices)
  StreamRef own;      // the thread's own stream, on `device`
  std::minstd_rand rng;

  StreamRef any_shared_stream() { return shared->streams[rng() % shared->streams.size()]; }
  EventRef any_shared_event() { return shared->events[rng() % shared->events.size()]; }
};

struct Action {
  std::string name;
  std::function<void(Worker&)> run;
};

/// Adds an area's actions. Returns true, for a namespace-scope static initializer.
bool add(const std::string& area, std::vector<Action> actions);
/// Every registered action, in registration order.
const std::vector<Action>& actions();

}  // namespace cudakit::testing::stress
