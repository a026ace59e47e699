// Kernels: handles to a function in a loaded Module or Library.
//
//   Function f = module.function("saxpy");                              // untyped
//   Kernel<void(float, const float*, float*, int)> k =
//       module.kernel<void(float, const float*, float*, int)>("saxpy");  // typed
//
// A typed Kernel<void(Params...)> states the kernel's parameter list in C++: launch()
// checks every argument against it at compile time, and the constness of each pointer
// parameter tells buffer tracking whether the launch reads (`const T*`) or writes (`T*`)
// the buffer passed there (DESIGN 5). Looking a typed kernel up also checks that the
// kernel has as many parameters, of the same sizes and offsets, as the signature says:
// against the layout its image states (a cubin's .nv.info records), else against the
// declared parameters as the driver describes them (CUDA 12.4+, cuFuncGetParamInfo; never
// asked past them, so a signature with too few parameters passes there: docs/launch.md).
//
// A Function is untyped: launches with it are checked at run time against the kernel's
// parameters (count and sizes), from its image or the driver (CUDA 12.4); where neither
// can say, they are refused.
//
// Handles are cheap to copy (one shared reference), keep their Module or Library loaded,
// and are used from any number of threads at once: the lookup and every cache behind it
// are thread-safe, and a launch takes no lock.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "cudakit/export.hpp"
#include "cudakit/detail/function_state.hpp"

namespace cudakit {

/// A kernel of a loaded module or library, untyped: launched with a KernelArgs list.
/// A shared handle: copies are cheap, and each keeps its module or library loaded.
/// Calls that need the kernel throw EmptyHandle on an empty one.
class CUDAKIT_API Function {
 public:
  /// An empty handle.
  Function() = default;
  /// Internal: a handle to `state`, which its module or library keeps (and this keeps them).
  explicit Function(std::shared_ptr<detail::FunctionState> state) noexcept : state_(std::move(state)) {}

  /// Whether the handle names a kernel.
  explicit operator bool() const noexcept { return state_ != nullptr; }

  /// The name the driver knows (mangled for C++ kernels).
  const std::string& name() const { return state().name; }
  /// The raw CUfunction (valid while this handle lives).
  CUfunction handle() const noexcept { return state_ ? state_->function : nullptr; }
  /// The device the kernel was loaded for (-1 when empty).
  int device_ordinal() const noexcept { return state_ ? state_->device : -1; }

  /// Any CUfunction_attribute, asked of the driver (a driver call each time; DriverError).
  int attribute(CUfunction_attribute attribute) const;
  /// The most threads a block of this kernel can have (its register use may make it fewer
  /// than the device's limit).
  int max_threads_per_block() const { return static_cast<int>(state().kernel_max_threads); }
  /// Static shared memory per block (`__shared__` arrays), in bytes.
  int static_shared_memory_bytes() const { return static_cast<int>(state().static_shared); }
  /// The kernel's parameters (offsets and sizes): from its image, else from the driver.
  /// Throws FeatureUnavailable where neither can say (drivers before CUDA 12.4).
  std::span<const ParameterInfo> parameters() const { return detail::parameters_of(state()); }

  /// Internal: the shared state; throws EmptyHandle for an empty handle.
  detail::FunctionState& state() const {
    if (state_ == nullptr) [[unlikely]]
      throw_empty();
    return *state_;
  }

  /// Same CUfunction.
  friend bool operator==(const Function& a, const Function& b) noexcept { return a.handle() == b.handle(); }

 private:
  [[noreturn]] static void throw_empty();
  std::shared_ptr<detail::FunctionState> state_;
};

namespace detail {

template <class T>
std::string_view type_name() {
  // The signature text from the compiler, for messages: "void(float, const float*)".
  std::string_view s = __PRETTY_FUNCTION__;
  std::size_t from = s.find("T =");
  std::size_t skip = 3;
  if (from == std::string_view::npos) from = s.find("T="), skip = 2;
  if (from == std::string_view::npos) return "the kernel's signature";
  from += skip;
  while (from < s.size() && s[from] == ' ') ++from;
  std::size_t to = s.find_first_of(";]", from);
  return s.substr(from, to == std::string_view::npos ? std::string_view::npos : to - from);
}

template <class T>
inline constexpr bool is_kernel_parameter_v =
    !std::is_reference_v<T> && !std::is_array_v<T> && !std::is_void_v<T> && std::is_trivially_copyable_v<T>;

/// Checks a typed lookup against the kernel's parameter info where the driver has it:
/// the same count, sizes and offsets. Throws InvalidArgument naming both.
CUDAKIT_API void check_signature(FunctionState& state, std::string_view signature, std::span<const std::size_t> sizes,
                     std::span<const std::size_t> alignments);

template <class Sig>
inline constexpr bool always_false_v = false;

}  // namespace detail

/// A typed kernel handle: Kernel<void(float, const float*, float*, int)>. Only the
/// specialization for a function type returning void exists; anything else fails with a
/// message saying so.
template <class Sig>
class Kernel {
  static_assert(detail::always_false_v<Sig>,
                "Kernel<Sig>: Sig is the kernel's parameter list as a function type returning void, e.g. "
                "Kernel<void(float, const float*, float*, int)>");
};

/// A Function whose parameter types are known, so launch() checks and converts its
/// arguments at compile time (`const T*` parameters read a buffer, `T*` write it).
/// Obtained from Module::kernel or Library::kernel, or Kernel::checked.
template <class... Params>
class Kernel<void(Params...)> : public Function {
  static_assert((detail::is_kernel_parameter_v<Params> && ...),
                "kernel parameters are values of trivially copyable types (scalars, pointers, plain structs); "
                "not references or arrays");

 public:
  /// The number of parameters.
  static constexpr std::size_t arity = sizeof...(Params);

  /// An empty handle.
  Kernel() = default;

  /// A typed view of `function`: checks it against the signature where the driver has
  /// parameter info (InvalidArgument on a mismatch, naming both).
  static Kernel checked(Function function) {
    if constexpr (sizeof...(Params) == 0) {
      detail::check_signature(function.state(), detail::type_name<void(Params...)>(), {}, {});
    } else {
      static constexpr std::size_t sizes[] = {sizeof(Params)...};
      static constexpr std::size_t alignments[] = {alignof(Params)...};
      detail::check_signature(function.state(), detail::type_name<void(Params...)>(), sizes, alignments);
    }
    return Kernel(std::move(function));
  }

 private:
  explicit Kernel(Function function) : Function(std::move(function)) {}
};

}  // namespace cudakit
