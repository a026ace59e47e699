// KernelArgs: an argument list built at run time, for untyped launches whose arguments are
// only known while the program runs (an interpreter, a plugin, a graph builder).
//
//   KernelArgs args;
//   args.add(2.0f).add(std::as_const(x)).add(y).add(n);     // x read, y written
//   launch(stream, module.function("saxpy"), config, args);
//
// Each buffer argument is tracked like in a typed launch: const buffers and
// DeviceSpan<const T> are read, everything else is written (untyped launches cannot know
// better, so they assume the worst). The launch checks the list against the kernel's
// parameter info (count and sizes; CUDA 12.4+). Buffers must outlive the list's launches.
//
// Building the list allocates; a launch with it allocates nothing for up to 64 arguments.
// Thread safety: like a standard container; launches only read it.
#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

#include "cudakit/export.hpp"
#include "cudakit/detail/allocation.hpp"
#include "cudakit/detail/kernel_binding.hpp"
#include "cudakit/device_buffer.hpp"
#include "cudakit/device_span.hpp"

namespace cudakit {

/// An untyped kernel argument list, built with add() in parameter order (see above).
class CUDAKIT_API KernelArgs {
 public:
  /// A value (trivially copyable; not a buffer), copied into the list.
  template <class T>
    requires(std::is_trivially_copyable_v<T> && !detail::is_buffer_like_v<T>)
  KernelArgs& add(const T& value) {
    return add_bytes(&value, sizeof(T), alignof(T));
  }
  /// A buffer the kernel writes (and may read).
  template <class T>
  KernelArgs& add(DeviceBuffer<T>& buffer) {
    return add_buffer(buffer.data(), buffer.allocation(), buffer.device_ordinal(), Access::write);
  }
  /// A buffer the kernel only reads.
  template <class T>
  KernelArgs& add(const DeviceBuffer<T>& buffer) {
    return add_buffer(buffer.data(), buffer.allocation(), buffer.device_ordinal(), Access::read);
  }
  /// A view: read when DeviceSpan<const T>, written otherwise.
  template <class T>
  KernelArgs& add(DeviceSpan<T> span) {
    return add_buffer(span.data(), span.allocation(), span.device_ordinal(),
                      std::is_const_v<T> ? Access::read : Access::write);
  }
  /// Raw bytes of one parameter (a struct the program only knows by size), copied.
  /// Throws InvalidArgument for a size of 0 or an alignment that is not a power of two.
  KernelArgs& add_bytes(const void* data, std::size_t size, std::size_t alignment);

  /// How many parameters the list holds, and whether none.
  std::size_t size() const noexcept { return entries_.size(); }
  bool empty() const noexcept { return entries_.empty(); }
  /// Empties the list (its storage is kept for reuse).
  void clear() noexcept;

  // Internal: what a launch reads.
  struct Entry {
    std::size_t offset = 0;  // in storage_
    std::size_t size = 0;
    detail::Allocation* allocation = nullptr;  // buffers only
    int device = -1;
    Access access = Access::read;
  };
  /// Internal: the entries, in parameter order.
  const std::vector<Entry>& entries() const noexcept { return entries_; }
  /// Internal: where parameter `index`'s value is stored (unchecked index), as the
  /// driver's kernelParams takes it.
  void* value_pointer(std::size_t index) const noexcept {
    return const_cast<std::byte*>(storage_.data()) + entries_[index].offset;
  }

 private:
  template <class T>
  KernelArgs& add_buffer(T* pointer, detail::Allocation* allocation, int device, Access access) {
    const void* raw = pointer;
    add_bytes(&raw, sizeof raw, alignof(const void*));
    entries_.back().allocation = allocation;
    entries_.back().device = device;
    entries_.back().access = access;
    return *this;
  }
  std::vector<std::byte> storage_;  // each value at its alignment (up to 16) from the start
  std::vector<Entry> entries_;
};

}  // namespace cudakit
