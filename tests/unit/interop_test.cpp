// Interop with cudaStream_t and libcu++'s cuda::stream_ref.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include "cudakit/interop/cccl.hpp"
#include "fake_fixture.hpp"

namespace cudakit {
namespace {

static_assert(std::is_same_v<cudaStream_t, CUstream>, "the runtime's stream type is the driver's");

class InteropTest : public testing::FakeDriverTest {};

TEST_F(InteropTest, RuntimeStreamIsTheSameHandle) {
  Stream s(Device::get(0));
  cudaStream_t rt = runtime_stream(s);
  EXPECT_EQ(rt, s.handle());
  EXPECT_THROW(runtime_stream(StreamRef{}), EmptyHandle);
}

TEST_F(InteropTest, CcclStreamRefRoundTrips) {
  Stream s(Device::get(0));
  cuda::stream_ref ref = to_cccl(s);
  EXPECT_EQ(reinterpret_cast<CUstream>(ref.get()), s.handle());
  StreamRef back = from_cccl(ref, 0);
  EXPECT_EQ(back.handle(), s.handle());
  EXPECT_NO_THROW(back.synchronize());
}

TEST_F(InteropTest, LegacyStreamsAreRefused) {
  EXPECT_THROW(borrow_runtime_stream(nullptr, 0), InvalidArgument);
  EXPECT_THROW(borrow_runtime_stream(CU_STREAM_LEGACY, 0), InvalidArgument);
  EXPECT_THROW(borrow_runtime_stream(CU_STREAM_PER_THREAD, 0), InvalidArgument);
}

}  // namespace
}  // namespace cudakit
