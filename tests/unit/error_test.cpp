// Errors: messages, poisoned contexts and parked errors.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <set>
#include <type_traits>
#include <vector>

#include "cudakit/blas_library.hpp"
#include "cudakit/device.hpp"
#include "cudakit/device_buffer.hpp"
#include "cudakit/error.hpp"
#include "cudakit/event.hpp"
#include "cudakit/ipc_error.hpp"
#include "cudakit/module.hpp"
#include "cudakit/nccl_error.hpp"
#include "cudakit/stream.hpp"
#include "fake_fixture.hpp"

namespace cudakit {
namespace {

using driver::EntryId;
using testing::message_of;

class ErrorTest : public testing::FakeDriverTest {};

TEST_F(ErrorTest, DriverErrorNamesCallResourceCodeAndDescription) {
  Device d = Device::get(0);
  (void)d.name();
  fake().fail(EntryId::StreamCreateWithPriority, 1, CUDA_ERROR_INVALID_VALUE);
  try {
    Stream s(d);
    FAIL();
  } catch (const DriverError& e) {
    EXPECT_EQ(e.code(), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(e.code_name(), "CUDA_ERROR_INVALID_VALUE");
    EXPECT_EQ(e.call(), "cuStreamCreateWithPriority");
    EXPECT_EQ(e.resource(), "device 0 (Fake GPU)");
    EXPECT_EQ(std::string(e.what()).rfind("cuStreamCreateWithPriority on device 0 (Fake GPU): CUDA_ERROR_INVALID_VALUE: ", 0), 0u)
        << e.what();
  }
}

TEST_F(ErrorTest, StickyErrorPoisonsTheDeviceAndLaterCallsCarryTheOriginal) {
  Device d = Device::get(0);
  Stream s(d);
  fake().fail(EntryId::StreamSynchronize, 1, CUDA_ERROR_ILLEGAL_ADDRESS);
  try {
    s.synchronize();
    FAIL();
  } catch (const ContextPoisoned&) {
    FAIL() << "the first error is the original, not a poisoned-context error";
  } catch (const DriverError& e) {
    EXPECT_EQ(e.code(), CUDA_ERROR_ILLEGAL_ADDRESS);
  }
  int calls_before = fake().calls(EntryId::StreamQuery);
  try {
    s.query();
    FAIL();
  } catch (const ContextPoisoned& e) {
    EXPECT_EQ(e.code(), CUDA_ERROR_ILLEGAL_ADDRESS);
    EXPECT_EQ(e.original().call(), "cuStreamSynchronize");
    std::string m = e.what();
    EXPECT_NE(m.find("poisoned"), std::string::npos) << m;
    EXPECT_NE(m.find("cuStreamSynchronize"), std::string::npos) << m;
  }
  EXPECT_EQ(fake().calls(EntryId::StreamQuery), calls_before) << "a poisoned call must fail before the driver";
  EXPECT_THROW(Stream{d}, ContextPoisoned);
  // The destructor neither throws nor hangs; its failure is parked, carrying the original.
  { Stream doomed(std::move(s)); }
  auto parked = drain_parked_errors();
  ASSERT_EQ(parked.size(), 1u);
  EXPECT_EQ(parked[0].origin, "~Stream");
  EXPECT_NE(parked[0].message.find("poisoned"), std::string::npos) << parked[0].message;
  fake().clear_sticky();
  fake().destroy_leftovers();
}

TEST_F(ErrorTest, NonStickyErrorLeavesTheDeviceUsable) {
  Device d = Device::get(0);
  Stream s(d);
  fake().fail(EntryId::StreamSynchronize, 1, CUDA_ERROR_INVALID_VALUE);
  EXPECT_THROW(s.synchronize(), DriverError);
  EXPECT_NO_THROW(s.synchronize());
}

TEST_F(ErrorTest, DestructorErrorsAreParkedWithOriginAndHandedToTheHandler) {
  std::vector<ParkedError> seen;
  auto previous = set_parked_error_handler([&](const ParkedError& e) { seen.push_back(e); });
  {
    Stream a(Device::get(0));
    Stream b(Device::get(0));
    fake().fail(EntryId::StreamDestroy, 0, CUDA_ERROR_INVALID_HANDLE);
  }
  fake().clear_faults();
  set_parked_error_handler(previous);
  ASSERT_EQ(seen.size(), 2u);
  auto parked = drain_parked_errors();
  ASSERT_EQ(parked.size(), 2u) << "never overwritten: both errors are kept";
  EXPECT_EQ(parked[0].origin, "~Stream");
  EXPECT_EQ(parked[0].code, CUDA_ERROR_INVALID_HANDLE);
  EXPECT_NE(parked[0].message.find("cuStreamDestroy on stream"), std::string::npos) << parked[0].message;
  EXPECT_EQ(parked_error_count(), 0u);
  // The fake still holds the two streams the failed destroys left behind.
  EXPECT_EQ(fake().live("stream"), 2u);
  fake().destroy_leftovers();
}

TEST_F(ErrorTest, HandlerThatThrowsDoesNotEscape) {
  auto previous = set_parked_error_handler([](const ParkedError&) { throw std::runtime_error("handler bug"); });
  EXPECT_NO_THROW(park_error({CUDA_SUCCESS, "test", "message"}));
  set_parked_error_handler(previous);
  EXPECT_EQ(drain_parked_errors().size(), 1u);
}

TEST_F(ErrorTest, OutOfMemoryMessageHasRequestedFreeAndTotal) {
  OutOfMemory e("cuMemAllocAsync", "device 0 (Fake GPU)", 3ull << 30, 1ull << 30, 16ull << 30);
  std::string m = e.what();
  EXPECT_EQ(e.requested(), 3ull << 30);
  EXPECT_NE(m.find("asked for 3.00 GiB"), std::string::npos) << m;
  EXPECT_NE(m.find("1.00 GiB"), std::string::npos) << m;
  EXPECT_NE(m.find("16.00 GiB"), std::string::npos) << m;
  EXPECT_NE(m.find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << m;
}

// ---- kinds ----

TEST(ErrorKindTest, EveryClassNamesItsOwnKindThroughTheBase) {
  auto original = std::make_shared<const DriverError>(CUDA_ERROR_ILLEGAL_ADDRESS, "cuStreamSynchronize", "");
  std::vector<std::pair<std::function<void()>, ErrorKind>> cases = {
      {[] { throw Error("a temporary file"); }, ErrorKind::other},
      {[] { throw DriverError(CUDA_ERROR_INVALID_VALUE, "cuStreamQuery", ""); }, ErrorKind::driver},
      {[] { throw OutOfMemory("cuMemAllocAsync", "device 0", 1, 2, 3); }, ErrorKind::out_of_memory},
      {[&] { throw ContextPoisoned(original, "cuStreamQuery", ""); }, ErrorKind::context_poisoned},
      {[] { throw ModuleLoadError(CUDA_ERROR_INVALID_PTX, "cuModuleLoadDataEx", "", "m", "log"); }, ErrorKind::module_load},
      {[] { throw DriverUnavailable(DriverUnavailable::Reason::no_device, "m"); }, ErrorKind::driver_unavailable},
      {[] { throw FeatureUnavailable("cuFuncGetParamInfo", 12040, 12000, "m"); }, ErrorKind::feature_unavailable},
      {[] { throw InvalidArgument("m"); }, ErrorKind::invalid_argument},
      {[] { throw EmptyHandle("m"); }, ErrorKind::empty_handle},
      {[] { throw CaptureError("m"); }, ErrorKind::capture},
      {[] { throw EmptyCapture("m"); }, ErrorKind::empty_capture},
      {[] { throw GraphInstantiateError("m", CUDA_ERROR_INVALID_VALUE, CUDA_GRAPH_INSTANTIATE_ERROR, nullptr); },
       ErrorKind::graph_instantiate},
      {[] { throw GraphUpdateError("m", CU_GRAPH_EXEC_UPDATE_ERROR, nullptr, nullptr); }, ErrorKind::graph_update},
      {[] { throw CompilerUnavailable("m"); }, ErrorKind::compiler_unavailable},
      {[] { throw CompileError("m", "log"); }, ErrorKind::compile},
      {[] { throw BlasError(CUBLAS_STATUS_NOT_SUPPORTED, "cublasGemmEx", "gemm", ""); }, ErrorKind::blas},
      {[] { throw HandleInUse("m"); }, ErrorKind::handle_in_use},
      {[] { throw nccl::NcclError(2, "ncclAllReduce", 0, 2, 0, "", "m"); }, ErrorKind::nccl},
      {[] { throw nccl::NcclTimeout(7, "ncclAllReduce", 0, 2, 0, "", "m"); }, ErrorKind::nccl_timeout},
      {[] { throw nccl::NcclUnavailable("m"); }, ErrorKind::nccl_unavailable},
      {[] { throw nccl::BootstrapError("m", {1}); }, ErrorKind::bootstrap},
      {[] { throw IpcError(IpcFailure::stale, "m"); }, ErrorKind::ipc},
  };
  std::set<ErrorKind> seen;
  for (const auto& [raise, expected] : cases) {
    try {
      raise();
      ADD_FAILURE() << "nothing thrown for " << error_kind_name(expected);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), expected) << error_kind_name(e.kind()) << " instead of " << error_kind_name(expected);
    }
    EXPECT_TRUE(seen.insert(expected).second) << "two classes of kind " << error_kind_name(expected);
  }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(ErrorKind::ipc) + 1) << "every kind has its class";
}

TEST(ErrorKindTest, NamesAreTheEnumeratorsNames) {
  EXPECT_STREQ(error_kind_name(ErrorKind::out_of_memory), "out_of_memory");
  EXPECT_STREQ(error_kind_name(ErrorKind::empty_handle), "empty_handle");
  EXPECT_STREQ(error_kind_name(ErrorKind::nccl_timeout), "nccl_timeout");
  EXPECT_STREQ(error_kind_name(static_cast<ErrorKind>(200)), "unknown");
}

TEST_F(ErrorTest, AFailedAllocationIsOutOfMemoryByKindWithoutACast) {
  Stream s(Device::get(0));
  fake().fail(EntryId::MemAllocAsync, 0, CUDA_ERROR_OUT_OF_MEMORY);
  try {
    DeviceBuffer<float> b(s, 1024, uninitialized);
    FAIL() << "the allocation succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::out_of_memory) << error_kind_name(e.kind()) << ": " << e.what();
  }
  fake().clear_faults();
}

// ---- poisoned contexts (DESIGN 7) ----

class PoisonTest : public testing::FakeDriverTest {
  void configure(fake::Driver& d) override { d.devices.resize(2); }

 protected:
  static constexpr CUresult sticky_code = CUDA_ERROR_ILLEGAL_ADDRESS;
  // Poisons `s`'s device: its synchronize meets a sticky error (and the fake, like a real
  // driver, fails every call from then on).
  void poison(StreamRef s) {
    fake().fail(EntryId::StreamSynchronize, 0, sticky_code);
    EXPECT_THROW(s.synchronize(), DriverError);
    fake().clear_faults();
  }
  // Calls the driver saw, leaving out cuGetErrorName/String (how errors are worded).
  std::size_t driver_calls() {
    std::size_t n = 0;
    for (EntryId e : fake().log()) n += e != EntryId::GetErrorName && e != EntryId::GetErrorString;
    return n;
  }
  // Runs `fn`, which must throw ContextPoisoned carrying the original error without
  // the driver seeing a call.
  void expect_poisoned(const char* what, const std::function<void()>& fn) {
    std::size_t before = driver_calls();
    try {
      fn();
      ADD_FAILURE() << what << ": threw nothing";
    } catch (const ContextPoisoned& e) {
      EXPECT_EQ(e.code(), sticky_code) << what;
      EXPECT_EQ(e.original().call(), "cuStreamSynchronize") << what;
      EXPECT_NE(std::string(e.what()).find("poisoned"), std::string::npos) << what << ": " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": threw something else: " << e.what();
    }
    EXPECT_EQ(driver_calls(), before) << what << ": the driver was called on a poisoned device";
  }
};

TEST_F(PoisonTest, EveryContextCallFailsBeforeTheDriverCarryingTheOriginal) {
  Device d = Device::get(0);
  {
    Stream s(d), other(d);
    Event e(d), t0(d, EventTiming::enabled), t1(d, EventTiming::enabled);
    e.record(s);
    t0.record(s);
    t1.record(s);
    Context c = Context::primary(d);
    CUstream raw = Stream(d).release();
    poison(s);

    expect_poisoned("Stream(Device)", [&] { Stream x(d); });
    expect_poisoned("Stream(ContextRef, priority)", [&] { Stream x(c.ref(), -1); });
    expect_poisoned("Stream::adopt", [&] { (void)Stream::adopt(raw, 0).release(); });
    expect_poisoned("StreamRef::query", [&] { (void)s.query(); });
    expect_poisoned("StreamRef::synchronize", [&] { s.synchronize(); });
    expect_poisoned("StreamRef::wait(EventRef)", [&] { other.wait(e); });
    expect_poisoned("StreamRef::wait(StreamRef)", [&] { other.wait(s); });
    expect_poisoned("StreamRef::priority", [&] { (void)s.priority(); });
    expect_poisoned("StreamRef::host_callback", [&] { s.host_callback([] {}); });
    expect_poisoned("Event(Device)", [&] { Event x(d); });
    expect_poisoned("Event(ContextRef)", [&] { Event x(c.ref(), EventTiming::enabled); });
    expect_poisoned("EventRef::record", [&] { e.record(other); });
    expect_poisoned("EventRef::query", [&] { (void)e.query(); });
    expect_poisoned("EventRef::synchronize", [&] { e.synchronize(); });
    expect_poisoned("elapsed_time", [&] { (void)elapsed_time(t0, t1); });
    expect_poisoned("Context::primary", [&] { Context x = Context::primary(d); });
    expect_poisoned("Context::clone", [&] { Context x = c.clone(); });
    expect_poisoned("Context::synchronize", [&] { c.synchronize(); });
    expect_poisoned("ContextRef::stream_priority_range (cached)", [&] { (void)c.ref().stream_priority_range(); });
    forget_cached_current_context();
    expect_poisoned("ContextRef::make_current (not current)", [&] { c.make_current(); });
    expect_poisoned("Device::primary_context", [&] { Context x = d.primary_context(); });
    expect_poisoned("Device::memory_info", [&] { (void)d.memory_info(); });

    fake().clear_sticky();  // so the objects' destructors release them
    driver::cu.StreamDestroy(raw);
  }
  EXPECT_EQ(parked_error_count(), 0u);
}

TEST_F(PoisonTest, DeviceQueriesAreNotContextCallsAndCachedAnswersStillCome) {
  Device d = Device::get(0);
  const std::string name = d.name();
  const int sms = d.multiprocessor_count();
  Stream s(d);
  poison(s);
  std::size_t before = driver_calls();
  EXPECT_EQ(d.name(), name);
  EXPECT_EQ(d.multiprocessor_count(), sms);
  EXPECT_EQ(driver_calls(), before);
  fake().clear_sticky();
}

TEST_F(PoisonTest, PoisonIsPerDeviceAndOutlivesTheDriversAnswers) {
  Device d0 = Device::get(0), d1 = Device::get(1);
  Stream s0(d0);
  poison(s0);
  fake().clear_sticky();  // the driver answers again; the library still knows
  expect_poisoned("Stream(Device 0)", [&] { Stream x(d0); });
  Stream s1(d1);
  Event e1(d1);
  e1.record(s1);
  s1.wait(e1);
  EXPECT_NO_THROW(s1.synchronize());
  EXPECT_EQ(detail::poison_of(1), nullptr);
}

TEST_F(PoisonTest, StickyErrorInADestructorPoisonsTheDevice) {
  expect_parked_errors();
  Device d = Device::get(0);
  fake().fail(EntryId::StreamDestroy, 1, CUDA_ERROR_LAUNCH_FAILED);
  { Stream doomed(d); }
  auto parked = drain_parked_errors();
  ASSERT_EQ(parked.size(), 1u);
  EXPECT_EQ(parked[0].origin, "~Stream");
  EXPECT_EQ(parked[0].code, CUDA_ERROR_LAUNCH_FAILED);
  try {
    Stream s(d);
    FAIL() << "threw nothing";
  } catch (const ContextPoisoned& e) {
    EXPECT_EQ(e.code(), CUDA_ERROR_LAUNCH_FAILED);
    EXPECT_EQ(e.original().call(), "cuStreamDestroy");
  }
  fake().clear_sticky();
  fake().clear_faults();
  fake().destroy_leftovers();
}

TEST_F(PoisonTest, ALaterStickyErrorDoesNotReplaceTheFirst) {
  expect_parked_errors();
  Device d = Device::get(0);
  Stream s(d);
  auto later = std::make_unique<Stream>(d);
  poison(s);
  fake().clear_sticky();
  fake().fail(EntryId::StreamDestroy, 1, CUDA_ERROR_LAUNCH_FAILED);  // another sticky code, later
  CUstream refused = later->handle();
  later.reset();
  auto parked = drain_parked_errors();
  ASSERT_EQ(parked.size(), 1u);
  EXPECT_EQ(parked[0].code, CUDA_ERROR_LAUNCH_FAILED);
  EXPECT_NE(parked[0].message.find("poisoned"), std::string::npos) << parked[0].message;
  fake().clear_sticky();
  fake().clear_faults();
  expect_poisoned("Stream(Device)", [&] { Stream x(d); });
  driver::cu.StreamDestroy(refused);
}

static_assert(std::is_nothrow_destructible_v<Stream> && std::is_nothrow_destructible_v<Event> &&
              std::is_nothrow_destructible_v<Context>);

TEST_F(PoisonTest, DestructorsOnAPoisonedDeviceNeitherThrowNorHangAndParkTheOriginal) {
  expect_parked_errors();
  Device d = Device::get(0);
  {
    Stream s(d), other(d);
    other.wait(s);  // an event in the pool
    Event e(d);
    Context c = Context::primary(d);
    poison(s);
    // Leaving the scope destroys them while the driver fails every call.
  }
  cudakit::testing::reset_library_state();  // the pooled event and the library's retain
  auto parked = drain_parked_errors();
  std::multiset<std::string> origins;
  for (const auto& p : parked) {
    origins.insert(p.origin);
    EXPECT_EQ(p.code, sticky_code) << p.message;
    EXPECT_NE(p.message.find("poisoned"), std::string::npos) << p.message;
    EXPECT_NE(p.message.find("cuStreamSynchronize"), std::string::npos) << "carries the original: " << p.message;
  }
  EXPECT_EQ(origins, (std::multiset<std::string>{"~Stream", "~Stream", "~Event", "~Context", "event pool", "reset"}));
  // The driver refused those releases; clean the fake for the ledger check.
  fake().clear_sticky();
  fake().destroy_leftovers();
  fake().primary_retains[0] = 0;
}

// DESIGN 1 holds on a dead context too: a pool buffer whose streams are all gone, freed
// when no service stream can be made any more, makes no call on stream handle 0. The
// memory goes with the context; the sticky error is what is reported.
TEST_F(PoisonTest, APoolFreeOnADeadContextWithNoLiveStreamMakesNoCallOnStreamZero) {
  expect_parked_errors();
  ignore_hazards();  // the cleanup below frees the kept memory by hand
  Device d = Device::get(0);
  std::unique_ptr<DeviceBuffer<float>> b;
  {
    Stream s(d);
    b = std::make_unique<DeviceBuffer<float>>(s, 64, uninitialized);
    poison(s);
  }
  int frees = fake().calls(EntryId::MemFreeAsync);
  b.reset();
  EXPECT_EQ(fake().calls(EntryId::MemFreeAsync), frees) << "a pool free was submitted with no stream";
  bool reported = false;
  for (const auto& p : drain_parked_errors())
    reported = reported || (p.origin == "buffer free" && p.message.find("cuMemFree ") != std::string::npos);
  EXPECT_TRUE(reported);
  cudakit::testing::reset_library_state();
  drain_parked_errors();
  fake().clear_sticky();
  fake().destroy_leftovers();
  fake().primary_retains[0] = 0;
  std::vector<CUdeviceptr> kept;  // the buffer's memory, gone with the context on a real driver
  for (const auto& [base, a] : fake().allocations) kept.push_back(static_cast<CUdeviceptr>(base));
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(driver::cu.MemFree(kept[0]), CUDA_SUCCESS);
}

TEST_F(PoisonTest, HostCallbackOnAPoisonedStreamIsRefusedAndItsCallableFreed) {
  Stream s(Device::get(0));
  poison(s);
  auto token = std::make_shared<int>(1);
  int calls = fake().calls(EntryId::LaunchHostFunc);
  expect_poisoned("host_callback", [&] { s.host_callback([token] {}); });
  EXPECT_EQ(token.use_count(), 1) << "the callable was freed";
  EXPECT_EQ(fake().calls(EntryId::LaunchHostFunc), calls);
  fake().clear_sticky();
}

TEST(ErrorNames, KnownWithoutADriverAndStickyCodesMatchCudaH) {
  EXPECT_EQ(error_name(CUDA_ERROR_STUB_LIBRARY), "CUDA_ERROR_STUB_LIBRARY");
  EXPECT_EQ(error_name(static_cast<CUresult>(123456)), "CUDA error 123456");
  EXPECT_TRUE(is_sticky(CUDA_ERROR_ILLEGAL_ADDRESS));
  EXPECT_TRUE(is_sticky(CUDA_ERROR_LAUNCH_FAILED));
  EXPECT_FALSE(is_sticky(CUDA_ERROR_OUT_OF_MEMORY));
  EXPECT_FALSE(is_sticky(CUDA_ERROR_NOT_READY));
}

}  // namespace
}  // namespace cudakit
