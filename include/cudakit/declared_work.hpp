// Declared work: code that takes raw device pointers and a stream (cuBLAS, cuDNN, CUB,
// Thrust, NCCL, a runtime-API `<<<>>>` kernel, a hand-written driver call) states which
// cudakit buffers and views it reads and which it writes, then runs on a cudakit stream.
//
//   cudakit::enqueue(stream, cudakit::reads(a, b), cudakit::writes(c), [&](CUstream s) {
//     cublasSetStream(handle, s);
//     cublasSgemm(handle, ..., a.data(), ..., b.data(), ..., c.data(), ...);
//   });
//
// The declared buffers are ordered exactly as a typed launch orders its pointer arguments
// (DESIGN 5): nothing while each stays on one stream; one pooled event and one wait where
// streams meet. Inside a capture the graph keeps every declared buffer alive and a replay
// updates their tracking (DESIGN 6). Work that another thread submits to a stream this
// thread captures is refused (DESIGN 9), as for launches.
//
// What is declared is what is ordered: a pointer the callable uses but nobody declared
// is the caller's to order (ManualOrdering, events). A read-only buffer or view
// (`const DeviceBuffer<T>&`, `DeviceSpan<const T>`) can only be declared as read: passing
// one to writes() does not compile.
//
// The callable receives the stream's handle (a CUstream, which is also a cudaStream_t) or
// the StreamRef, whichever it accepts; its result is returned and its exceptions
// propagate. The declarations take effect before the callable runs: if it throws, the
// streams were ordered for work that may not have been submitted, which costs at most a
// needless wait later, never a missing one.
//
// Thread safety: as for launches. Submit from any thread; mutating one buffer from two
// threads at once is the caller's race, as with a standard container.
#pragma once

#include <cuda.h>

#include <array>
#include <concepts>
#include <cstddef>
#include <type_traits>
#include <utility>

#include "cudakit/export.hpp"
#include "cudakit/detail/allocation.hpp"
#include "cudakit/stream.hpp"
#include "cudakit/tracking.hpp"

namespace cudakit {

namespace detail {

/// A buffer, view or pinned buffer that declared work may name: it exposes its allocation
/// (null for an empty one).
template <class B>
concept declarable = requires(const B& b) {
  { b.allocation() } -> std::convertible_to<Allocation*>;
};

/// Whether the work may write through `B`: not through a const object, nor through a view
/// of const elements.
template <class B>
inline constexpr bool writable_declaration_v = !std::is_const_v<std::remove_reference_t<B>>;
template <template <class> class View, class T>
inline constexpr bool writable_declaration_v<View<const T>> = false;
template <template <class> class View, class T>
inline constexpr bool writable_declaration_v<View<const T>&> = false;

/// One declared buffer: its allocation and how the work touches it.
struct CUDAKIT_API DeclaredUse {
  Allocation* allocation = nullptr;
  Access access = Access::read;
};

/// Orders every declared use on `stream` (checks the stream, the device and the capturing
/// thread first). Out of line: declared work is not a per-element hot path.
CUDAKIT_API void declare_uses(StreamRef stream, const DeclaredUse* uses, std::size_t count);

}  // namespace detail

/// The buffers a piece of declared work reads (reads(a, b, ...)).
template <std::size_t N>
struct Reads {
  std::array<detail::Allocation*, N> allocations;
};

/// The buffers a piece of declared work writes (writes(c, ...)). A write also orders after
/// earlier readers, as a typed launch's `T*` parameter does.
template <std::size_t N>
struct Writes {
  std::array<detail::Allocation*, N> allocations;
};

/// Declares buffers, views or pinned buffers the work only reads.
template <detail::declarable... B>
Reads<sizeof...(B)> reads(const B&... buffers) noexcept {
  return {{buffers.allocation()...}};
}

/// Declares buffers, views or pinned buffers the work writes (or reads and writes).
/// A const buffer or a view of const elements does not satisfy the constraint: it can only
/// be declared with reads().
template <class... B>
  requires((detail::declarable<std::remove_cvref_t<B>> && detail::writable_declaration_v<B>) && ...)
Writes<sizeof...(B)> writes(B&&... buffers) noexcept {
  return {{buffers.allocation()...}};
}

/// Orders the declared buffers on `stream`, then runs `work` with the stream (as a
/// CUstream where it accepts one, else as the StreamRef) and returns what it returns.
/// Throws EmptyHandle for an empty stream, ContextPoisoned on a poisoned device and
/// CaptureError when another thread captures the stream; the context of the stream's
/// device is current on this thread while `work` runs.
template <std::size_t R, std::size_t W, class F>
decltype(auto) enqueue(StreamRef stream, const Reads<R>& read, const Writes<W>& write, F&& work) {
  std::array<detail::DeclaredUse, R + W + 1> uses{};  // +1: no zero-length array
  std::size_t n = 0;
  for (detail::Allocation* a : read.allocations)
    if (a != nullptr) uses[n++] = {a, Access::read};
  for (detail::Allocation* a : write.allocations)
    if (a != nullptr) uses[n++] = {a, Access::write};
  detail::declare_uses(stream, uses.data(), n);
  if constexpr (std::is_invocable_v<F, CUstream>)
    return std::forward<F>(work)(stream.handle());
  else
    return std::forward<F>(work)(stream);
}

/// Declared work that only reads.
template <std::size_t R, class F>
decltype(auto) enqueue(StreamRef stream, const Reads<R>& read, F&& work) {
  return enqueue(stream, read, Writes<0>{}, std::forward<F>(work));
}

/// Declared work that only writes.
template <std::size_t W, class F>
decltype(auto) enqueue(StreamRef stream, const Writes<W>& write, F&& work) {
  return enqueue(stream, Reads<0>{}, write, std::forward<F>(work));
}

}  // namespace cudakit
