// Errors: messages, poisoned contexts and parked errors (issue 2, point 4).
#include <gtest/gtest.h>

#include "cudakit/device.hpp"
#include "cudakit/error.hpp"
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
