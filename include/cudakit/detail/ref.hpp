// Internal: Ref<T>, one counted reference to an object that carries its own count (an
// intrusive count: no control block, no allocation to share an object).
//
// The object's type supplies the count through two functions found by argument-dependent
// lookup, declared beside the type (so a Ref to a type that is only declared works):
//
//   void retain(T* p) noexcept;    // one more reference (relaxed: nothing to publish)
//   void release(T* p) noexcept;   // one less; the last frees the object (acq_rel)
//
// A second template argument names other counting functions, for a type that counts two
// kinds of reference (a stream's tracker slots: TrackerRef, stream_state.hpp).
//
// A Ref is constructed either by retaining a pointer, `Ref<T>(p)`, which takes a new
// reference, or by adopting one, `Ref<T>(p, adopt)`, which takes over a reference the
// caller holds (a new object's first, or one given back by detach()). A move costs what
// moving a pointer costs: no count changes. detach() hands the reference out as a raw
// pointer, for the few places where it crosses a boundary that takes a `void*` (a host
// function the driver calls); the receiver adopts it back.
#pragma once

#include <cstddef>
#include <utility>

namespace cudakit::detail {

/// Tag: the Ref takes over the caller's reference instead of retaining a new one.
struct Adopt {
  explicit Adopt() = default;
};
inline constexpr Adopt adopt{};

/// The default counting functions: retain(p) and release(p), by argument-dependent lookup.
struct RefCounting {
  template <class T>
  static void retain_one(T* p) noexcept {
    retain(p);
  }
  template <class T>
  static void release_one(T* p) noexcept {
    release(p);
  }
};

template <class T, class Counting = RefCounting>
class Ref {
 public:
  Ref() noexcept = default;
  Ref(std::nullptr_t) noexcept {}  // NOLINT: a null Ref converts from nullptr
  /// Takes a new reference to `p` (null: an empty Ref).
  explicit Ref(T* p) noexcept : p_(p) {
    if (p_ != nullptr) Counting::retain_one(p_);
  }
  /// Takes over the reference the caller holds to `p`.
  Ref(T* p, Adopt) noexcept : p_(p) {}

  Ref(const Ref& other) noexcept : Ref(other.p_) {}
  Ref(Ref&& other) noexcept : p_(std::exchange(other.p_, nullptr)) {}
  Ref& operator=(const Ref& other) noexcept {
    Ref(other).swap(*this);  // retained before the old one goes: self-assignment is safe
    return *this;
  }
  Ref& operator=(Ref&& other) noexcept {
    Ref(std::move(other)).swap(*this);
    return *this;
  }
  ~Ref() {
    if (p_ != nullptr) Counting::release_one(p_);
  }

  /// Drops the reference now; the Ref is empty after.
  void reset() noexcept { Ref().swap(*this); }
  /// Hands the reference to the caller as a raw pointer, which must reach Ref(p, adopt)
  /// exactly once; the Ref is empty after.
  [[nodiscard]] T* detach() noexcept { return std::exchange(p_, nullptr); }
  void swap(Ref& other) noexcept { std::swap(p_, other.p_); }

  T* get() const noexcept { return p_; }
  T& operator*() const noexcept { return *p_; }
  T* operator->() const noexcept { return p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }

  friend bool operator==(const Ref& a, const Ref& b) noexcept { return a.p_ == b.p_; }
  friend bool operator==(const Ref& a, const T* b) noexcept { return a.p_ == b; }
  friend bool operator==(const Ref& a, std::nullptr_t) noexcept { return a.p_ == nullptr; }

 private:
  T* p_ = nullptr;
};

/// A new object whose count starts at one, adopted: `make_ref<GraphResources>(device)`.
template <class T, class... Args>
Ref<T> make_ref(Args&&... args) {
  return Ref<T>(new T(std::forward<Args>(args)...), adopt);
}

}  // namespace cudakit::detail
