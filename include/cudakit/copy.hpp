// Copies and fills: host to device, device to host, device to device
// (also between two devices), and memsets, between DeviceBuffer, DeviceSpan, std::span,
// std::vector, std::array, PinnedBuffer and any other contiguous range.
//
//   cudakit::copy(stream, host_vector, device_buffer);         // host -> device
//   cudakit::copy(stream, device_buffer, pinned_buffer);       // device -> host
//   cudakit::copy(stream, a.subspan(0, n), b.subspan(n, n));   // device -> device
//   cudakit::fill(stream, device_buffer, 1.0f);                // any 1, 2, 4 or 8-byte T
//   DeviceBuffer<float> x = cudakit::upload(stream, host_vector);
//   std::vector<float> y = cudakit::download(stream, x);       // waits for x's last writer only
//
// Every operation is stream-ordered on the stream it is given (DESIGN 1: only the *Async
// driver entries, never the legacy stream) and tells the buffers' trackers how it uses
// them before it is submitted (DESIGN 5), so work on other streams is ordered with it.
//
// Checked before the driver (DESIGN 10): element types must match (a compile error
// otherwise), and extents must be equal: a mismatch throws InvalidArgument naming both
// sizes, in elements and bytes. Use subspan() (or std::span::subspan) to copy a part.
//
// Host memory, pinned or pageable:
//   - A PinnedBuffer, or a range inside a PinnedBuffer or a HostRegistration, is page-locked:
//     the copy goes to the driver directly and is asynchronous. The caller orders host
//     access to it (pinned_buffer.hpp). cudakit knows these ranges itself; it asks the
//     driver nothing on the copy path.
//   - Anything else is pageable and goes through cudakit's page-locked staging buffers
//     (src/memory/staging.hpp):
//       * host -> device: the source has been read completely when copy() returns, so
//         the caller may reuse or free it at once; the device side stays asynchronous.
//       * device -> host with copy(): asynchronous; a host callback on the stream fills
//         the destination, which is complete when the stream's work up to here is (the
//         same rule as for pinned memory). The destination must stay alive until then.
//       * device -> host with download(): blocking.
//     A pageable copy on a capturing stream throws CaptureError: its staging buffers are
//     reused, so a graph replaying it would read stale bytes. Use a PinnedBuffer there.
//
// Two devices: a copy between buffers of different devices is a peer copy
// (cuMemcpyPeerAsync); cudakit enables peer access between the two devices the first
// time (once per pair; see peer_access.hpp), where the hardware allows it.
//
// Thread safety: as for the buffers involved (device_buffer.hpp).
#pragma once

#include <cuda.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ranges>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "cudakit/export.hpp"
#include "cudakit/device_buffer.hpp"
#include "cudakit/device_span.hpp"
#include "cudakit/growable_buffer.hpp"
#include "cudakit/managed_buffer.hpp"
#include "cudakit/pinned_buffer.hpp"
#include "cudakit/stream.hpp"

namespace cudakit {

namespace detail {

template <class T>
DeviceSpan<T> as_device_span(DeviceSpan<T> view) noexcept {
  return view;
}
// EmptyHandle for a moved-from buffer (device_buffer.hpp).
template <class T>
DeviceSpan<T> as_device_span(DeviceBuffer<T>& buffer) {
  return buffer.span();
}
template <class T>
DeviceSpan<const T> as_device_span(const DeviceBuffer<T>& buffer) {
  return buffer.span();
}
// The elements in use of a growable buffer, all of a managed one.
template <class T>
DeviceSpan<T> as_device_span(GrowableBuffer<T>& buffer) {
  return buffer.span();
}
template <class T>
DeviceSpan<const T> as_device_span(const GrowableBuffer<T>& buffer) {
  return buffer.span();
}
template <class T>
DeviceSpan<T> as_device_span(ManagedBuffer<T>& buffer) {
  return buffer.span();
}
template <class T>
DeviceSpan<const T> as_device_span(const ManagedBuffer<T>& buffer) {
  return buffer.span();
}

template <class R>
concept device_viewable = requires(R&& r) { detail::as_device_span(std::forward<R>(r)); };
template <class R>
using device_span_of = decltype(detail::as_device_span(std::declval<R>()));

template <class R>
inline constexpr bool is_pinned_buffer = false;
template <class T>
inline constexpr bool is_pinned_buffer<PinnedBuffer<T>> = true;

// The byte-level description of each side of a copy.
struct CUDAKIT_API HostBytes {
  void* data = nullptr;
  std::size_t bytes = 0;
  Allocation* pinned = nullptr;  // the page-locked allocation holding the bytes, when known
  bool pinned_known = false;     // false: look the range up (detail/host_ranges.hpp)
};
struct CUDAKIT_API DeviceBytes {
  Allocation* allocation = nullptr;
  CUdeviceptr pointer = 0;
  std::size_t bytes = 0;
  int device = -1;
};

template <class R>
HostBytes host_bytes(R& range) {
  const void* p = std::ranges::data(range);
  std::size_t bytes = std::ranges::size(range) * sizeof(std::ranges::range_value_t<R>);
  if constexpr (is_pinned_buffer<std::remove_cv_t<R>>) return {const_cast<void*>(p), bytes, range.allocation(), true};
  else return {const_cast<void*>(p), bytes, nullptr, false};
}
template <class T>
DeviceBytes device_bytes(DeviceSpan<T> view) noexcept {
  return {view.allocation(), view.device_pointer(), view.size_bytes(), view.device_ordinal()};
}

[[noreturn]] CUDAKIT_API void throw_extent_mismatch(const char* operation, std::size_t source_count, std::size_t destination_count,
                                        std::size_t element_bytes);
inline void check_extents(const char* operation, std::size_t source_count, std::size_t destination_count,
                          std::size_t element_bytes) {
  if (source_count != destination_count) [[unlikely]]
    throw_extent_mismatch(operation, source_count, destination_count, element_bytes);
}

CUDAKIT_API void copy_host_to_device(StreamRef stream, HostBytes source, DeviceBytes destination);
/// `wait`: block until the destination holds the bytes (download); otherwise stream-ordered.
CUDAKIT_API void copy_device_to_host(StreamRef stream, DeviceBytes source, HostBytes destination, bool wait);
/// Memory a download makes for its result (a new vector), in two steps, once the copies
/// are queued and before the first wait, so that they overlap the device's work:
/// `reserve(context, bytes)` returns storage for `bytes` bytes that nobody wrote yet
/// (the vector's reserve()), which cudakit maps in one call (memory/prefault.hpp); then
/// `make(context, bytes)` returns where the bytes go (the vector resized over that
/// storage, its pages already mapped).
struct CUDAKIT_API NewHostMemory {
  void* context = nullptr;
  void* (*reserve)(void* context, std::size_t bytes) = nullptr;
  void* (*make)(void* context, std::size_t bytes) = nullptr;
};
/// A blocking download into memory made by `destination` (never page-locked: staged).
CUDAKIT_API void download_to_new_host_memory(StreamRef stream, DeviceBytes source, NewHostMemory destination);
CUDAKIT_API void copy_device_to_device(StreamRef stream, DeviceBytes source, DeviceBytes destination);
/// A memset of a `pattern_bytes`-byte (1, 2, 4 or 8) pattern; `operation` names it in
/// errors. An 8-byte pattern is two strided 4-byte memsets (cuMemsetD2D32Async: the low
/// half, then the high half), or one 4-byte memset when both halves are equal.
CUDAKIT_API void fill_device(StreamRef stream, DeviceBytes destination, std::uint64_t pattern, int pattern_bytes,
                             const char* operation);

}  // namespace detail

/// A DeviceBuffer, GrowableBuffer, ManagedBuffer or DeviceSpan.
template <class R>
concept device_range = detail::device_viewable<R>;
/// A device range whose elements may be written (not a DeviceSpan<const T>, not a const
/// DeviceBuffer).
template <class R>
concept writable_device_range =
    device_range<R> && !std::is_const_v<typename detail::device_span_of<R>::element_type>;
/// Contiguous host memory with a size: std::vector, std::array, std::span, C arrays,
/// PinnedBuffer, ...
template <class R>
concept host_range = std::ranges::contiguous_range<R> && std::ranges::sized_range<R> && !device_range<R>;
/// A host range whose elements may be written, and which outlives the call expression
/// (an lvalue, or a view such as std::span).
template <class R>
concept writable_host_range =
    host_range<R> && !std::is_const_v<std::remove_reference_t<std::ranges::range_reference_t<R>>> &&
    (std::is_lvalue_reference_v<R> || std::ranges::borrowed_range<R>);

/// The element type of a device range (without const).
template <class R>
using device_value_t = typename detail::device_span_of<R>::value_type;
/// The element type of a host range (without const).
template <class R>
using host_value_t = std::remove_cv_t<std::ranges::range_value_t<R>>;

/// Host to device, stream-ordered on `stream`. A pageable source may be reused as soon as
/// this returns; a page-locked one only after the copy completed.
template <class Source, class Destination>
  requires host_range<const Source&> && writable_device_range<Destination> &&
           std::same_as<host_value_t<const Source&>, device_value_t<Destination>>
void copy(StreamRef stream, const Source& source, Destination&& destination) {
  auto dst = detail::as_device_span(std::forward<Destination>(destination));
  detail::check_extents("copy (host to device)", std::ranges::size(source), dst.size(), sizeof(device_value_t<Destination>));
  detail::copy_host_to_device(stream, detail::host_bytes(source), detail::device_bytes(dst));
}

/// Device to host, stream-ordered on `stream`: the destination holds the bytes once the
/// stream's work up to here completed (synchronize the stream, or wait for an event).
template <class Source, class Destination>
  requires device_range<const Source&> && writable_host_range<Destination&&> &&
           std::same_as<device_value_t<const Source&>, host_value_t<Destination&&>>
void copy(StreamRef stream, const Source& source, Destination&& destination) {
  auto src = detail::as_device_span(source);
  detail::check_extents("copy (device to host)", src.size(), std::ranges::size(destination), sizeof(host_value_t<Destination&&>));
  detail::copy_device_to_host(stream, detail::device_bytes(src), detail::host_bytes(destination), false);
}

/// Device to device (on one device or between two), stream-ordered on `stream`. The two
/// ranges must not overlap.
template <class Source, class Destination>
  requires device_range<const Source&> && writable_device_range<Destination> &&
           std::same_as<device_value_t<const Source&>, device_value_t<Destination>>
void copy(StreamRef stream, const Source& source, Destination&& destination) {
  auto src = detail::as_device_span(source);
  auto dst = detail::as_device_span(std::forward<Destination>(destination));
  detail::check_extents("copy (device to device)", src.size(), dst.size(), sizeof(device_value_t<Destination>));
  detail::copy_device_to_device(stream, detail::device_bytes(src), detail::device_bytes(dst));
}

/// Sets every element to `value`, a memset of its bytes: T of 1, 2, 4 or 8 bytes
/// (double, std::uint64_t, a pair of floats, ...). Stream-ordered like every fill; 8-byte
/// elements take two strided 4-byte memsets (one when the value's halves are equal), each
/// a memset node when captured.
template <class Destination>
  requires writable_device_range<Destination>
void fill(StreamRef stream, Destination&& destination, const std::type_identity_t<device_value_t<Destination>>& value) {
  using T = device_value_t<Destination>;
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8,
                "cudakit::fill is a memset of 1, 2, 4 or 8-byte elements; fill wider ones with a kernel, or with "
                "fill_pattern32 when the element is a repeated 4-byte pattern");
  std::uint64_t pattern = 0;
  std::memcpy(&pattern, &value, sizeof(T));  // the element's bytes, in the low bytes of the pattern
  detail::fill_device(stream, detail::device_bytes(detail::as_device_span(std::forward<Destination>(destination))),
                      pattern, static_cast<int>(sizeof(T)), "fill");
}

/// Sets every byte of the range to `byte` (cuMemsetD8Async).
template <class Destination>
  requires writable_device_range<Destination>
void fill_pattern8(StreamRef stream, Destination&& destination, std::uint8_t byte) {
  detail::fill_device(stream, detail::device_bytes(detail::as_device_span(std::forward<Destination>(destination))), byte,
                      1, "fill_pattern8");
}

/// Repeats a 16-bit pattern over the range (cuMemsetD16Async). The range's size in bytes
/// must be a multiple of 2 and its address 2-byte aligned (InvalidArgument otherwise).
template <class Destination>
  requires writable_device_range<Destination>
void fill_pattern16(StreamRef stream, Destination&& destination, std::uint16_t pattern) {
  detail::fill_device(stream, detail::device_bytes(detail::as_device_span(std::forward<Destination>(destination))),
                      pattern, 2, "fill_pattern16");
}

/// Repeats a 32-bit pattern over the range (cuMemsetD32Async). The range's size in bytes
/// must be a multiple of 4 and its address 4-byte aligned (InvalidArgument otherwise).
template <class Destination>
  requires writable_device_range<Destination>
void fill_pattern32(StreamRef stream, Destination&& destination, std::uint32_t pattern) {
  detail::fill_device(stream, detail::device_bytes(detail::as_device_span(std::forward<Destination>(destination))),
                      pattern, 4, "fill_pattern32");
}

/// A new device buffer (allocated on `stream`) holding a copy of `source`. Stream-ordered;
/// a pageable source may be reused as soon as this returns.
template <class Source>
  requires host_range<const Source&>
DeviceBuffer<host_value_t<const Source&>> upload(StreamRef stream, const Source& source,
                                                 Allocator allocator = Allocator::pool) {
  DeviceBuffer<host_value_t<const Source&>> buffer(stream, std::ranges::size(source), uninitialized, allocator);
  copy(stream, source, buffer);
  return buffer;
}

/// Copies `source` into `destination` and returns once the bytes are there. It waits only
/// for what it needs: the last write to `source` (on any stream), then the copy.
template <class Source, class Destination>
  requires device_range<const Source&> && writable_host_range<Destination&&> &&
           std::same_as<device_value_t<const Source&>, host_value_t<Destination&&>>
void download(StreamRef stream, const Source& source, Destination&& destination) {
  auto src = detail::as_device_span(source);
  detail::check_extents("download", src.size(), std::ranges::size(destination), sizeof(host_value_t<Destination&&>));
  detail::copy_device_to_host(stream, detail::device_bytes(src), detail::host_bytes(destination), true);
}

/// The elements of `source`, in a new vector (blocking; see the overload above). The
/// copy is queued before the vector is made, so making it, and mapping its fresh pages in
/// one call rather than one page fault at a time, overlap the device's work.
template <class Source>
  requires device_range<const Source&>
std::vector<device_value_t<const Source&>> download(StreamRef stream, const Source& source) {
  using T = device_value_t<const Source&>;
  std::vector<T> out;
  auto reserve = [](void* vector, std::size_t bytes) -> void* {
    auto& v = *static_cast<std::vector<T>*>(vector);
    v.reserve(bytes / sizeof(T));
    return v.data();
  };
  auto make = [](void* vector, std::size_t bytes) -> void* {
    auto& v = *static_cast<std::vector<T>*>(vector);
    v.resize(bytes / sizeof(T));
    return v.data();
  };
  detail::download_to_new_host_memory(stream, detail::device_bytes(detail::as_device_span(source)),
                                      {&out, reserve, make});
  return out;
}

}  // namespace cudakit
