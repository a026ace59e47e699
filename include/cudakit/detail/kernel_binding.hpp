// Internal: how a launch argument binds to a kernel parameter.
//
// A pointer parameter takes a buffer, a view or a raw device pointer of the same element
// type; its constness decides the access tracking records (DESIGN 5):
//   T*        DeviceBuffer<T>& (non-const), DeviceSpan<T>, T*          -> write
//   const T*  DeviceBuffer<T> (any), DeviceSpan<T>, DeviceSpan<const T>,
//             T*, const T*                                             -> read
// A raw pointer is passed as it is and is not tracked (the caller orders it). A value
// parameter takes a value that converts without loss: the same type, or an arithmetic
// conversion that is not narrowing (float -> double and int -> long long bind;
// double -> float, float -> int, int -> float and int -> unsigned do not).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "cudakit/device_buffer.hpp"
#include "cudakit/device_span.hpp"
#include "cudakit/growable_buffer.hpp"
#include "cudakit/managed_buffer.hpp"

namespace cudakit::detail {

template <class T>
struct is_device_buffer : std::false_type {};
template <class T>
struct is_device_buffer<DeviceBuffer<T>> : std::true_type {};
template <class T>
struct is_device_buffer<GrowableBuffer<T>> : std::true_type {};
template <class T>
struct is_device_buffer<ManagedBuffer<T>> : std::true_type {};
template <class T>
struct is_device_span : std::false_type {};
template <class T>
struct is_device_span<DeviceSpan<T>> : std::true_type {};

template <class T>
inline constexpr bool is_buffer_like_v =
    is_device_buffer<std::remove_cvref_t<T>>::value || is_device_span<std::remove_cvref_t<T>>::value;

enum class Binding : std::uint8_t {
  // bindable
  value,
  buffer_read,
  buffer_write,
  raw_pointer,
  null_pointer,
  // not bindable, each for its own message
  read_only_to_writable,
  wrong_element_type,
  value_to_pointer,
  buffer_to_value,
  narrowing,
  not_convertible,
};

template <class Param, class Arg>
consteval Binding binding() {
  using A = std::remove_cvref_t<Arg>;
  if constexpr (std::is_pointer_v<Param>) {
    using U = std::remove_pointer_t<Param>;
    using Element = std::remove_cv_t<U>;
    constexpr bool writable = !std::is_const_v<U>;
    if constexpr (is_device_buffer<A>::value) {
      constexpr bool read_only = std::is_const_v<std::remove_reference_t<Arg>>;
      if constexpr (!std::is_same_v<typename A::value_type, Element>) return Binding::wrong_element_type;
      else if constexpr (writable && read_only) return Binding::read_only_to_writable;
      else return writable ? Binding::buffer_write : Binding::buffer_read;
    } else if constexpr (is_device_span<A>::value) {
      using E = typename A::element_type;
      if constexpr (!std::is_same_v<std::remove_cv_t<E>, Element>) return Binding::wrong_element_type;
      else if constexpr (writable && std::is_const_v<E>) return Binding::read_only_to_writable;
      else return writable ? Binding::buffer_write : Binding::buffer_read;
    } else if constexpr (std::is_same_v<A, std::nullptr_t>) {
      return Binding::null_pointer;
    } else if constexpr (std::is_pointer_v<A>) {
      using V = std::remove_pointer_t<A>;
      if constexpr (!std::is_same_v<std::remove_cv_t<V>, Element>) return Binding::wrong_element_type;
      else if constexpr (writable && std::is_const_v<V>) return Binding::read_only_to_writable;
      else return Binding::raw_pointer;
    } else {
      return Binding::value_to_pointer;
    }
  } else {
    if constexpr (is_buffer_like_v<A>) {
      return Binding::buffer_to_value;
    } else if constexpr (std::is_same_v<A, Param>) {
      return Binding::value;
    } else if constexpr (std::is_arithmetic_v<A> && std::is_arithmetic_v<Param>) {
      // List-initialization refuses exactly the narrowing conversions.
      if constexpr (requires { Param{std::declval<A>()}; }) return Binding::value;
      else return Binding::narrowing;
    } else if constexpr (std::is_class_v<Param> && std::is_convertible_v<Arg, Param> &&
                         requires { Param{std::declval<Arg>()}; }) {
      return Binding::value;
    } else {
      return Binding::not_convertible;
    }
  }
}

constexpr bool bindable(Binding b) noexcept { return b <= Binding::null_pointer; }
constexpr bool is_buffer_binding(Binding b) noexcept { return b == Binding::buffer_read || b == Binding::buffer_write; }

/// Compile-time errors, one per way an argument can fail to bind. The instantiation names
/// the argument's position (1-based), the parameter type and the argument type.
template <std::size_t Position, class Param, class Arg>
constexpr bool check_argument() {
  constexpr Binding b = binding<Param, Arg>();
  static_assert(b != Binding::read_only_to_writable,
                "launch: a read-only buffer (const DeviceBuffer<T>&, DeviceSpan<const T> or const T*) is passed "
                "where the kernel writes (a T* parameter)");
  static_assert(b != Binding::wrong_element_type,
                "launch: a buffer or pointer of another element type is passed to a pointer parameter");
  static_assert(b != Binding::value_to_pointer,
                "launch: a value is passed where the kernel takes a pointer (pass a DeviceBuffer, a DeviceSpan or a "
                "device pointer)");
  static_assert(b != Binding::buffer_to_value, "launch: a buffer is passed where the kernel takes a value");
  static_assert(b != Binding::narrowing,
                "launch: the argument converts to the parameter's type only with a possible loss (double->float, "
                "float->int, int->float, 64->32 bits, signed<->unsigned): convert it explicitly");
  static_assert(b != Binding::not_convertible, "launch: the argument does not convert to the parameter's type");
  return bindable(b);
}

/// The argument as the kernel's parameter. `Arg` keeps the caller's constness: a const
/// buffer hands out only a read-only pointer. A moved-from buffer throws EmptyHandle.
template <Binding B, class Param, class Arg>
Param bind_argument(Arg& arg) {
  if constexpr (is_buffer_binding(B)) return static_cast<Param>(arg.data());
  else if constexpr (B == Binding::raw_pointer) return static_cast<Param>(arg);
  else if constexpr (B == Binding::null_pointer) return nullptr;
  else return Param{arg};
}

/// The parameter type an untyped launch derives from an argument: the buffer's pointer
/// (const for a read-only buffer or view), or the value's own type.
template <class Arg, class A = std::remove_cvref_t<Arg>>
struct untyped_parameter {
  using type = A;
};
template <class Arg, class T>
struct untyped_parameter<Arg, DeviceBuffer<T>> {
  using type = std::conditional_t<std::is_const_v<std::remove_reference_t<Arg>>, const T*, T*>;
};
template <class Arg, class T>
struct untyped_parameter<Arg, GrowableBuffer<T>> {
  using type = std::conditional_t<std::is_const_v<std::remove_reference_t<Arg>>, const T*, T*>;
};
template <class Arg, class T>
struct untyped_parameter<Arg, ManagedBuffer<T>> {
  using type = std::conditional_t<std::is_const_v<std::remove_reference_t<Arg>>, const T*, T*>;
};
template <class Arg, class T>
struct untyped_parameter<Arg, DeviceSpan<T>> {
  using type = T*;
};
template <class Arg>
using untyped_parameter_t = typename untyped_parameter<Arg>::type;

}  // namespace cudakit::detail
