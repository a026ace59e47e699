// Launch configuration: grid, block, dynamic shared memory and launch attributes.
//
//   LaunchConfig{grid_for(n, 256), 256}                          // 1-D, n items
//   LaunchConfig{grid_for({nx, ny}, {16, 16}), {16, 16}}         // 2-D
//   LaunchConfig{.grid = g, .block = 256, .shared_memory_bytes = 96 << 10,
//                .allow_large_shared_memory = true}                // above 48 KiB: opt in
//   LaunchConfig{.grid = 8, .block = 128, .cluster = Dim3{2}}    // thread-block clusters
//
// Every launch checks its configuration against the device's limits and the kernel's own
// before the driver sees it (DESIGN 10); the limits are read once, when the kernel is
// looked up, so the check costs a few compares (launch.hpp).
//
// Thread safety: values; use from any thread.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include "cudakit/export.hpp"

namespace cudakit {

namespace detail {
[[noreturn]] CUDAKIT_API void throw_bad_extent(long long value);
[[noreturn]] CUDAKIT_API void throw_bad_extent(unsigned long long value);
template <std::integral I>
constexpr unsigned extent(I v) {
  if constexpr (std::is_signed_v<I>) {
    if (v < 0) throw_bad_extent(static_cast<long long>(v));
  }
  if (static_cast<unsigned long long>(v) > 0xffffffffull) throw_bad_extent(static_cast<unsigned long long>(v));
  return static_cast<unsigned>(v);
}
}  // namespace detail

/// Three extents: a grid in blocks, a block in threads, a cluster in blocks. A launch
/// refuses a zero extent; a negative one, or one above 2^32 - 1, throws InvalidArgument here.
struct CUDAKIT_API Dim3 {
  unsigned x = 1, y = 1, z = 1;

  constexpr Dim3() = default;
  /// Implicit from one number, so `256` means a block of 256 threads; any integer type, so
  /// `{nx, ny}` works for ints without narrowing casts.
  template <std::integral X, std::integral Y = unsigned, std::integral Z = unsigned>
  constexpr Dim3(X x_, Y y_ = 1u, Z z_ = 1u) : x(detail::extent(x_)), y(detail::extent(y_)), z(detail::extent(z_)) {}

  /// x * y * z, without overflow.
  constexpr std::uint64_t count() const noexcept { return std::uint64_t(x) * y * z; }
  friend constexpr bool operator==(const Dim3&, const Dim3&) = default;
};

/// "(256, 1, 1)".
CUDAKIT_API std::string to_string(Dim3 d);

namespace detail {
CUDAKIT_API Dim3 grid_for_count(std::uint64_t n, unsigned block, bool negative);
}

/// The blocks of `block` threads that cover `n` items: ceil(n / block) in x. Throws
/// InvalidArgument when `block` is 0, `n` is negative, or the count does not fit a grid.
template <std::integral N>
Dim3 grid_for(N n, unsigned block) {
  if constexpr (std::is_signed_v<N>) {
    if (n < 0) return detail::grid_for_count(0, block, true);
  }
  return detail::grid_for_count(static_cast<std::uint64_t>(n), block, false);
}

/// Per dimension: the blocks of `block` that cover `extent` (e.g. an nx by ny image).
CUDAKIT_API Dim3 grid_for(Dim3 extent, Dim3 block);

/// The shape of a launch: grid, block, dynamic shared memory and the launch attributes
/// below. Checked against the device's and the kernel's limits before the driver sees it
/// (InvalidArgument, naming the limit).
struct CUDAKIT_API LaunchConfig {
  /// Blocks in the grid.
  Dim3 grid = {};
  /// Threads in a block.
  Dim3 block = {};
  /// Dynamic shared memory per block (`extern __shared__`), in bytes.
  std::size_t shared_memory_bytes = 0;
  /// Above the 48 KiB a block gets by default, a kernel must opt in; with this set, cudakit
  /// raises the kernel's CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (once, up to the
  /// device's opt-in maximum). Without it, such a launch is an error that says so.
  bool allow_large_shared_memory = false;
  /// Thread-block cluster extents in blocks (compute capability 9.0+); each grid extent must
  /// be a multiple of the cluster's. At most 8 blocks per cluster (16 where the kernel allows
  /// non-portable sizes).
  std::optional<Dim3> cluster = std::nullopt;
  /// A cooperative launch (grid-wide sync): every block must be resident at once, so the
  /// grid may not exceed the kernel's occupancy times the multiprocessor count.
  bool cooperative = false;
  /// The launch's priority, within the context's stream priority range (lower runs first).
  std::optional<int> priority = std::nullopt;
  /// Programmatic dependent launch (compute capability 9.0+): this kernel may start before
  /// the previous kernel on the stream finishes, and must order itself with
  /// cudaGridDependencySynchronize(). Off unless asked.
  bool programmatic_dependent_launch = false;

  /// Whether the launch needs cuLaunchKernelEx attributes (otherwise it is a plain cuLaunchKernel).
  constexpr bool has_attributes() const noexcept {
    return cluster.has_value() || cooperative || priority.has_value() || programmatic_dependent_launch;
  }
};

}  // namespace cudakit
