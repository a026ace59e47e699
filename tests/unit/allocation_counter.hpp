// Counts heap allocations (operator new) on the calling thread while a CountAllocations
// lives: the unit test binary's global operator new is replaced by one that counts
// (allocation_counter.cpp). What the fake driver allocates inside its entries (its call
// log, its ordering model, the host kernels) is not cudakit's and is not counted.
#pragma once

namespace cudakit::testing {

/// Counts this thread's heap allocations from its construction until its destruction.
class CountAllocations {
 public:
  CountAllocations();
  ~CountAllocations();
  CountAllocations(const CountAllocations&) = delete;
  CountAllocations& operator=(const CountAllocations&) = delete;
  /// The allocations counted so far.
  long count() const;
};

}  // namespace cudakit::testing
