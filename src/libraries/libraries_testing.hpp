// Internal, for the unit tests only: releasing what the libraries layer keeps per device
// for the life of the process (the cuBLAS and cuBLASLt handle pools), before the layers
// below forget their state (tests/unit/library_reset.hpp).
#pragma once

namespace cudakit::detail {

/// Destroys every idle cuBLAS handle (with its workspace). Leased ones are the tests' own.
void release_blas_handles_for_testing();
/// Destroys every idle cuBLASLt handle (with its plans and workspace).
void release_lt_handles_for_testing();

/// Both of the above.
inline void reset_libraries_for_testing() {
  release_lt_handles_for_testing();
  release_blas_handles_for_testing();
}

}  // namespace cudakit::detail
