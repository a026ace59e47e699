// Counts heap allocations (operator new) on the calling thread while a CountAllocations
// lives, and fails one of them on purpose while a FailNthAllocation lives: the unit test binary's global operator new is replaced by one that counts
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

/// Makes the calling thread's `nth` heap allocation from its construction on (1-based,
/// the fake driver's own not counted) throw std::bad_alloc, once: fault injection for the
/// paths that allocate.
class FailNthAllocation {
 public:
  explicit FailNthAllocation(long nth);
  ~FailNthAllocation();
  FailNthAllocation(const FailNthAllocation&) = delete;
  FailNthAllocation& operator=(const FailNthAllocation&) = delete;
  /// Whether the allocation was failed (false: there were fewer than `nth`).
  bool failed() const;
};

}  // namespace cudakit::testing
