// The foundation's benchmarks: streams and events, each cudakit against the
// raw driver. All four are CPU submission costs (the steady clock around a batch), since
// what cudakit adds is CPU work around the driver call; the GPU does the same either way.
//
// Target: cudakit costs at most 5% more than the raw call (DESIGN 1, "zero overhead").
// Each side uses its own objects: cudakit's created through cudakit, the raw side's with
// raw calls, so neither side reuses state the other warmed.
#include <string>
#include <vector>

#include "bench/harness.hpp"
#include "cudakit/cudakit.hpp"

namespace cudakit::tool::bench {
namespace {

using driver::EntryId;

constexpr double cost_target = 1.05;

// Drains the streams after each batch, untimed, so every batch starts with idle
// streams and the driver's queues do not grow across the run.
std::function<void()> drain(std::vector<CUstream> streams) {
  auto synchronize = raw_entry<EntryId::StreamSynchronize>();
  return [synchronize, streams] {
    for (CUstream s : streams) check_raw(synchronize(s), "cuStreamSynchronize");
  };
}

// Stream(device) against cuStreamCreateWithPriority(NON_BLOCKING) + cuStreamDestroy.
// cudakit's path adds the library's primary-context lookup and the cached priority
// range check (DESIGN 4).
std::vector<Result> stream_create_destroy(const Context& c) {
  RawPrimaryContext raw_context(c.device);
  const auto create = raw_entry<EntryId::StreamCreateWithPriority>();
  const auto destroy = raw_entry<EntryId::StreamDestroy>();
  const Device device = c.device;
  auto samples = time_host(
      c.interleave(1000),
      [&](int ops) {
        for (int i = 0; i < ops; ++i) Stream stream(device);
      },
      [&](int ops) {
        for (int i = 0; i < ops; ++i) {
          CUstream stream = nullptr;
          check_raw(create(&stream, CU_STREAM_NON_BLOCKING, 0), "cuStreamCreateWithPriority");
          check_raw(destroy(stream), "cuStreamDestroy");
        }
      });
  return {cost_result("stream create+destroy", "streams", samples, cost_target)};
}

// EventRef::record against cuEventRecord.
std::vector<Result> event_record(const Context& c) {
  RawPrimaryContext raw_context(c.device);
  Stream stream(c.device);
  Event event(c.device);
  RawStream raw_stream;
  RawEvent raw_event;
  const auto record = raw_entry<EntryId::EventRecord>();
  const EventRef event_ref = event;
  const StreamRef stream_ref = stream;
  Interleave plan = c.interleave(10000);
  plan.between_batches = drain({stream.handle(), raw_stream.handle()});
  auto samples = time_host(
      plan,
      [&](int ops) {
        for (int i = 0; i < ops; ++i) event_ref.record(stream_ref);
      },
      [&](int ops) {
        for (int i = 0; i < ops; ++i) check_raw(record(raw_event.handle(), raw_stream.handle()), "cuEventRecord");
      });
  return {cost_result("event record", "events", samples, cost_target)};
}

// b.wait(a) for streams a and b (a pooled event recorded on a, waited on b) against
// cuEventRecord + cuStreamWaitEvent with an event the application created up front.
std::vector<Result> record_and_cross_stream_wait(const Context& c) {
  RawPrimaryContext raw_context(c.device);
  Stream a(c.device), b(c.device);
  RawStream raw_a, raw_b;
  RawEvent raw_event;
  const auto record = raw_entry<EntryId::EventRecord>();
  const auto wait = raw_entry<EntryId::StreamWaitEvent>();
  const StreamRef a_ref = a, b_ref = b;
  Interleave plan = c.interleave(5000);
  plan.between_batches = drain({a.handle(), b.handle(), raw_a.handle(), raw_b.handle()});
  auto samples = time_host(
      plan,
      [&](int ops) {
        for (int i = 0; i < ops; ++i) b_ref.wait(a_ref);
      },
      [&](int ops) {
        for (int i = 0; i < ops; ++i) {
          check_raw(record(raw_event.handle(), raw_a.handle()), "cuEventRecord");
          check_raw(wait(raw_b.handle(), raw_event.handle(), 0), "cuStreamWaitEvent");
        }
      });
  return {cost_result("event record + cross-stream wait", "events", samples, cost_target)};
}

// EventRef::query on a completed event (true) against cuEventQuery (CUDA_SUCCESS).
std::vector<Result> completed_event_query(const Context& c) {
  RawPrimaryContext raw_context(c.device);
  Stream stream(c.device);
  Event event(c.device);
  RawStream raw_stream;
  RawEvent raw_event;
  const auto record = raw_entry<EntryId::EventRecord>();
  const auto synchronize = raw_entry<EntryId::EventSynchronize>();
  const auto query = raw_entry<EntryId::EventQuery>();
  event.record(stream);
  event.synchronize();
  check_raw(record(raw_event.handle(), raw_stream.handle()), "cuEventRecord");
  check_raw(synchronize(raw_event.handle()), "cuEventSynchronize");
  const EventRef event_ref = event;
  auto samples = time_host(
      c.interleave(10000),
      [&](int ops) {
        for (int i = 0; i < ops; ++i)
          if (!event_ref.query()) throw Error("a completed event reports not ready");
      },
      [&](int ops) {
        // Anything but CUDA_SUCCESS is wrong here, CUDA_ERROR_NOT_READY included: the
        // event completed before the loop.
        for (int i = 0; i < ops; ++i) check_raw(query(raw_event.handle()), "cuEventQuery");
      });
  return {cost_result("event query (completed)", "events", samples, cost_target)};
}

CUDAKIT_BENCHMARK("stream create+destroy", "streams", QuickRun::include, stream_create_destroy);
CUDAKIT_BENCHMARK("event record", "events", QuickRun::include, event_record);
CUDAKIT_BENCHMARK("event record + cross-stream wait", "events", QuickRun::include, record_and_cross_stream_wait);
CUDAKIT_BENCHMARK("event query (completed)", "events", QuickRun::include, completed_event_query);

}  // namespace
}  // namespace cudakit::tool::bench
