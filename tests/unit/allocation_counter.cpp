// The unit test binary's global operator new and delete: malloc and free, plus a
// thread-local count while a CountAllocations asks for it (allocation_counter.hpp).
#include "allocation_counter.hpp"

#include <cstdlib>
#include <new>

#include "fake_driver.hpp"

namespace {
thread_local bool counting = false;
thread_local long allocations = 0;
thread_local long every_allocation = 0;

thread_local long fail_countdown = 0;  // the allocation that fails, counted down; 0: none
thread_local bool fail_fired = false;

void count_or_fail() {
  ++every_allocation;
  if (counting && cudakit::fake::inside_fake_driver == 0) ++allocations;
  if (fail_countdown > 0 && cudakit::fake::inside_fake_driver == 0 && --fail_countdown == 0) {
    fail_fired = true;
    throw std::bad_alloc();
  }
}

void* counted_allocation(std::size_t n) {
  count_or_fail();
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}

void* counted_aligned_allocation(std::size_t n, std::align_val_t alignment) {
  count_or_fail();
  const auto a = static_cast<std::size_t>(alignment);
  if (void* p = std::aligned_alloc(a, (n + a - 1) / a * a + (n == 0 ? a : 0))) return p;
  throw std::bad_alloc();
}

void* counted_aligned_allocation_or_null(std::size_t n, std::align_val_t alignment) noexcept {
  try {
    return counted_aligned_allocation(n, alignment);
  } catch (...) {
    return nullptr;
  }
}
}  // namespace

// The command's launch benchmarks, linked into this binary, read this thread's count
// here (the command itself has tools/cudakit/bench_allocation_counter.cpp).
namespace cudakit::tool::bench {
long heap_allocations_on_this_thread() noexcept { return every_allocation; }
}  // namespace cudakit::tool::bench

void* operator new(std::size_t n) { return counted_allocation(n); }
void* operator new[](std::size_t n) { return counted_allocation(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
// The aligned forms (Allocation is aligned to a cache line; the fake driver's memory to
// 256 bytes, through the nothrow form): every one is replaced, so that no block made by
// the library's operator new reaches this file's free.
void* operator new(std::size_t n, std::align_val_t a) { return counted_aligned_allocation(n, a); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_aligned_allocation_or_null(n, a);
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_aligned_allocation_or_null(n, a);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted_aligned_allocation(n, a); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace cudakit::testing {

CountAllocations::CountAllocations() {
  allocations = 0;
  counting = true;
}
CountAllocations::~CountAllocations() { counting = false; }
long CountAllocations::count() const { return allocations; }

FailNthAllocation::FailNthAllocation(long nth) {
  fail_countdown = nth;
  fail_fired = false;
}
FailNthAllocation::~FailNthAllocation() { fail_countdown = 0; }
bool FailNthAllocation::failed() const { return fail_fired; }

}  // namespace cudakit::testing
