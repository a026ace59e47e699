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
// thread captures is refused (DESIGN 9), as for launches. Inside ManualOrdering nothing is
// ordered, as for launches; a capture still keeps the declared buffers.
//
// What can be declared: DeviceBuffer, DeviceSpan, PinnedBuffer and HostRegistration, any
// number of each, of any element types, in one call (reads() and writes() may also be
// empty). A buffer on another device than the stream's is ordered the same way: the wait
// is an event recorded on that device's stream, which a stream of any device can wait on.
// Reaching its memory from the work is the work's business (peer access for a kernel,
// cuMemcpyPeerAsync for a copy). An empty (moved-from) buffer declares nothing.
//
// What is declared is what is ordered: a pointer the callable uses but nobody declared
// is the caller's to order (ManualOrdering, events). A read-only buffer or view
// (`const DeviceBuffer<T>&`, `const PinnedBuffer<T>&`, `DeviceSpan<const T>`) can only
// be declared as read: passing one to writes() does not compile. A DeviceSpan<T> is a
// view like std::span: its own constness does not make its elements read-only, so a
// `const DeviceSpan<T>&` may be written, as a typed launch's `T*` parameter accepts it.
//
// The callable receives the stream's handle (a CUstream, which is also a cudaStream_t) or
// the StreamRef, whichever it accepts; its result is returned and its exceptions
// propagate. The declarations take effect before the callable runs: if it throws, the
// streams were ordered for work that may not have been submitted, which costs at most a
// needless wait later, never a missing one.
//
// The context of the stream's device (its primary context, the runtime API's) is current
// while the callable runs. The callable must leave it current: the libraries do; after a
// cudaSetDevice to another device inside it, call forget_cached_current_context().
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

#include "cudakit/error.hpp"
#include "cudakit/export.hpp"
#include "cudakit/detail/capture_guard.hpp"
#include "cudakit/detail/allocation.hpp"
#include "cudakit/device_span.hpp"
#include "cudakit/stream.hpp"
#include "cudakit/tracking.hpp"

namespace cudakit {

namespace detail {

/// A buffer, view, pinned buffer or host registration that declared work may name: it
/// exposes its allocation (null for an empty one).
template <class B>
concept declarable = requires(const B& b) {
  { b.allocation() } -> std::convertible_to<Allocation*>;
};

/// Whether the work may write through `B` (an argument type as writes() receives it): an
/// owner (buffer, pinned buffer, registration) unless it is const; a view unless its
/// elements are const, whatever the view's own constness (as for typed launches).
template <class B, class Plain = std::remove_cvref_t<B>>
inline constexpr bool writable_declaration_v = !std::is_const_v<std::remove_reference_t<B>>;
template <class B, class T>
inline constexpr bool writable_declaration_v<B, DeviceSpan<T>> = !std::is_const_v<T>;

/// One declared buffer: its allocation and how the work touches it.
struct CUDAKIT_API DeclaredUse {
  Allocation* allocation = nullptr;
  Access access = Access::read;
};

/// Checks the stream, its device and the capturing thread, then orders every declared
/// use on `stream` (DESIGN 5): each buffer hears of the access before the work is
/// submitted. A buffer on another device (peer memory) is ordered the same way: the wait
/// is an event recorded on that device's stream, which cuStreamWaitEvent accepts across
/// devices. No context is made current after.
inline void order_declared_uses(const StreamRef& stream, const DeclaredUse* uses, std::size_t count) {
  stream.require_handle("declared work");
  check_not_poisoned("declared work", Resource::of(ResourceKind::stream, stream.handle(), stream.device_ordinal()));
  check_capturing_thread(stream.state(), "declared work");  // DESIGN 9
  for (std::size_t i = 0; i < count; ++i) uses[i].allocation->use(stream, uses[i].access);
}

/// Orders every declared use on `stream` (order_declared_uses), then makes the context of
/// the stream's device current: last, since ordering a peer buffer may have made its
/// device's context current, and the work may use the runtime API. Out of line: declared
/// work is not a per-element hot path.
CUDAKIT_API void declare_uses(const StreamRef& stream, const DeclaredUse* uses, std::size_t count);

/// The profiler's range "declared work" (NVTX, domain "cudakit") from construction to
/// destruction, on this thread.
class CUDAKIT_API DeclaredWorkRange {
 public:
  DeclaredWorkRange() noexcept;
  ~DeclaredWorkRange();
  DeclaredWorkRange(const DeclaredWorkRange&) = delete;
  DeclaredWorkRange& operator=(const DeclaredWorkRange&) = delete;
};

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

namespace detail {
/// The allocation a declaration names; EmptyHandle for a moved-from DeviceBuffer.
template <class B>
Allocation* declared_allocation(const B& buffer) {
  if constexpr (requires { buffer.require_not_moved_from(); }) buffer.require_not_moved_from();
  return buffer.allocation();
}
}  // namespace detail

/// Declares buffers, views, pinned buffers or host registrations the work only reads.
/// Throws EmptyHandle for a moved-from DeviceBuffer.
template <detail::declarable... B>
Reads<sizeof...(B)> reads(const B&... buffers) {
  return {{detail::declared_allocation(buffers)...}};
}

/// Declares buffers, views, pinned buffers or host registrations the work writes (or reads
/// and writes). A const owner or a view of const elements does not satisfy the constraint:
/// it can only be declared with reads(). Throws EmptyHandle for a moved-from DeviceBuffer.
template <class... B>
  requires((detail::declarable<std::remove_cvref_t<B>> && detail::writable_declaration_v<B>) && ...)
Writes<sizeof...(B)> writes(B&&... buffers) {
  return {{detail::declared_allocation(buffers)...}};
}

namespace detail {
/// The uses a Reads and a Writes declare, writes first: a buffer declared both ways is
/// then ordered once, as a write, and its read finds it on the stream already. Empty
/// buffers (null allocations) are left out.
template <std::size_t R, std::size_t W>
struct DeclaredUses {
  std::array<DeclaredUse, R + W + 1> uses{};  // +1: no zero-length array
  std::size_t count = 0;
};
template <std::size_t R, std::size_t W>
DeclaredUses<R, W> declared_uses(const Reads<R>& read, const Writes<W>& write) noexcept {
  DeclaredUses<R, W> d;
  for (Allocation* a : write.allocations)
    if (a != nullptr) d.uses[d.count++] = {a, Access::write};
  for (Allocation* a : read.allocations)
    if (a != nullptr) d.uses[d.count++] = {a, Access::read};
  return d;
}
}  // namespace detail

/// Orders the declared buffers on `stream`, then runs `work` with the stream (as a
/// CUstream where it accepts one, else as the StreamRef) and returns what it returns.
/// Throws EmptyHandle for an empty stream, ContextPoisoned on a poisoned device and
/// CaptureError when another thread captures the stream; the context of the stream's
/// device is current on this thread while `work` runs.
template <std::size_t R, std::size_t W, class F>
decltype(auto) enqueue(StreamRef stream, const Reads<R>& read, const Writes<W>& write, F&& work) {
  detail::DeclaredWorkRange range;
  const auto declared = detail::declared_uses(read, write);
  detail::declare_uses(stream, declared.uses.data(), declared.count);
  static_assert(std::is_invocable_v<F, CUstream> || std::is_invocable_v<F, StreamRef>,
                "enqueue: the work is called with the stream, as a CUstream (cudaStream_t) or a StreamRef");
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
