// Contexts: the device's primary context, retained by RAII.
//
// cudakit uses primary contexts only: the one context per device that the runtime API
// (and so PyTorch, CuPy, cuBLAS) also uses, which makes interop free. A Context owner
// holds one retain; a ContextRef is a non-owning, trivially copyable view.
//
// The current context is cached per thread (DESIGN 8): make_current() issues
// cuCtxSetCurrent only when this thread's current context differs from the cached one.
// Code that changes the current context behind cudakit's back (cuCtxSetCurrent,
// cudaSetDevice to another device) must call forget_cached_current_context() after.
//
// Thread safety: a ContextRef may be used from any thread; an owner may be moved or
// destroyed by one thread at a time, like any object.
#pragma once

#include <cuda.h>

#include <utility>

#include "cudakit/export.hpp"
#include "cudakit/device.hpp"

namespace cudakit {

namespace detail {
// Constant-initialized, so that reading it is a plain thread-local load: without
// constinit, every reader in another file calls the variable's initialization wrapper.
CUDAKIT_API extern thread_local constinit CUcontext cached_current_context;
CUDAKIT_API void set_current_context_slow(CUcontext context, int device);
}  // namespace detail

/// Forgets this thread's cached current context, so the next make_current() asks the
/// driver. Call it after changing the current context outside cudakit.
inline void forget_cached_current_context() noexcept { detail::cached_current_context = nullptr; }

/// A non-owning view of a context: a handle and its device's ordinal, trivially
/// copyable. It does not keep the context alive.
class CUDAKIT_API ContextRef {
 public:
  /// An empty ref: every call but handle(), device_ordinal() and operator bool throws
  /// EmptyHandle.
  ContextRef() = default;
  /// Views `handle`, a context of device `device` (nothing is checked or retained).
  ContextRef(CUcontext handle, int device) noexcept : handle_(handle), device_(device) {}

  /// The driver's handle; null for an empty ref.
  CUcontext handle() const noexcept { return handle_; }
  /// The device's ordinal; -1 for an empty ref.
  int device_ordinal() const noexcept { return device_; }
  /// The device (Device::get: throws InvalidArgument for an empty ref's -1).
  Device device() const { return Device::get(device_); }
  /// Whether the ref has a handle.
  explicit operator bool() const noexcept { return handle_ != nullptr; }

  /// Makes this context current on the calling thread (no driver call when it already is).
  /// An empty ref throws EmptyHandle, also when no context is current yet.
  void make_current() const {
    if (detail::cached_current_context != handle_ || handle_ == nullptr) [[unlikely]]
      detail::set_current_context_slow(handle_, device_);
  }

  /// Blocks until all work in this context completed (cuCtxSynchronize). Throws
  /// CaptureError while any stream capture is in progress in the process (the driver
  /// would invalidate it), DriverError when the work failed.
  void synchronize() const;

  /// The stream priority range: {least, greatest}. Numerically, greatest <= least
  /// (for example {0, -5}); lower numbers run first.
  std::pair<int, int> stream_priority_range() const;

  /// Same handle.
  friend bool operator==(const ContextRef& a, const ContextRef& b) noexcept { return a.handle_ == b.handle_; }

 private:
  CUcontext handle_ = nullptr;
  int device_ = -1;
};

/// Owns one retain of a device's primary context, released (cuDevicePrimaryCtxRelease)
/// when destroyed; a failed release is parked. Move-only.
class CUDAKIT_API Context {
 public:
  /// Retains the device's primary context (cuDevicePrimaryCtxRetain); throws DriverError.
  static Context primary(Device device);
  /// The same by ordinal (Device::get throws InvalidArgument for an ordinal out of range).
  static Context primary(int ordinal) { return primary(Device::get(ordinal)); }

  /// An empty owner (what a moved-from one becomes): calls other than ref(), handle(),
  /// device_ordinal() and operator bool throw EmptyHandle.
  Context() = default;
  Context(Context&& other) noexcept : ref_(std::exchange(other.ref_, {})) {}
  Context& operator=(Context&& other) noexcept {
    if (this != &other) {
      reset();
      ref_ = std::exchange(other.ref_, {});
    }
    return *this;
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context() { reset(); }

  /// Another retain of the same primary context.
  Context clone() const;

  /// A non-owning view, valid while this owner (or another retain) lives.
  ContextRef ref() const noexcept { return ref_; }
  operator ContextRef() const noexcept { return ref_; }
  /// The driver's handle (null when empty), the device's ordinal (-1 when empty), and
  /// whether the owner holds a context.
  CUcontext handle() const noexcept { return ref_.handle(); }
  int device_ordinal() const noexcept { return ref_.device_ordinal(); }
  explicit operator bool() const noexcept { return static_cast<bool>(ref_); }

  /// ContextRef::make_current and synchronize; an empty owner throws EmptyHandle.
  void make_current() const { checked_ref().make_current(); }
  void synchronize() const { checked_ref().synchronize(); }

 private:
  explicit Context(ContextRef ref) : ref_(ref) {}
  ContextRef checked_ref() const;
  void reset() noexcept;
  ContextRef ref_;
};

}  // namespace cudakit
