// Thread stress on the fake driver: see thread_stress.hpp. Run under TSan by
// the tsan preset (`make test` runs it).
#include "thread_stress.hpp"

#include <gtest/gtest.h>

#include <latch>
#include <memory>
#include <thread>

#include "cudakit/cudakit.hpp"
#include "fake_fixture.hpp"

namespace cudakit::testing::stress {

namespace {
std::vector<Action>& registry() {
  static std::vector<Action> all;
  return all;
}
}  // namespace

bool add(const std::string& area, std::vector<Action> actions) {
  (void)area;
  for (auto& a : actions) registry().push_back(std::move(a));
  return true;
}

const std::vector<Action>& actions() { return registry(); }

}  // namespace cudakit::testing::stress

namespace cudakit {
namespace {

namespace stress = testing::stress;
using stress::Worker;
using driver::EntryId;

// ---- the foundation's actions: streams, events, host callbacks, devices, contexts ----
const bool foundation_actions = stress::add("foundation", {
    {"create and destroy a stream with a priority",
     [](Worker& w) { Stream s(w.device, -static_cast<int>(w.rng() % 6)); }},
    {"record a new event on the own stream, a shared stream waits for it",
     [](Worker& w) {
       Event e(w.device);
       e.record(w.own);
       w.any_shared_stream().wait(e);
     }},
    {"record a shared event on the own stream, the own stream waits for another shared event",
     [](Worker& w) {
       w.any_shared_event().record(w.own);
       w.own.wait(w.any_shared_event());
     }},
    {"a shared stream waits for the own stream (a pooled event)", [](Worker& w) { w.any_shared_stream().wait(w.own); }},
    {"the own stream waits for a shared stream (a pooled event)", [](Worker& w) { w.own.wait(w.any_shared_stream()); }},
    {"two shared streams wait for each other", [](Worker& w) {
       StreamRef a = w.any_shared_stream(), b = w.any_shared_stream();
       a.wait(b);
       b.wait(a);
     }},
    {"host callback on a shared stream", [](Worker& w) {
       stress::Shared* shared = w.shared;
       shared->callbacks_expected.fetch_add(1);
       w.any_shared_stream().host_callback([shared] { shared->callbacks_run.fetch_add(1); });
     }},
    {"host callback that throws, on the own stream", [](Worker& w) {
       w.shared->callbacks_thrown.fetch_add(1);
       w.own.host_callback([] { throw std::runtime_error("planted by the thread stress test"); });
     }},
    {"synchronize the own stream, query a shared one", [](Worker& w) {
       w.own.synchronize();
       (void)w.any_shared_stream().query();
     }},
    {"query and synchronize a shared event", [](Worker& w) {
       EventRef e = w.any_shared_event();
       (void)e.query();
       e.synchronize();
     }},
    {"time the own stream with two timing events", [](Worker& w) {
       Event a(w.device, EventTiming::enabled), b(w.device, EventTiming::enabled);
       a.record(w.own);
       b.record(w.own);
       b.synchronize();
       (void)elapsed_time(a, b);
     }},
    {"device and context queries", [](Worker& w) {
       (void)w.device.name();
       (void)w.device.max_threads_per_block();
       (void)w.device.memory_info();
       Context c = Context::primary(w.device);
       Context d = c.clone();
       (void)d.ref().stream_priority_range();
     }},
    {"a new stream on a shared stream's heels", [](Worker& w) {
       Stream s(w.device);
       s.wait(w.any_shared_stream());
       s.host_callback([] {});
       s.synchronize();
     }},
    // Launches, copies, capture and graphs: their areas add actions here, through
    // stress::add in their own test files (thread_stress.hpp).
});

constexpr int thread_count = 16;
constexpr int iterations = 120;

class ThreadStress : public testing::FakeDriverTest {
  void configure(fake::Driver& d) override { d.devices.resize(2); }
};

// The common case: a process with shared streams and events, and 16 threads each with
// its own stream, doing everything the headers allow from any thread.
TEST_F(ThreadStress, SixteenThreadsCreateRecordWaitCallBackAndSynchronizeOnSharedAndOwnStreams) {
  expect_parked_errors();
  stress::Shared shared;
  shared.devices = Device::all();
  std::vector<Stream> streams;
  std::vector<Event> events;
  for (const Device& d : shared.devices)
    for (int i = 0; i < 2; ++i) {
      streams.emplace_back(d);
      events.emplace_back(d);
      events.back().record(streams.back());
    }
  for (auto& s : streams) shared.streams.push_back(s);
  for (auto& e : events) shared.events.push_back(e);

  const auto& actions = stress::actions();
  ASSERT_FALSE(actions.empty());
  std::vector<std::string> failures(thread_count);
  std::latch start(thread_count);
  std::vector<std::thread> threads;
  for (int t = 0; t < thread_count; ++t) {
    threads.emplace_back([&, t] {
      try {
        Worker w{t, &shared, shared.devices[static_cast<std::size_t>(t) % shared.devices.size()], StreamRef{},
                 std::minstd_rand(static_cast<unsigned>(t + 1))};
        Stream own(w.device);
        w.own = own;
        start.arrive_and_wait();
        for (int i = 0; i < iterations; ++i) {
          const auto& action = actions[static_cast<std::size_t>(t * 5 + i) % actions.size()];
          try {
            action.run(w);
          } catch (const std::exception& e) {
            failures[static_cast<std::size_t>(t)] = action.name + ": " + e.what();
            return;
          }
        }
        own.synchronize();
      } catch (const std::exception& e) {
        failures[static_cast<std::size_t>(t)] = std::string("setup: ") + e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < thread_count; ++t) EXPECT_EQ(failures[static_cast<std::size_t>(t)], "") << "thread " << t;
  EXPECT_EQ(shared.callbacks_run.load(), shared.callbacks_expected.load());
  auto parked = drain_parked_errors();
  EXPECT_EQ(parked.size(), static_cast<std::size_t>(shared.callbacks_thrown.load()));
  for (const auto& p : parked) EXPECT_EQ(p.origin, "host callback") << p.message;
  // The library retains each primary context once, whatever the threads did.
  EXPECT_EQ(fake().primary_retains[0], 1);
  EXPECT_EQ(fake().primary_retains[1], 1);
}

// Sixteen threads make the first objects on both devices at the same moment: the device
// table, the library's context retain and the priority cache are made once, race-free.
TEST_F(ThreadStress, ColdStartFromSixteenThreadsRetainsEachContextOnce) {
  std::latch start(thread_count);
  std::vector<std::string> failures(thread_count);
  std::vector<std::thread> threads;
  for (int t = 0; t < thread_count; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      try {
        Device d = Device::get(t % 2);
        Stream s(d, -(t % 6));
        Event e(d);
        e.record(s);
        Stream other(d);
        other.wait(s);
        other.wait(e);
        s.synchronize();
        if (s.priority() != -(t % 6)) failures[static_cast<std::size_t>(t)] = "priority not kept";
      } catch (const std::exception& e) {
        failures[static_cast<std::size_t>(t)] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < thread_count; ++t) EXPECT_EQ(failures[static_cast<std::size_t>(t)], "") << "thread " << t;
  EXPECT_EQ(fake().primary_retains[0], 1);
  EXPECT_EQ(fake().primary_retains[1], 1);
}

// A sticky error met by one thread reaches every thread working on that device as one
// original error; destructors on every thread park instead of throwing or hanging.
TEST_F(ThreadStress, StickyErrorOnOneThreadReachesEveryThreadAsOneOriginal) {
  expect_parked_errors();
  Device d = Device::get(0);
  struct Seen {
    CUresult code = CUDA_SUCCESS;
    const DriverError* original = nullptr;  // for ContextPoisoned
    std::string what;
  };
  std::vector<Seen> seen(thread_count);
  std::latch start(thread_count + 1);
  std::vector<std::thread> threads;
  for (int t = 0; t < thread_count; ++t) {
    threads.emplace_back([&, t] {
      auto& mine = seen[static_cast<std::size_t>(t)];
      try {
        Stream own(d);
        Event e(d);
        start.arrive_and_wait();
        for (long i = 0; i < 1'000'000; ++i) {  // until the error arrives
          e.record(own);
          own.wait(e);
          own.host_callback([] {});
          (void)own.query();
        }
        mine.what = "no error reached this thread";
      } catch (const ContextPoisoned& e) {
        mine.code = e.code();
        mine.original = &e.original();
        mine.what = e.what();
      } catch (const DriverError& e) {
        mine.code = e.code();
        mine.what = e.what();
      } catch (const std::exception& e) {
        mine.what = std::string("not a driver error: ") + e.what();
      }
    });
  }
  start.arrive_and_wait();
  fake().fail(EntryId::EventRecord, 0, CUDA_ERROR_ILLEGAL_ADDRESS);
  for (auto& th : threads) th.join();

  auto poison = detail::poison_of(0);
  ASSERT_NE(poison, nullptr);
  EXPECT_EQ(poison->code(), CUDA_ERROR_ILLEGAL_ADDRESS);
  for (int t = 0; t < thread_count; ++t) {
    const auto& s = seen[static_cast<std::size_t>(t)];
    EXPECT_EQ(s.code, CUDA_ERROR_ILLEGAL_ADDRESS) << "thread " << t << ": " << s.what;
    if (s.original != nullptr) EXPECT_EQ(s.original, poison.get()) << "thread " << t << ": one original for all";
  }
  // Every thread's destructors ran on the poisoned device and parked.
  auto parked = drain_parked_errors();
  EXPECT_GE(parked.size(), static_cast<std::size_t>(thread_count));
  for (const auto& p : parked) EXPECT_NE(p.message.find("poisoned"), std::string::npos) << p.origin << ": " << p.message;
  fake().clear_faults();
  fake().clear_sticky();
  fake().destroy_leftovers();
}

}  // namespace
}  // namespace cudakit
