// The doctor's foundation checks: context, streams, events, host callback.
#include <atomic>
#include <string>

#include "command.hpp"
#include "cudakit/cudakit.hpp"

namespace cudakit::tool {
namespace {

CUDAKIT_DOCTOR_CHECK("context", 10, true, [](const Device* d) -> std::string {
  Context c = d->primary_context();
  c.make_current();
  c.synchronize();
  auto mem = d->memory_info();
  if (mem.total_bytes == 0 || mem.free_bytes > mem.total_bytes) return "implausible memory info";
  return {};
});

CUDAKIT_DOCTOR_CHECK("streams", 20, true, [](const Device* d) -> std::string {
  Context c = d->primary_context();
  auto [least, greatest] = c.ref().stream_priority_range();
  Stream low(*d, least), high(*d, greatest);
  if (high.priority() != greatest) return "priority not kept";
  high.wait(low);
  low.synchronize();
  high.synchronize();
  if (!low.query() || !high.query()) return "an idle stream reports pending work";
  return {};
});

CUDAKIT_DOCTOR_CHECK("events", 30, true, [](const Device* d) -> std::string {
  Stream s(*d);
  Event a(*d, EventTiming::enabled), b(*d, EventTiming::enabled);
  a.record(s);
  b.record(s);
  b.synchronize();
  if (!a.query() || !b.query()) return "a completed event reports not ready";
  float ms = elapsed_time(a, b).count();
  if (ms < 0 || ms > 1000) return "implausible elapsed time " + std::to_string(ms) + " ms";
  return {};
});

CUDAKIT_DOCTOR_CHECK("host callback", 40, true, [](const Device* d) -> std::string {
  Stream s(*d);
  std::atomic<int> hits{0};
  s.host_callback([&] { hits += 1; });
  s.host_callback([] { throw std::runtime_error("planted by cudakit doctor"); });
  s.host_callback([&] { hits += 2; });
  s.synchronize();
  if (hits != 3) return "callbacks ran " + std::to_string(hits.load()) + " instead of 3";
  auto parked = drain_parked_errors();
  if (parked.size() != 1 || parked[0].message.find("planted by cudakit doctor") == std::string::npos)
    return "the callback's exception was not parked";
  return {};
});

}  // namespace
}  // namespace cudakit::tool
