// Forgetting the memory layer's per-device state between unit tests (memory_testing.hpp).
#include "memory/memory_testing.hpp"

#include "memory/copy_kernel.hpp"

namespace cudakit::detail {

void reset_memory_states_for_testing() {
  reset_staging_for_testing();
  reset_pools_for_testing();
  reset_pool_counters_for_testing();
  reset_copy_kernel_for_testing();
}

}  // namespace cudakit::detail
