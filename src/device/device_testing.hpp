// Internal, for the unit tests only: forgetting the device layer's state, so that the next
// test may install a fake driver that describes other devices.
#pragma once

namespace cudakit::detail {

/// Forgets every device state: destroys the service streams and the pooled events, drops
/// the library's primary-context retains and the cached device count. The calling thread's
/// cached hand-off events go back to their pools first (other threads' caches empty
/// themselves when those threads end). The layers above must have released what they hold
/// on the devices first.
void reset_device_states_for_testing();

/// Forgets what is known of peer access between every pair of devices.
void reset_peer_access_for_testing();

}  // namespace cudakit::detail
