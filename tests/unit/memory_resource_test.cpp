// Memory resources against the fake driver: PoolResource (the pool as a resource, its
// counts and its out-of-memory path), and DeviceBuffers backed by a resource: freed back
// to it, stream-ordered after every stream that used them, with the resource kept alive
// until then.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cudakit/capture.hpp"
#include "cudakit/pool_resource.hpp"
#include "memory_fixture.hpp"

namespace cudakit {
namespace {

using driver::EntryId;
using testing::message_of;

// What a counting resource saw; shared by its copies, and outliving them.
struct Ledger {
  int allocations = 0, deallocations = 0;
  std::vector<CUstream> freed_on;
  bool resource_alive = true;
  int copies_alive = 0;
};

// A resource of the user's own: PoolResource underneath, every call counted.
class CountingResource {
 public:
  CountingResource(PoolResource pool, std::shared_ptr<Ledger> ledger) : pool_(pool), ledger_(std::move(ledger)) {
    ++ledger_->copies_alive;
  }
  CountingResource(const CountingResource& o) : pool_(o.pool_), ledger_(o.ledger_) { ++ledger_->copies_alive; }
  CountingResource& operator=(const CountingResource&) = delete;
  ~CountingResource() {
    if (--ledger_->copies_alive == 0) ledger_->resource_alive = false;
  }
  void* allocate(std::size_t b, std::size_t a) { return pool_.allocate(b, a); }
  void deallocate(void* p, std::size_t b, std::size_t a) { pool_.deallocate(p, b, a); }
  void* allocate_async(std::size_t b, std::size_t a, StreamRef s) {
    ++ledger_->allocations;
    return pool_.allocate_async(b, a, s);
  }
  void deallocate_async(void* p, std::size_t b, std::size_t a, StreamRef s) {
    EXPECT_TRUE(ledger_->resource_alive);
    ++ledger_->deallocations;
    ledger_->freed_on.push_back(s.handle());
    pool_.deallocate_async(p, b, a, s);
  }
  friend bool operator==(const CountingResource& x, const CountingResource& y) { return x.ledger_ == y.ledger_; }
  friend void get_property(const CountingResource&, device_accessible) noexcept {}

 private:
  PoolResource pool_;
  std::shared_ptr<Ledger> ledger_;
};

// A resource that breaks the contract: null for a request it cannot serve.
struct NullResource {
  void* allocate(std::size_t, std::size_t) { return nullptr; }
  void deallocate(void*, std::size_t, std::size_t) {}
  void* allocate_async(std::size_t, std::size_t, StreamRef) { return nullptr; }
  void deallocate_async(void*, std::size_t, std::size_t, StreamRef) {}
  friend bool operator==(const NullResource&, const NullResource&) { return true; }
  friend void get_property(const NullResource&, device_accessible) noexcept {}
};

// Host memory only: not for a DeviceBuffer.
struct HostResource {
  void* allocate(std::size_t, std::size_t);
  void deallocate(void*, std::size_t, std::size_t);
  void* allocate_async(std::size_t, std::size_t, StreamRef);
  void deallocate_async(void*, std::size_t, std::size_t, StreamRef);
  friend bool operator==(const HostResource&, const HostResource&) { return true; }
  friend void get_property(const HostResource&, host_accessible) noexcept {}
};

// A foreign stream view, shaped as cuda::stream_ref.
struct ForeignStream {
  CUstream handle;
  CUstream get() const noexcept { return handle; }
};

static_assert(DeviceMemoryResource<PoolResource>);
static_assert(DeviceMemoryResource<CountingResource>);
static_assert(DeviceMemoryResource<MemoryResource>);
static_assert(AsyncMemoryResource<HostResource> && !DeviceMemoryResource<HostResource>);
static_assert(!std::is_constructible_v<MemoryResource, HostResource>);
static_assert(std::is_constructible_v<DeviceBuffer<float>, StreamRef, std::size_t, Uninitialized, PoolResource>);
static_assert(!std::is_constructible_v<DeviceBuffer<float>, StreamRef, std::size_t, Uninitialized, HostResource>);

class MemoryResourceTest : public testing::MemoryTest {
 protected:
  static std::vector<std::uint32_t> random_words(std::size_t n) {
    std::mt19937 rng(std::random_device{}());
    std::vector<std::uint32_t> v(n);
    for (auto& x : v) x = rng() | 1u;
    return v;
  }
};

TEST_F(MemoryResourceTest, PoolResourceAllocatesFromThePoolAndCountsInItsUsage) {
  Stream s(dev());
  PoolResource pool(dev());
  EXPECT_EQ(pool.pool(), default_memory_pool(dev()));
  void* a = pool.allocate_async(1000, 256, s);
  void* b = pool.allocate_async(24, 8, s);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(calls(EntryId::MemAllocFromPoolAsync), 2);
  PoolUsage u = pool.pool().usage();
  EXPECT_EQ(u.live_allocations, 2u);
  EXPECT_EQ(u.used_bytes, 1024u);
  pool.deallocate_async(a, 1000, 256, s);
  pool.deallocate_async(b, 24, 8, ForeignStream{s.handle()});
  EXPECT_EQ(pool.pool().usage().live_allocations, 0u);
  EXPECT_EQ(pool.pool().usage().allocations_made, 2u);
  EXPECT_EQ(pool.allocate_async(0, 256, s), nullptr) << "0 bytes: no memory, no call";
  pool.deallocate_async(nullptr, 0, 256, s);
  EXPECT_EQ(calls(EntryId::MemAllocFromPoolAsync), 2);
}

TEST_F(MemoryResourceTest, PoolResourceBlockingFormsWaitForTheServiceStream) {
  PoolResource pool(dev());
  void* p = pool.allocate(4096);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(calls(EntryId::StreamSynchronize), 1);
  pool.deallocate(p, 4096);
  EXPECT_EQ(calls(EntryId::StreamSynchronize), 2);
  EXPECT_EQ(fake().live("device memory"), 0u);
}

TEST_F(MemoryResourceTest, PoolResourceOnAForeignStreamView) {
  Stream s(dev());
  PoolResource pool(dev());
  void* p = pool.allocate_async(512, 256, ForeignStream{s.handle()});
  ASSERT_NE(p, nullptr);
  pool.deallocate_async(p, 512, 256, ForeignStream{s.handle()});
  for (std::uintptr_t legacy : {0, 1, 2}) {
    auto m = message_of<InvalidArgument>(
        [&] { (void)pool.allocate_async(512, 256, ForeignStream{reinterpret_cast<CUstream>(legacy)}); });
    EXPECT_NE(m.find("legacy or per-thread default stream"), std::string::npos) << m;
  }
}

TEST_F(MemoryResourceTest, PoolResourceRefusesAnAlignmentThePoolCannotGive) {
  Stream s(dev());
  PoolResource pool(dev());
  for (std::size_t alignment : {std::size_t(0), std::size_t(3), std::size_t(512), std::size_t(4096)}) {
    auto m = message_of<InvalidArgument>([&] { (void)pool.allocate_async(64, alignment, s); });
    EXPECT_NE(m.find("alignment " + std::to_string(alignment) + " refused"), std::string::npos) << m;
  }
  EXPECT_EQ(calls(EntryId::MemAllocFromPoolAsync), 0);
  EXPECT_THROW(PoolResource{MemoryPoolRef{}}, InvalidArgument);
}

TEST_F(MemoryResourceTest, PoolResourceOutOfMemoryOnceTrimsAndRetries) {
  Stream s(dev());
  PoolResource pool(dev());
  pool.deallocate_async(pool.allocate_async(6000, 256, s), 6000, 256, s);  // 6000 reserved, unused
  s.synchronize();
  ASSERT_EQ(pool.pool().reserved_bytes(), 6000u);
  fake().fail(EntryId::MemAllocFromPoolAsync, 2, CUDA_ERROR_OUT_OF_MEMORY);
  void* p = pool.allocate_async(100, 256, s);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(calls(EntryId::MemPoolTrimTo), 1);
  EXPECT_EQ(calls(EntryId::MemAllocFromPoolAsync), 3);
  EXPECT_EQ(pool.pool().reserved_bytes(), 100u);
  pool.deallocate_async(p, 100, 256, s);
}

TEST_F(MemoryResourceTest, PoolResourceOutOfMemoryTwiceNamesTheBytesTheReserveAndTheFreeMemory) {
  Stream s(dev());
  PoolResource pool(dev());
  void* held = pool.allocate_async(2048, 256, s);
  fake().fail(EntryId::MemAllocFromPoolAsync, 0, CUDA_ERROR_OUT_OF_MEMORY);
  try {
    (void)pool.allocate_async(5u << 20, 256, s);
    FAIL() << "allocated";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.requested(), 5u << 20);
    EXPECT_EQ(e.pool_reserved_bytes(), 2048u);
    std::string m = e.what();
    EXPECT_NE(m.find("cuMemAllocFromPoolAsync"), std::string::npos) << m;
    EXPECT_NE(m.find("asked for 5.00 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("free of 16.00 GiB"), std::string::npos) << m;
    EXPECT_NE(m.find("still reserves 2048 bytes"), std::string::npos) << m;
  }
  fake().clear_faults();
  EXPECT_EQ(calls(EntryId::MemPoolTrimTo), 1);
  EXPECT_EQ(pool.pool().usage().live_allocations, 1u);
  pool.deallocate_async(held, 2048, 256, s);
}

TEST_F(MemoryResourceTest, ABufferFromAResourceHoldsDataAndGoesBackToIt) {
  Stream s(dev());
  auto ledger = std::make_shared<Ledger>();
  std::vector<std::uint32_t> host = random_words(3000);
  {
    DeviceBuffer<std::uint32_t> b(s, host.size(), uninitialized, CountingResource(PoolResource(dev()), ledger));
    EXPECT_EQ(ledger->allocations, 1);
    EXPECT_TRUE(ledger->resource_alive) << "the buffer keeps its resource alive";
    copy(s, host, b);
    EXPECT_EQ(download(s, b), host);
    DeviceBuffer<std::uint32_t> z(s, 77, zeroed, CountingResource(PoolResource(dev()), ledger));
    EXPECT_EQ(download(s, z), std::vector<std::uint32_t>(77, 0u));
  }
  EXPECT_EQ(ledger->deallocations, 2);
  EXPECT_EQ(ledger->freed_on, (std::vector<CUstream>{s.handle(), s.handle()})) << "on the only stream that used them";
  EXPECT_FALSE(ledger->resource_alive) << "released once the memory went back";
  EXPECT_EQ(default_memory_pool(dev()).usage().live_allocations, 0u);
}

TEST_F(MemoryResourceTest, ABufferFromAResourceIsFreedAfterEveryStreamThatUsedIt) {
  Stream a(dev()), b(dev());
  auto ledger = std::make_shared<Ledger>();
  std::vector<std::uint32_t> host = random_words(1000), out(1000, 0);
  {
    DeviceBuffer<std::uint32_t> x(a, host.size(), uninitialized, CountingResource(PoolResource(dev()), ledger));
    copy(a, host, x);
    copy(b, x, out);  // a reader on a second stream: tracked
    b.synchronize();
    EXPECT_EQ(out, host);
    copy(a, host, x);  // a write on `a` again, after b's read
  }
  // The fake's ordering model (checked at TearDown) sees the free ordered after both.
  EXPECT_EQ(ledger->deallocations, 1);
}

TEST_F(MemoryResourceTest, ABufferFromAMemoryResourceCopyKeepsTheOneModel) {
  Stream s(dev());
  auto ledger = std::make_shared<Ledger>();
  MemoryResource any = CountingResource(PoolResource(dev()), ledger);
  MemoryResource same = any;
  EXPECT_TRUE(any == same);
  EXPECT_FALSE(any == MemoryResource(PoolResource(dev())));
  EXPECT_TRUE(MemoryResource(PoolResource(dev())) == MemoryResource(PoolResource(dev())));
  DeviceBuffer<int> x(s, 10, zeroed, any);
  DeviceBuffer<int> y(s, 10, zeroed, same);
  EXPECT_EQ(ledger->allocations, 2);
}

TEST_F(MemoryResourceTest, AResourceThatReturnsNullIsAnError) {
  Stream s(dev());
  auto m = message_of<Error>([&] { DeviceBuffer<float> b(s, 10, uninitialized, NullResource{}); });
  EXPECT_NE(m.find("the resource returned null for 40 bytes"), std::string::npos) << m;
  DeviceBuffer<float> empty(s, 0, uninitialized, NullResource{});
  EXPECT_TRUE(empty.empty()) << "0 elements ask the resource nothing";
}

TEST_F(MemoryResourceTest, AnAllocationFromAResourceOnACapturingStreamIsRefused) {
  Stream s(dev());
  auto ledger = std::make_shared<Ledger>();
  CountingResource r(PoolResource(dev()), ledger);
  DeviceBuffer<int> warm(s, 4, zeroed);
  EXPECT_THROW(capture(s, [&] { DeviceBuffer<int> b(s, 10, zeroed, r); }), CaptureError);
  EXPECT_EQ(ledger->allocations, 0);
}

}  // namespace
}  // namespace cudakit
