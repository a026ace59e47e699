// Streams (DESIGN invariants 1 and 3).
//
// Every stream cudakit creates is non-blocking (CU_STREAM_NON_BLOCKING): it never
// synchronizes with the legacy default stream, and cudakit never uses that stream. A
// StreamRef can therefore never be null: constructing one from 0 or nullptr does not
// compile, and an empty one (default-constructed or from a moved-from Stream) throws
// EmptyHandle when used instead of silently meaning "the legacy stream".
//
// A CUstream is also a cudaStream_t (the runtime API's type is the same pointer), so
// handle() goes straight to cuBLAS, CUB or PyTorch; see cudakit/interop/cccl.hpp for libcu++.
//
// Thread safety: submitting work to one stream from several threads is safe (the driver
// orders submissions). The owner is moved or destroyed by one thread at a time.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <type_traits>
#include <utility>

#include "cudakit/export.hpp"
#include "cudakit/context.hpp"
#include "cudakit/detail/stream_state.hpp"
#include "cudakit/event.hpp"

namespace cudakit {

class StreamRef;

namespace detail {
// Host callbacks: the driver calls `invoke` with a heap-held callable, which runs it,
// reports an exception through the parked-error channel, and frees it.
struct CUDAKIT_API HostCallback {
  virtual ~HostCallback() = default;
  virtual void run() = 0;
  CUstream stream = nullptr;
  int device = -1;
};
template <class F>
struct HostCallbackOf final : HostCallback {
  explicit HostCallbackOf(F&& f) : fn(std::move(f)) {}
  void run() override { fn(); }
  F fn;
};
// On a stream under a cudakit capture, the graph takes the callback and runs it at
// every launch (capture.hpp).
CUDAKIT_API void enqueue_host_callback(const StreamRef& stream, std::unique_ptr<HostCallback> callback);
}  // namespace detail

/// A non-owning view of a stream: handle, device ordinal and (for cudakit's streams) the
/// shared tracking state; trivially copyable, does not keep the stream alive. The calls
/// below throw EmptyHandle on an empty ref, ContextPoisoned on a poisoned device and
/// DriverError when the driver fails.
class CUDAKIT_API StreamRef {
 public:
  /// An empty ref (never the legacy stream).
  StreamRef() = default;
  StreamRef(std::nullptr_t) = delete;  // 0 or nullptr would mean the legacy stream
  StreamRef(int) = delete;
  /// A view of a raw stream created in device `device`'s primary context. The stream
  /// must be a real stream (never 0, CU_STREAM_LEGACY or CU_STREAM_PER_THREAD). A
  /// buffer used on a borrowed stream must be freed before that stream is destroyed.
  StreamRef(CUstream handle, int device) noexcept : handle_(handle), device_(device) {}
  /// Internal: a view of a cudakit stream with its tracking state.
  StreamRef(CUstream handle, int device, detail::StreamState* state) noexcept
      : handle_(handle), state_(state), device_(device), generation_(state ? detail::generation_of(state) : 0) {}

  /// The driver's handle (also a cudaStream_t); null for an empty ref.
  CUstream handle() const noexcept { return handle_; }
  /// Internal: the shared state trackers use (null for a ref built from a raw handle).
  detail::StreamState* state() const noexcept { return state_; }
  /// The device's ordinal (-1 when empty), and whether the ref has a handle.
  int device_ordinal() const noexcept { return device_; }
  explicit operator bool() const noexcept { return handle_ != nullptr; }
  /// Whether the Stream this ref views was destroyed (or released) since the ref was made:
  /// one load and a compare (Note [Stale stream refs] in detail/stream_state.hpp). False
  /// for a ref built from a raw handle, which cudakit cannot tell.
  bool stale() const noexcept { return state_ != nullptr && detail::generation_of(state_) != generation_; }

  /// True when all work submitted so far has completed; false while some has not.
  bool query() const;
  /// Blocks the calling thread until all work submitted so far has completed.
  /// A capturing stream cannot be queried or synchronized (CaptureError).
  void synchronize() const;
  /// Later work on this stream waits until `event` completes.
  void wait(EventRef event) const;
  /// Later work on this stream waits for the work submitted to `other` so far (one
  /// pooled event recorded on `other` and waited here). When `other` is capturing, this
  /// stream joins its capture (a fork); the capture joins it back when it ends.
  void wait(StreamRef other) const;
  /// The stream's priority (lower numbers run first).
  int priority() const;

  /// Runs `fn` on a driver thread once the work before it completes; later work waits
  /// for it. `fn` must not call CUDA. An exception it throws is caught and parked
  /// (error.hpp: drain_parked_errors), never lost and never fatal. On a stream a cudakit
  /// capture is capturing, the graph owns `fn` and runs it at every launch.
  template <class F>
  void host_callback(F&& fn) const {
    require_handle("cuLaunchHostFunc");
    using Fn = std::decay_t<F>;
    detail::enqueue_host_callback(*this, std::make_unique<detail::HostCallbackOf<Fn>>(Fn(std::forward<F>(fn))));
  }

  /// Throws EmptyHandle when this ref is empty (`call` names the attempted operation). In
  /// builds with assertions on (or CUDAKIT_CHECK_STREAM_REFS defined), also when its Stream
  /// was destroyed (stale()); release builds check that off the launch and tracking fast
  /// paths only (Note [Stale stream refs]).
  void require_handle(const char* call) const {
    if (handle_ == nullptr) [[unlikely]]
      throw_empty(call);
#if !defined(NDEBUG) || defined(CUDAKIT_CHECK_STREAM_REFS)
    require_live(call);
#endif
  }
  /// Throws EmptyHandle when this ref's Stream was destroyed or released (stale()).
  void require_live(const char* call) const {
    if (stale()) [[unlikely]]
      throw_destroyed(call);
  }

  /// Same handle.
  friend bool operator==(const StreamRef& a, const StreamRef& b) noexcept { return a.handle_ == b.handle_; }

 private:
  [[noreturn]] static void throw_empty(const char* call);
  [[noreturn]] void throw_destroyed(const char* call) const;
  CUstream handle_ = nullptr;
  detail::StreamState* state_ = nullptr;
  int device_ = -1;
  std::uint32_t generation_ = 0;  // of state_'s slot when the ref was made (stale())
};
static_assert(sizeof(StreamRef) == 2 * sizeof(void*) + 2 * sizeof(std::uint32_t), "a StreamRef stays three words");

/// Owns a non-blocking stream (cuStreamCreateWithPriority), destroyed with the owner; a
/// failed destroy is parked. Move-only. The calls are StreamRef's, and throw as they do.
class CUDAKIT_API Stream {
 public:
  /// A new non-blocking stream in `context` with `priority` (0 is the default, the
  /// least urgent; see ContextRef::stream_priority_range()). A priority outside the
  /// range throws InvalidArgument naming the range.
  explicit Stream(ContextRef context, int priority = 0);
  /// The same in the device's primary context. Both throw DriverError when creation fails.
  explicit Stream(Device device, int priority = 0);

  /// Destroying a Stream does not wait for its work, unless a buffer still remembers
  /// the stream for ordering (then it synchronizes first, so that buffer's later free
  /// or hand-off is still ordered after the stream's work).

  /// Takes ownership of a raw stream (created in device `device`'s primary context);
  /// the Stream destroys it. It must be non-blocking, or cudakit's no-legacy-stream
  /// promise does not hold for it; adopt() checks and throws InvalidArgument otherwise.
  static Stream adopt(CUstream handle, int device);

  /// An empty owner (what a moved-from one becomes): calls that need the stream throw
  /// EmptyHandle.
  Stream() = default;
  Stream(Stream&& other) noexcept : ref_(std::exchange(other.ref_, {})) {}
  Stream& operator=(Stream&& other) noexcept {
    if (this != &other) {
      reset();
      ref_ = std::exchange(other.ref_, {});
    }
    return *this;
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() { reset(); }

  /// A non-owning view, valid while this owner lives.
  StreamRef ref() const noexcept { return ref_; }
  operator StreamRef() const noexcept { return ref_; }
  /// The driver's handle (null when empty), the device's ordinal (-1 when empty), and
  /// whether the owner holds a stream.
  CUstream handle() const noexcept { return ref_.handle(); }
  int device_ordinal() const noexcept { return ref_.device_ordinal(); }
  explicit operator bool() const noexcept { return static_cast<bool>(ref_); }
  /// Gives up ownership: the caller destroys the returned stream. Buffers that still
  /// remember the stream treat it as borrowed from then on.
  CUstream release() noexcept {
    StreamRef ref = std::exchange(ref_, {});
    if (detail::StreamState* state = ref.state()) {
      detail::end_generation(state);  // refs made from this owner would dangle: stale now
      detail::release(state);
    }
    return ref.handle();
  }

  /// StreamRef's query, synchronize, wait, priority and host_callback on this stream.
  bool query() const { return ref_.query(); }
  void synchronize() const { ref_.synchronize(); }
  void wait(EventRef event) const { ref_.wait(event); }
  void wait(StreamRef other) const { ref_.wait(other); }
  int priority() const { return ref_.priority(); }
  template <class F>
  void host_callback(F&& fn) const {
    ref_.host_callback(std::forward<F>(fn));
  }

 private:
  Stream(CUstream handle, int device, detail::StreamState* state) noexcept;
  Stream(std::unique_ptr<detail::StreamState> state, ContextRef context, int priority);
  void reset() noexcept;
  StreamRef ref_;
};

}  // namespace cudakit
