// Kernel launches. Every launch names its stream.
//
//   launch(stream, saxpy, LaunchConfig{grid_for(n, 256), 256}, 2.0f, x, y, n);
//
// A typed launch (Kernel<void(Params...)>) checks each argument against its parameter at
// compile time (detail/kernel_binding.hpp: buffers bind to pointers of their element type,
// values convert only without loss). An untyped launch (Function) derives the parameter
// types from the arguments and checks their count and sizes against the kernel's parameter
// info at run time (CUDA 12.4+; older drivers refuse it with FeatureUnavailable).
//
// What a launch does, in order (the hot path; DESIGN 5, 8, 10):
//   1. checks the stream (not empty, on the kernel's device) and the configuration against
//      limits read when the kernel was looked up: a few compares, no lock, no driver call;
//      anything unusual (a limit exceeded, launch attributes) goes to an out-of-line check
//      that throws InvalidArgument naming the kernel, the value and the limit;
//   2. checks that the device's context is not poisoned (one atomic load), and makes the
//      kernel's context current (a thread-local compare; cuCtxSetCurrent only on a change);
//   3. converts the arguments into a tuple of the parameter types on the stack, with an
//      array of pointers to them (no heap allocation);
//   4. tells each buffer argument's tracker about the read or write on this stream, before
//      the driver sees the launch (free while a buffer stays on one stream);
//   5. calls cuLaunchKernel, or cuLaunchKernelEx when the configuration asks for clusters,
//      a cooperative launch, a priority or programmatic dependent launch. A programmatic
//      dependent launch whose buffers step 4 ordered across streams is submitted as a full
//      dependency instead: a hand-off between streams is never programmatic (docs/launch.md).
//
// Thread safety: launch from any number of threads at once, with the same kernel handles.
#pragma once

#include <cstddef>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cudakit/export.hpp"
#include "cudakit/detail/launch_in_capture.hpp"
#include "cudakit/detail/kernel_binding.hpp"
#include "cudakit/kernel.hpp"
#include "cudakit/kernel_args.hpp"
#include "cudakit/launch_config.hpp"
#include "cudakit/stream.hpp"

namespace cudakit {

/// Whether a typed kernel of signature `Sig` takes these arguments (a launch with them compiles).
template <class Sig, class... Args>
inline constexpr bool kernel_accepts_v = false;
template <class... Params, class... Args>
inline constexpr bool kernel_accepts_v<void(Params...), Args...> = [] {
  if constexpr (sizeof...(Params) != sizeof...(Args)) return false;
  else return (detail::bindable(detail::binding<Params, Args>()) && ...);
}();

namespace detail {

/// Step 1 and 2 above: throws InvalidArgument (or EmptyHandle, ContextPoisoned) before
/// the driver sees a bad launch; raises the kernel's dynamic shared memory limit when the
/// configuration asks for more and allows it.
CUDAKIT_API void prepare_launch(FunctionState& function, StreamRef stream, const LaunchConfig& config);
/// The configuration checks of prepare_launch without a stream, for a kernel node of a
/// graph (grid, block, shared memory, cluster, cooperative, priority; raises the shared
/// memory limit when the configuration asks for more and allows it).
CUDAKIT_API void check_launch_config(FunctionState& function, const LaunchConfig& config);
/// Step 5: the driver call. `params` points at one value per parameter (null for none).
CUDAKIT_API void submit_launch(const FunctionState& function, StreamRef stream, const LaunchConfig& config, void** params);
/// An untyped launch's arguments against the kernel's parameter info (count and sizes).
CUDAKIT_API void check_untyped_arguments(FunctionState& function, std::span<const std::size_t> sizes);
/// A buffer argument of another device than the launch's: accepted when peer access from
/// the launch's device to the buffer's is enabled (enable_peer_access), so the kernel
/// reads it through the link and the buffer orders the launch like any other stream's
/// use (DESIGN 5); otherwise InvalidArgument naming the argument and both devices.
CUDAKIT_API void require_peer_buffer(const FunctionState& function, std::size_t position, int buffer_device,
                                     int stream_device);
/// The use of a peer buffer (another device's, require_peer_buffer accepted it): ordered
/// like any use, after which the launch's device context is current again (ordering may
/// record an event in the buffer's device's context).
CUDAKIT_API void use_peer_buffer(const FunctionState& function, Allocation* allocation, StreamRef stream, Access access);

template <class... T>
struct type_list {};

template <std::size_t... I, class... Params, class... Args>
constexpr bool check_arguments(std::index_sequence<I...>, type_list<Params...>, type_list<Args...>) {
  return (check_argument<I + 1, Params, Args>() && ...);
}

template <Binding B, class Arg>
void check_buffer_device(const FunctionState& f, std::size_t position, const Arg& arg, StreamRef stream) {
  if constexpr (is_buffer_binding(B)) {
    int d = arg.device_ordinal();
    if (d >= 0 && d != stream.device_ordinal()) [[unlikely]]
      require_peer_buffer(f, position, d, stream.device_ordinal());
  }
}

// DESIGN 5: the tracker hears of the access before the driver sees the launch.
template <Binding B, class Arg>
void use_buffer(const FunctionState& f, const Arg& arg, StreamRef stream) {
  if constexpr (is_buffer_binding(B)) {
    if (Allocation* a = arg.allocation()) {
      const Access access = B == Binding::buffer_write ? Access::write : Access::read;
      if (a->device == stream.device_ordinal()) [[likely]]
        a->use(stream, access);
      else
        use_peer_buffer(f, a, stream, access);
    }
  }
}

template <class... Params, class... Args, std::size_t... I>
void launch_bound(std::type_identity<void(Params...)>, std::index_sequence<I...>, StreamRef stream, FunctionState& f,
                  const LaunchConfig& config, Args&&... args) {
  // Args are the caller's argument types as lvalue references: constness is kept.
  (check_buffer_device<binding<Params, Args>()>(f, I + 1, args, stream), ...);
  std::tuple<Params...> values{bind_argument<binding<Params, Args>(), Params>(args)...};
  (use_buffer<binding<Params, Args>()>(f, args, stream), ...);
  if constexpr (sizeof...(Params) == 0) {
    submit_launch(f, stream, config, nullptr);
  } else {
    void* pointers[] = {static_cast<void*>(&std::get<I>(values))...};
    submit_launch(f, stream, config, pointers);
  }
}

}  // namespace detail

/// A typed launch: `args` bind to the kernel's parameters, checked at compile time.
template <class... Params, class... Args>
void launch(StreamRef stream, const Kernel<void(Params...)>& kernel, const LaunchConfig& config, Args&&... args) {
  static_assert(sizeof...(Args) == sizeof...(Params),
                "launch: the number of arguments differs from the number of the kernel's parameters");
  if constexpr (sizeof...(Args) == sizeof...(Params)) {
    constexpr bool ok = detail::check_arguments(std::index_sequence_for<Params...>{}, detail::type_list<Params...>{},
                                                detail::type_list<Args...>{});
    if constexpr (ok) {
      detail::FunctionState& f = kernel.state();
      detail::prepare_launch(f, stream, config);
      detail::note_launch(stream, kernel);  // a capture keeps the module (graph.hpp)
      detail::launch_bound(std::type_identity<void(Params...)>{}, std::index_sequence_for<Params...>{}, stream, f,
                           config, args...);
    }
  }
}

/// An untyped launch: parameter types follow from the arguments (buffers as pointers,
/// read when const, written otherwise); their count and sizes are checked against the
/// kernel's parameter info at run time.
template <class... Args>
  requires(!(sizeof...(Args) == 1 && (std::is_same_v<std::remove_cvref_t<Args>, KernelArgs> && ...)))
void launch(StreamRef stream, const Function& function, const LaunchConfig& config, Args&&... args) {
  static_assert((detail::is_kernel_parameter_v<detail::untyped_parameter_t<Args>> && ...),
                "launch: an untyped launch takes buffers, views, pointers and trivially copyable values");
  detail::FunctionState& f = function.state();
  detail::prepare_launch(f, stream, config);
  detail::note_launch(stream, function);  // a capture keeps the module (graph.hpp)
  if constexpr (sizeof...(Args) == 0) {
    detail::check_untyped_arguments(f, {});
  } else {
    static constexpr std::size_t sizes[] = {sizeof(detail::untyped_parameter_t<Args>)...};
    detail::check_untyped_arguments(f, sizes);
  }
  detail::launch_bound(std::type_identity<void(detail::untyped_parameter_t<Args>...)>{},
                       std::index_sequence_for<Args...>{}, stream, f, config, args...);
}

/// An untyped launch with an argument list built at run time.
CUDAKIT_API void launch(StreamRef stream, const Function& function, const LaunchConfig& config, const KernelArgs& args);

}  // namespace cudakit
