// Forgetting the library's state between unit tests, so that the next test may install a
// fake driver that describes other devices. Each layer forgets its own, from the top down:
// what a layer holds on a device (staging buffers, a queued graph release) must go while
// the device's context is still retained.
#pragma once

#include "device/device_testing.hpp"
#include "libraries/libraries_testing.hpp"
#include "memory/memory_testing.hpp"
#include "stream/deferred.hpp"

namespace cudakit::testing {

/// Releases and forgets everything cudakit keeps per process and per device: the cuBLAS
/// handle pools, queued releases, staging buffers, pool settings, peer access, pooled
/// events, service streams, the library's context retains.
inline void reset_library_state() {
  detail::reset_libraries_for_testing();
  detail::run_deferred_tasks();
  detail::reset_memory_states_for_testing();
  detail::reset_peer_access_for_testing();
  detail::reset_device_states_for_testing();
}

}  // namespace cudakit::testing
