// Internal: mapping fresh host pages before a download writes them.
//
// A download into host memory nobody wrote yet (a new vector, memory fresh from the OS)
// pays one page fault per page when its bytes land: on a 256 KiB destination that is 64
// faults, each a trip into the kernel, all after the device's work, on the request's
// critical path. The kernel can map the whole range in one call instead
// (madvise(MADV_POPULATE_WRITE), Linux 5.14 and newer), which costs less than half as
// much; and issued after the copies are queued and before the wait, it runs while the
// device still works.
//
// The call changes no byte (pages already mapped stay as they are; fresh ones read as
// zeros either way), so the range is widened to whole pages. Where the kernel refuses
// the advice (EINVAL: older than 5.14, or a mapping it does not apply to) cudakit stops
// asking for the rest of the process; the pages then fault in one by one, as before.
// Other failures (a range partly unmapped, memory short) are ignored: prefaulting is an
// optimisation, never a condition for the copy.
#pragma once

#include <cstddef>

#include "cudakit/export.hpp"

namespace cudakit::detail {

/// Destinations smaller than this are not prefaulted: a few pages fault cheaply, and
/// small blocks usually come from heap pages that were written before.
inline constexpr std::size_t prefault_min_bytes = 64 * 1024;

/// Maps the pages of [data, data + bytes) for writing in one call (see above). Never
/// fails; does nothing below prefault_min_bytes or once the kernel refused the advice.
CUDAKIT_API void prefault_for_write(void* data, std::size_t bytes) noexcept;

/// Whether the kernel refused the advice, so that prefault_for_write() does nothing.
CUDAKIT_API bool prefault_unsupported() noexcept;

/// The system call prefault_for_write() makes: madvise's shape. Unit tests replace it to
/// see the call, and to play a kernel that refuses the advice; null restores madvise.
using AdviseCall = int (*)(void* start, std::size_t length, int advice);
CUDAKIT_API void set_advise_call_for_testing(AdviseCall call) noexcept;
/// Forgets that the kernel refused the advice.
CUDAKIT_API void reset_prefault_for_testing() noexcept;

/// MADV_POPULATE_WRITE's value (23 on every Linux architecture), for headers older than
/// the advice.
inline constexpr int advice_populate_write = 23;

}  // namespace cudakit::detail
