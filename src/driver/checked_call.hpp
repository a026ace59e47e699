// Internal: a driver call whose failure becomes the error family's exception. The call is
// named by its table entry (driver::Entry::name()), so no call site spells it again:
//
//   checked_call(cu.StreamSynchronize, resource, stream);   // throws "cuStreamSynchronize on ..."
//
// Success costs what `check(cu.X(...), "cuX", resource)` costs: one compare.
#pragma once

#include <utility>

#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"

namespace cudakit {

/// Calls `entry` with `args`; unless it returns CUDA_SUCCESS, throws DriverError (or the
/// kind check() chooses: OutOfMemory, ContextPoisoned, CaptureError) naming the entry and
/// `resource`.
template <driver::EntryId Id, class Fn, class... Args>
void checked_call(driver::Entry<Id, Fn> entry, const Resource& resource, Args&&... args) {
  check(entry(std::forward<Args>(args)...), entry.name(), resource);
}

}  // namespace cudakit
