// DeviceValue<T>: one value in device memory that kernels read through a `const T*`
// parameter. It carries what changes between replays of a graph (a position, a sequence
// length): the graph keeps the value's address, and the caller writes a new value there
// before each replay, so nothing is captured or instantiated again (graph_cache.hpp).
//
//   cudakit::DeviceValue<int> position(stream, 0);
//   launch(stream, attend, cfg, position.span(), keys, values, out);   // a `const int*` parameter
//   ...
//   position.set(stream, 17);       // stream-ordered: work submitted after it reads 17
//   cache.run(stream, batch, step);
//
// set() is a stream-ordered memset that carries the value itself (no host memory the
// device reads later), so the next set() may follow at once, without waiting for the
// device. It is tracked like a fill (DESIGN 5): a set() on one stream waits for earlier
// readers of the value on other streams, and their later reads wait for it. One memset
// for a value of 1, 2 or 4 bytes, two for 8 bytes.
//
// set() on a stream that a cudakit capture is capturing throws CaptureError: the graph
// would write that one value at every replay. Set the value before the run, outside the
// captured work; a graph that must advance the value itself does it with a kernel that
// writes span() (a `T*` parameter).
//
// Thread safety: as a DeviceBuffer (device_buffer.hpp): one thread sets it at a time.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cudakit/copy.hpp"
#include "cudakit/detail/capture_guard.hpp"
#include "cudakit/device_buffer.hpp"
#include "cudakit/device_span.hpp"
#include "cudakit/export.hpp"
#include "cudakit/memory_init.hpp"
#include "cudakit/stream.hpp"

namespace cudakit {

namespace detail {
[[noreturn]] CUDAKIT_API void throw_device_value_set_while_capturing(StreamRef stream);

/// Refuses a set() that a capture would freeze into its graph: one relaxed load while no
/// capture is in progress.
inline void refuse_device_value_set_while_capturing(StreamRef stream) {
  if (active_captures.load(std::memory_order_relaxed) == 0) [[likely]]
    return;
  if (StreamState* state = stream.state(); state != nullptr && state->marks.capture() != nullptr)
    throw_device_value_set_while_capturing(stream);
}
}  // namespace detail

/// One value of T in device memory (see above). Move-only, like the buffer it owns.
template <class T>
class DeviceValue {
  static_assert(std::is_trivially_copyable_v<T>, "a DeviceValue holds a trivially copyable type");
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8,
                "a DeviceValue is set with memsets: its type has 1, 2, 4 or 8 bytes (keep a larger struct in a "
                "DeviceBuffer and copy it from a PinnedBuffer)");

 public:
  /// An empty owner (what a moved-from one becomes): set() throws EmptyHandle.
  DeviceValue() = default;
  /// Allocates the value on `stream`'s device (stream-ordered) and sets it to `initial`.
  DeviceValue(StreamRef stream, const T& initial) : buffer_(stream, 1, uninitialized) { set(stream, initial); }

  /// Writes `value` (stream-ordered on `stream`, see above). Throws CaptureError on a
  /// capturing stream.
  void set(StreamRef stream, const T& value) {
    detail::refuse_device_value_set_while_capturing(stream);
    detail::DeviceBytes bytes = detail::device_bytes(buffer_.span());
    if (bytes.allocation == nullptr) [[unlikely]]
      throw EmptyHandle("DeviceValue::set: use of an empty DeviceValue (moved-from or default-constructed)");
    if constexpr (sizeof(T) <= 4) {
      std::uint32_t bits = 0;
      std::memcpy(&bits, &value, sizeof(T));
      detail::fill_device(stream, bytes, bits, static_cast<int>(sizeof(T)), "DeviceValue::set");
    } else {
      std::uint32_t words[2];
      std::memcpy(words, &value, sizeof(T));
      bytes.bytes = 4;
      detail::fill_device(stream, bytes, words[0], 4, "DeviceValue::set");
      bytes.pointer += 4;
      detail::fill_device(stream, bytes, words[1], 4, "DeviceValue::set");
    }
  }

  /// The value's memory, for kernel arguments and declared work: a `const T*` parameter
  /// reads it, a `T*` parameter writes it. EmptyHandle for a moved-from DeviceValue.
  DeviceSpan<T> span() { return buffer_.span(); }
  DeviceSpan<const T> span() const { return buffer_.span(); }

  /// The value now, read back after the work submitted to `stream` so far (blocking).
  T read(StreamRef stream) const { return download(stream, buffer_.span()).front(); }

  /// Whether the owner holds a value.
  explicit operator bool() const noexcept { return static_cast<bool>(buffer_); }

 private:
  DeviceBuffer<T> buffer_;
};

}  // namespace cudakit
