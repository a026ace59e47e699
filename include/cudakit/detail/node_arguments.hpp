// Internal: kernel arguments bound for a graph kernel node, by the same rules as a launch
// (detail/kernel_binding.hpp): the values as the kernel's parameters, a pointer to each,
// and the buffers they name with how the kernel uses them (graph.hpp, graph_exec.hpp).
#pragma once

#include <cstddef>
#include <tuple>
#include <utility>

#include "cudakit/export.hpp"
#include "cudakit/detail/allocation.hpp"
#include "cudakit/detail/kernel_binding.hpp"
#include "cudakit/launch.hpp"
#include "cudakit/tracking.hpp"

namespace cudakit::detail {

/// One buffer a piece of graph work touches, and how.
struct CUDAKIT_API BufferUse {
  Allocation* allocation = nullptr;
  Access access = Access::read;
};

/// A typed argument's buffer use, as a launch would declare it (none for a value).
template <Binding B, class Arg>
BufferUse buffer_use_of(const Arg& arg) {
  if constexpr (is_buffer_binding(B)) return {arg.allocation(), B == Binding::buffer_write ? Access::write : Access::read};
  else return {};
}

/// Typed kernel arguments bound for a graph node: the values (as the parameters), a
/// pointer to each, and the buffer uses.
template <class... Params>
struct BoundNodeArguments {
  std::tuple<Params...> values;
  void* pointers[sizeof...(Params) + 1] = {};
  BufferUse uses[sizeof...(Params) + 1] = {};

  template <class... Args, std::size_t... I>
  BoundNodeArguments(std::index_sequence<I...>, Args&... args)
      : values{bind_argument<binding<Params, Args>(), Params>(args)...},
        pointers{static_cast<void*>(&std::get<I>(values))...},
        uses{buffer_use_of<binding<Params, Args>()>(args)...} {}
  BoundNodeArguments(const BoundNodeArguments&) = delete;
  BoundNodeArguments& operator=(const BoundNodeArguments&) = delete;
};

template <class... Params, class... Args>
constexpr bool node_arguments_bind(type_list<Params...>, type_list<Args...>) {
  static_assert(sizeof...(Args) == sizeof...(Params),
                "kernel node: the number of arguments differs from the number of the kernel's parameters");
  if constexpr (sizeof...(Args) != sizeof...(Params)) return false;
  else return check_arguments(std::index_sequence_for<Params...>{}, type_list<Params...>{}, type_list<Args...>{});
}
}  // namespace cudakit::detail
