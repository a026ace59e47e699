// Internal: forgetting the memory layer's per-device state between unit tests (a new
// fake driver may describe other devices). Called by reset_device_states_for_testing.
#pragma once

namespace cudakit::detail {

/// All of the below.
void reset_memory_states_for_testing();

void reset_pools_for_testing();          // memory_pool.cpp
void reset_staging_for_testing();        // staging.cpp: frees every staging buffer
void reset_peer_access_for_testing();    // copy.cpp

}  // namespace cudakit::detail
