// The fault-injection sweep over the foundation's public operations. The rules
// and how to add an area's operations: fault_sweep.hpp. One line per operation; each runs
// from a fresh fake driver, with its inputs taken from the scene.
#include "fault_sweep.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <set>

#include "cudakit/cudakit.hpp"
#include "fake_fixture.hpp"

namespace cudakit {
namespace {

namespace sweep = testing::sweep;
using sweep::Scene;
using driver::EntryId;

// ---- devices and contexts ----
const bool device_ops = sweep::add("devices and contexts", {
    {"Device::count", [](Scene&) { (void)Device::count(); }},
    {"Device::get (first use of the device)", [](Scene&) { (void)Device::get(0); }},
    {"Device::all", [](Scene&) { (void)Device::all(); }},
    {"Device::name", [](Scene& s) { (void)s.device().name(); }},
    {"Device::uuid_string", [](Scene& s) { (void)s.device().uuid_string(); }},
    {"Device::pci_bus_id", [](Scene& s) { (void)s.device().pci_bus_id(); }},
    {"Device::attribute (first query)", [](Scene& s) { (void)s.device().max_threads_per_block(); }},
    {"Device::compute_capability", [](Scene& s) { (void)s.device().compute_capability(); }},
    {"Device::total_memory", [](Scene& s) { (void)s.device().total_memory(); }},
    {"Device::memory_info", [](Scene& s) { (void)s.device().memory_info(); }},
    {"Device::can_access_peer", [](Scene& s) { (void)s.device().can_access_peer(s.device()); }},
    {"Device::primary_context", [](Scene& s) { Context c = s.device().primary_context(); }},
    {"Context::primary(Device)", [](Scene& s) { Context c = Context::primary(s.device()); }},
    {"Context::primary(int)", [](Scene&) { Context c = Context::primary(0); }},
    {"Context::clone", [](Scene& s) { Context c = s.given<Context>("owner", [] { return Context::primary(0); }).clone(); }},
    {"ContextRef::make_current", [](Scene& s) { s.context().make_current(); }},
    {"ContextRef::synchronize", [](Scene& s) { s.context().synchronize(); }},
    {"ContextRef::stream_priority_range (first query)", [](Scene& s) { (void)s.context().stream_priority_range(); }},
});

// ---- streams ----
const bool stream_ops = sweep::add("streams", {
    {"Stream(Device) (first object on the device)", [](Scene& s) { Stream x(s.device()); }},
    {"Stream(Device) (later objects)", [](Scene& s) { s.stream(); Stream x(s.device()); }},
    {"Stream(Device, priority)", [](Scene& s) { Stream x(s.device(), -5); }},
    {"Stream(ContextRef, priority)", [](Scene& s) { Stream x(s.context(), -2); }},
    {"Stream::adopt", [](Scene& s) { (void)Stream::adopt(s.raw_stream(), 0).release(); }},
    {"StreamRef::query", [](Scene& s) { s.returned(s.stream().query()); }},
    {"StreamRef::synchronize", [](Scene& s) { s.stream().synchronize(); }},
    {"StreamRef::wait(EventRef)", [](Scene& s) { s.stream(1).wait(s.event()); }},
    {"StreamRef::wait(StreamRef) (empty event pool)", [](Scene& s) { s.stream(1).wait(s.stream(0)); }},
    {"StreamRef::wait(StreamRef) (pooled event)",
     [](Scene& s) { s.setup([&] { s.stream(1).wait(s.stream(0)); }); s.stream(1).wait(s.stream(0)); }},
    {"StreamRef::priority", [](Scene& s) { (void)s.stream().priority(); }},
    {"StreamRef::host_callback", [](Scene& s) { s.stream().host_callback([] {}); }},
    {"StreamRef::host_callback (a callable owning memory)",
     [](Scene& s) { s.stream().host_callback([p = std::make_unique<int>(7)] { (void)*p; }); }},
    {"Stream lifecycle (create, wait, callback, synchronize, destroy)", [](Scene& s) {
       Stream x(s.device());
       x.wait(s.stream());
       x.host_callback([] {});
       x.synchronize();
     }},
});

// ---- events ----
const bool event_ops = sweep::add("events", {
    {"Event(Device) (first object on the device)", [](Scene& s) { Event e(s.device()); }},
    {"Event(Device, timing) (later objects)", [](Scene& s) { s.stream(); Event e(s.device(), EventTiming::enabled); }},
    {"Event(ContextRef, timing, blocking)",
     [](Scene& s) { Event e(s.context(), EventTiming::enabled, EventWait::blocking); }},
    {"EventRef::record", [](Scene& s) { s.event().record(s.stream(1)); }},
    {"EventRef::query", [](Scene& s) { s.returned(s.event().query()); }},
    {"EventRef::synchronize", [](Scene& s) { s.event().synchronize(); }},
    {"elapsed_time", [](Scene& s) { (void)elapsed_time(s.timed_event(0), s.timed_event(1)); }},
    {"Event lifecycle (create, record, query, synchronize, destroy)", [](Scene& s) {
       Event e(s.device());
       e.record(s.stream());
       s.returned(e.query());
       e.synchronize();
     }},
});

// ---- the parameterized tests, one per registered operation ----

std::string test_name(const ::testing::TestParamInfo<std::size_t>& info) {
  std::string name;
  for (char c : sweep::operations()[info.param].name) {
    if (std::isalnum(static_cast<unsigned char>(c))) name += c;
    else if (!name.empty() && name.back() != '_') name += '_';
  }
  while (!name.empty() && name.back() == '_') name.pop_back();
  return name;
}

class FaultSweep : public ::testing::TestWithParam<std::size_t> {};

// One test per operation (a process each under ctest: few processes keep the sanitizer
// runs fast), three sweeps in it; each problem names its sweep and case.
TEST_P(FaultSweep, EndsCleanlyWhateverTheDriverAnswers) {
  const sweep::Operation& op = sweep::operations()[GetParam()];
  auto problems = sweep::sweep_faults(op);  // every call failing in turn
  EXPECT_TRUE(problems.empty()) << testing::join_lines(problems);
  problems = sweep::sweep_poisoned(op);  // on a device poisoned earlier
  EXPECT_TRUE(problems.empty()) << testing::join_lines(problems);
  problems = sweep::sweep_old_drivers(op);  // on drivers older than its entries
  EXPECT_TRUE(problems.empty()) << testing::join_lines(problems);
}

INSTANTIATE_TEST_SUITE_P(Call, FaultSweep, ::testing::Range<std::size_t>(0, sweep::operations().size()), test_name);

TEST(FaultSweepRegistry, NamesAreUnique) {
  std::set<std::string> seen;
  for (std::size_t i = 0; i < sweep::operations().size(); ++i)
    EXPECT_TRUE(seen.insert(test_name({i, i})).second) << "two operations named " << sweep::operations()[i].name;
}

// ---- the sweep finds what it is meant to find ----

bool mentions(const std::vector<std::string>& problems, const std::string& what) {
  for (const auto& p : problems)
    if (p.find(what) != std::string::npos) return true;
  return false;
}

TEST(FaultSweepSelfTest, FindsASwallowedError) {
  sweep::Operation op{"swallows", [](Scene& s) {
                        try {
                          s.stream().synchronize();
                        } catch (const Error&) {
                        }
                      }};
  auto problems = sweep::sweep_faults(op);
  EXPECT_TRUE(mentions(problems, "cuStreamSynchronize, failing with CUDA_ERROR_OUT_OF_MEMORY: the failure was swallowed"))
      << testing::join_lines(problems);
}

TEST(FaultSweepSelfTest, FindsAHandleLeakedOnTheErrorPath) {
  sweep::Operation op{"leaks on error", [](Scene& s) {
                        CUstream raw = Stream(s.device()).release();
                        StreamRef(raw, 0).synchronize();  // on failure, raw is never destroyed
                        Stream back = Stream::adopt(raw, 0);
                      }};
  auto problems = sweep::sweep_faults(op);
  EXPECT_TRUE(mentions(problems, "1 handle(s) live at the end ( 1 stream ) but 0 release(s) failed: a leak"))
      << testing::join_lines(problems);
}

TEST(FaultSweepSelfTest, FindsAnErrorNamingTheWrongCall) {
  sweep::Operation op{"renames", [](Scene& s) {
                        try {
                          s.stream().synchronize();
                        } catch (const DriverError& e) {
                          throw DriverError(e.code(), "cuSomethingElse", e.resource());
                        }
                      }};
  auto problems = sweep::sweep_faults(op);
  EXPECT_TRUE(mentions(problems, "names the call 'cuSomethingElse', not cuStreamSynchronize")) << testing::join_lines(problems);
}

TEST(FaultSweepSelfTest, FindsADriverCallOnAPoisonedDevice) {
  sweep::Operation op{"skips the poison check", [](Scene& s) {
                        unsigned flags = 0;
                        StreamRef st = s.stream();
                        check(driver::cu.StreamGetFlags(st.handle(), &flags), "cuStreamGetFlags",
                              Resource::of(ResourceKind::stream, st.handle(), 0));
                      }};
  auto problems = sweep::sweep_poisoned(op);
  EXPECT_TRUE(mentions(problems, "the driver saw calls on the poisoned device: cuStreamGetFlags")) << testing::join_lines(problems);
}

TEST(FaultSweepSelfTest, FindsAnOperationThatMisreportsAMissingEntry) {
  // An operation needing cuFuncGetParamInfo (CUDA 12.4) that, on an older driver,
  // blames the wrong entry.
  sweep::Operation op{"misreports", [](Scene&) {
                        if (!driver::has(EntryId::FuncGetParamInfo))
                          throw FeatureUnavailable("cuStreamQuery", 2000, driver::version(), "wrong entry");
                        (void)driver::cu.FuncGetParamInfo(nullptr, 0, nullptr, nullptr);
                      }};
  auto problems = sweep::sweep_old_drivers(op);
  EXPECT_TRUE(mentions(problems, "on a CUDA 12.3 driver: FeatureUnavailable names cuStreamQuery, which this driver has"))
      << testing::join_lines(problems);
}

TEST(FaultSweepSelfTest, EnumeratesTheCallsOfTheOperationNotOfItsInputs) {
  // The scene's inputs (a stream, a recorded event) are made outside the log.
  sweep::Operation wait{"wait", [](Scene& s) { s.stream(1).wait(s.event()); }};
  EXPECT_EQ(sweep::calls_of(wait), std::vector<EntryId>{EntryId::StreamWaitEvent});
  // What the operation creates itself is swept, its destructor included.
  sweep::Operation create{"create", [](Scene& s) { Event e(s.device()); }};
  EXPECT_EQ(sweep::calls_of(create), (std::vector<EntryId>{EntryId::DevicePrimaryCtxRetain, EntryId::CtxSetCurrent,
                                                           EntryId::EventCreate, EntryId::EventDestroy}));
}

}  // namespace
}  // namespace cudakit
