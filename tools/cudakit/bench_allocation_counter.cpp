// The tool's global operator new, replaced with one that counts heap allocations per
// thread, so the launch benchmarks can report how many a cudakit launch makes (DESIGN 8:
// none). Counting is one thread-local increment; everything else is malloc and free.
// Kept in its own file: only the command links it (a test binary that links the tool
// objects has its own counter).
#include <cstdlib>
#include <new>

namespace cudakit::tool::bench {
namespace {
thread_local long heap_allocations = 0;

void* counted_allocation(std::size_t n) {
  ++heap_allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
}  // namespace

/// Heap allocations (operator new) made on the calling thread so far.
long heap_allocations_on_this_thread() noexcept { return heap_allocations; }
}  // namespace cudakit::tool::bench

void* operator new(std::size_t n) { return cudakit::tool::bench::counted_allocation(n); }
void* operator new[](std::size_t n) { return cudakit::tool::bench::counted_allocation(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
