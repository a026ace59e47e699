// Pooled cuBLASLt handles (lt_handle.hpp): released when unit tests reset the devices.
#include "libraries/lt_handle.hpp"

#include "libraries/handle_pool.hpp"
#include "libraries/libraries_testing.hpp"

namespace cudakit::detail {

void release_lt_handles_for_testing() { release_idle_handles<LtSlot>(); }

}  // namespace cudakit::detail
