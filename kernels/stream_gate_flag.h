// The flag a stream gate's kernel waits on (tests/device/stream_gate.hpp): one int in
// mapped page-locked memory. The host writes gate_open to let the held stream go on; the
// kernel writes gate_timed_out when it stops waiting. Host code includes this header for
// the values; nvcc-compiled code also gets the waiting loop that every gate kernel runs.
#pragma once

namespace cudakit::testing {

inline constexpr int gate_closed = 0;     // what the flag holds from the start (zeroed memory)
inline constexpr int gate_open = 1;       // written by the host: the kernel returns
inline constexpr int gate_timed_out = 2;  // written by the kernel when it gave up waiting

#ifdef __CUDACC__
// Spins (one thread) until the flag leaves gate_closed, or until `max_cycles` of the
// device clock have passed: then it writes gate_timed_out, so that a test that waits on
// the held stream before opening the gate fails after the bound instead of hanging.
// The flag is read through volatile: each read goes to host memory, where the host's
// store lands.
__device__ inline void wait_until_gate_opens(volatile int* flag, long long max_cycles) {
  const long long start = clock64();
  while (*flag == gate_closed) {
    if (clock64() - start > max_cycles) {
      *flag = gate_timed_out;
      __threadfence_system();
      return;
    }
  }
}
#endif

}  // namespace cudakit::testing
