// Memory resources on the GPU (memory_resource.hpp, pool_resource.hpp,
// interop/cccl_memory_resource.hpp): buffers from cudakit's PoolResource and from a CCCL
// resource of the test's own (cudaMallocAsync underneath), CCCL code allocating from
// cudakit's pool, the pool's statistics, and out of memory with the pool's reserve named.
// Fresh random data in every run.
#include <cudakit/interop/cccl_memory_resource.hpp>

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cudakit/cudakit.hpp"
#include "gpu_fixture.hpp"

namespace cudakit {
namespace {

using testing::GpuTest;

__global__ void add_to_each(std::uint32_t* data, std::uint32_t value, int n) {
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) data[i] += value;
}

std::vector<std::uint32_t> fresh_words(std::size_t n) {
  std::mt19937 rng(std::random_device{}());
  std::vector<std::uint32_t> v(n);
  for (auto& x : v) x = rng();
  return v;
}

// A CCCL async resource of the shape RMM's are, over cudaMallocAsync; counts its calls.
struct RuntimeAsyncResource {
  std::shared_ptr<int> allocations = std::make_shared<int>(0);
  std::shared_ptr<int> deallocations = std::make_shared<int>(0);
  void* allocate(std::size_t bytes, std::size_t) {
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) throw std::bad_alloc();
    return p;
  }
  void deallocate(void* p, std::size_t, std::size_t) { (void)cudaFree(p); }
  void* allocate_async(std::size_t bytes, std::size_t, cuda::stream_ref stream) {
    void* p = nullptr;
    if (cudaMallocAsync(&p, bytes, stream.get()) != cudaSuccess) throw std::bad_alloc();
    ++*allocations;
    return p;
  }
  void deallocate_async(void* p, std::size_t, std::size_t, cuda::stream_ref stream) {
    ++*deallocations;
    (void)cudaFreeAsync(p, stream.get());
  }
  friend bool operator==(const RuntimeAsyncResource& a, const RuntimeAsyncResource& b) {
    return a.allocations == b.allocations;
  }
  friend bool operator!=(const RuntimeAsyncResource& a, const RuntimeAsyncResource& b) { return !(a == b); }
  friend void get_property(const RuntimeAsyncResource&, cuda::mr::device_accessible) noexcept {}
};

class MemoryResourceDeviceTest : public GpuTest {};

TEST_F(MemoryResourceDeviceTest, ABufferFromPoolResourceHoldsDataAcrossStreamsAndIsCounted) {
  Stream a(device()), b(device());
  PoolResource pool(device());
  // The device's pool is the process's: frees that earlier tests left to a safe point may
  // land at any call, so live counts are compared as bounds, and made counts exactly.
  const std::uint64_t made_before = pool.pool().usage().allocations_made;
  std::uint64_t live_with_x = 0;
  const int n = 1 << 20;
  auto host = fresh_words(n);
  std::vector<std::uint32_t> expected = host;
  for (auto& x : expected) x += 7;
  {
    DeviceBuffer<std::uint32_t> x(a, n, uninitialized, pool);
    EXPECT_EQ(pool.pool().usage().allocations_made, made_before + 1);
    live_with_x = pool.pool().usage().live_allocations;
    EXPECT_GE(live_with_x, 1u);
    copy(a, host, x);
    enqueue(b, writes(x), [&](CUstream h) { add_to_each<<<(n + 255) / 256, 256, 0, h>>>(x.data(), 7, n); });
    EXPECT_EQ(download(a, x), expected);  // a waits for b's write
  }
  a.synchronize();
  b.synchronize();
  EXPECT_LE(pool.pool().usage().live_allocations, live_with_x - 1);
  EXPECT_EQ(pool.pool().usage().allocations_made, made_before + 1);
}

TEST_F(MemoryResourceDeviceTest, ACcclResourceBacksACudakitBuffer) {
  Stream s(device());
  RuntimeAsyncResource runtime;
  const int n = 300'001;
  auto host = fresh_words(n);
  {
    DeviceBuffer<std::uint32_t> x(s, n, uninitialized, from_cccl(runtime));
    DeviceBuffer<std::uint32_t> z(s, n, zeroed, from_cccl(cuda::mr::async_resource_ref<cuda::mr::device_accessible>(runtime)));
    copy(s, host, x);
    EXPECT_EQ(download(s, x), host);
    EXPECT_EQ(download(s, z), std::vector<std::uint32_t>(n, 0u));
    EXPECT_EQ(*runtime.allocations, 2);
  }
  s.synchronize();
  EXPECT_EQ(*runtime.deallocations, 2);
}

TEST_F(MemoryResourceDeviceTest, CcclCodeAllocatesFromCudakitsPool) {
  Stream s(device());
  PoolResource pool(device());
  cuda::mr::async_resource_ref<cuda::mr::device_accessible> ref = to_cccl(pool);
  const std::uint64_t made_before = pool.pool().usage().allocations_made;
  const int n = 4099;
  auto host = fresh_words(n);
  cuda::stream_ref on(runtime_stream(s));
  auto* p = static_cast<std::uint32_t*>(ref.allocate_async(n * sizeof(std::uint32_t), 256, on));
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(cudaMemcpyAsync(p, host.data(), n * sizeof(std::uint32_t), cudaMemcpyHostToDevice, on.get()), cudaSuccess);
  std::vector<std::uint32_t> back(n, 0);
  ASSERT_EQ(cudaMemcpyAsync(back.data(), p, n * sizeof(std::uint32_t), cudaMemcpyDeviceToHost, on.get()), cudaSuccess);
  ref.deallocate_async(p, n * sizeof(std::uint32_t), 256, on);
  s.synchronize();
  EXPECT_EQ(back, host);
  EXPECT_EQ(pool.pool().usage().allocations_made, made_before + 1);
}

TEST_F(MemoryResourceDeviceTest, OutOfMemoryNamesTheBytesTheReserveAndFreeMemoryAndTheProcessGoesOn) {
  Stream s(device());
  DeviceBuffer<char> held(s, 64 << 20, zeroed);  // in use: part of the reserve that stays
  const std::size_t too_much = device().total_memory() + (std::size_t(1) << 30);
  for (bool through_resource : {false, true}) {
    try {
      if (through_resource) DeviceBuffer<char> b(s, too_much, uninitialized, PoolResource(device()));
      else DeviceBuffer<char> b(s, too_much, uninitialized);
      FAIL() << "allocated more than the device has";
    } catch (const OutOfMemory& e) {
      EXPECT_EQ(e.requested(), too_much);
      EXPECT_GE(e.pool_reserved_bytes(), std::size_t(64) << 20);
      EXPECT_NE(e.pool_reserved_bytes(), OutOfMemory::no_pool);
      EXPECT_GT(e.total_bytes(), 0u);
      EXPECT_NE(std::string(e.what()).find("still reserves"), std::string::npos) << e.what();
    }
  }
  auto host = fresh_words(1000);
  EXPECT_EQ(download(s, upload(s, host)), host);
}

}  // namespace
}  // namespace cudakit
