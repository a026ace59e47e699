// Internal, for the unit tests only: installing a fake driver and forgetting the driver
// layer's state between tests.
#pragma once

#include "cudakit/driver.hpp"

namespace cudakit::driver::testing {

/// Replaces the driver with a table of entry pointers (a fake driver in unit tests).
/// A null pointer makes that entry missing. `driver_version` is what version() reports.
void install(void* const (&entries)[entry_count], int driver_version);
/// Forgets any installed table and any loaded library, so the next call loads again
/// (from CUDAKIT_LIBCUDA or libcuda.so.1). For loader tests.
void reset();

}  // namespace cudakit::driver::testing

namespace cudakit::detail {

/// Clears every poison mark (a real poisoned context stays poisoned).
void clear_poison_for_testing();

}  // namespace cudakit::detail
