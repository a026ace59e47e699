// Internal, for the unit tests only: forgetting the memory layer's per-device state, so
// that the next test may install a fake driver that describes other devices.
#pragma once

namespace cudakit::detail {

/// All of the below.
void reset_memory_states_for_testing();

void reset_pools_for_testing();    // memory_pool.cpp: forgets the pools' settings
void reset_staging_for_testing();  // staging.cpp: frees every staging buffer
void reset_pool_counters_for_testing();  // pool_counters.cpp: forgets the counts of allocations

}  // namespace cudakit::detail
