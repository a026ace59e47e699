#include "memory/prefault.hpp"

#include <atomic>
#include <cerrno>
#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace cudakit::detail {

namespace {

#if defined(MADV_POPULATE_WRITE)
static_assert(MADV_POPULATE_WRITE == advice_populate_write, "MADV_POPULATE_WRITE has another value here");
#endif

int system_advise(void* start, std::size_t length, int advice) {
#if defined(__linux__)
  return ::madvise(start, length, advice);
#else
  (void)start, (void)length, (void)advice;
  errno = EINVAL;
  return -1;
#endif
}

std::atomic<AdviseCall> advise_call{&system_advise};
std::atomic<bool> refused{false};

std::uintptr_t page_size() noexcept {
#if defined(__linux__)
  static const std::uintptr_t size = [] {
    long s = ::sysconf(_SC_PAGESIZE);
    return s > 0 ? static_cast<std::uintptr_t>(s) : std::uintptr_t{4096};
  }();
  return size;
#else
  return 4096;
#endif
}

}  // namespace

void prefault_for_write(void* data, std::size_t bytes) noexcept {
  if (data == nullptr || bytes < prefault_min_bytes) return;
  if (refused.load(std::memory_order_relaxed)) return;
  // Whole pages: the advice takes a page-aligned start, and changes no byte (see header).
  const std::uintptr_t page = page_size();
  const std::uintptr_t begin = reinterpret_cast<std::uintptr_t>(data) & ~(page - 1);
  const std::uintptr_t end = (reinterpret_cast<std::uintptr_t>(data) + bytes + page - 1) & ~(page - 1);
  const int saved_errno = errno;  // the caller's errno is not ours to change
  AdviseCall call = advise_call.load(std::memory_order_acquire);
  if (call(reinterpret_cast<void*>(begin), end - begin, advice_populate_write) != 0 && errno == EINVAL)
    refused.store(true, std::memory_order_relaxed);
  errno = saved_errno;
}

bool prefault_unsupported() noexcept { return refused.load(std::memory_order_relaxed); }

void set_advise_call_for_testing(AdviseCall call) noexcept {
  advise_call.store(call != nullptr ? call : &system_advise, std::memory_order_release);
}

void reset_prefault_for_testing() noexcept { refused.store(false, std::memory_order_relaxed); }

}  // namespace cudakit::detail
