// Device memory of its own physical allocation, shared with other processes: virtual
// memory management (cuMemCreate, cuMemMap) with a POSIX file descriptor as the
// shareable handle.
//
//   // producer                                               // consumer
//   auto weights = allocate_shareable<float>(stream, n, zeroed);  auto w = receive_shareable<float>(channel, stream, n);
//   send_shareable(channel, weights);                         w.after(ready, stream);
//
// Where a ShareablePool (shareable_pool.hpp) suits many allocations that come and go, this
// suits a few large ones that live long (model weights loaded once and read by several
// worker processes): each is a physical allocation rounded up to the device's allocation
// granularity, mapped in this process and in each importer, and nothing else of the
// producer's is shared.
//
// The import trusts the kernel for the peer and the driver for the handle (docs/memory.md).
// It checks the descriptor's kind, device (by UUID) and size against what it was asked
// for, and maps the whole allocation the descriptor states: when the driver's allocation
// is smaller, the mapping fails and the import is refused (IpcFailure::wrong_size).
// Memory stays alive as long as the producer's buffer or any import maps it; an import
// is released after every stream that used it (not stream-ordered: unmapping waits).
//
// Thread safety: as DeviceBuffer and IpcChannel.
#pragma once

#include <chrono>
#include <cstddef>

#include "cudakit/device.hpp"
#include "cudakit/device_buffer.hpp"
#include "cudakit/export.hpp"
#include "cudakit/imported_buffer.hpp"
#include "cudakit/ipc_channel.hpp"
#include "cudakit/ipc_descriptor.hpp"
#include "cudakit/memory_init.hpp"
#include "cudakit/stream.hpp"

namespace cudakit {

namespace detail {
CUDAKIT_API Ref<Allocation> allocate_shareable_bytes(StreamRef stream, std::size_t bytes, bool zero);
CUDAKIT_API IpcDescriptor shareable_descriptor(const Allocation* allocation);
CUDAKIT_API FileDescriptor shareable_file(const Allocation* allocation);
CUDAKIT_API Ref<Allocation> import_shareable_bytes(StreamRef stream, const IpcMessage& message, std::size_t count,
                                                   std::size_t element_bytes);
}  // namespace detail

/// The granularity of shareable allocations on `device` (cuMemGetAllocationGranularity,
/// minimum): every allocation's size is rounded up to a multiple of it.
CUDAKIT_API std::size_t shareable_granularity(Device device);

/// `count` elements in a physical allocation of their own on `stream`'s device,
/// shareable as a POSIX file descriptor, zero-filled on `stream`. Throws
/// FeatureUnavailable where the device cannot share virtual memory as file descriptors,
/// OutOfMemory, DriverError.
template <class T>
DeviceBuffer<T> allocate_shareable(StreamRef stream, std::size_t count, Zeroed) {
  if (count > static_cast<std::size_t>(-1) / sizeof(T))
    throw InvalidArgument("allocate_shareable of " + std::to_string(count) + " elements overflows size_t");
  return DeviceBuffer<T>(detail::allocate_shareable_bytes(stream, count * sizeof(T), true), count);
}

/// The descriptor (kind virtual_memory) and a new file descriptor (the caller owns it)
/// of `buffer`, made by allocate_shareable. InvalidArgument for any other buffer.
template <class T>
IpcDescriptor shareable_descriptor(const DeviceBuffer<T>& buffer) {
  buffer.require_not_moved_from();
  return detail::shareable_descriptor(buffer.allocation());
}
/// A new file descriptor of `buffer`'s shareable handle (see shareable_descriptor).
template <class T>
FileDescriptor shareable_file(const DeviceBuffer<T>& buffer) {
  buffer.require_not_moved_from();
  return detail::shareable_file(buffer.allocation());
}
/// Sends `buffer` to the peer of `channel`.
template <class T>
void send_shareable(const IpcChannel& channel, const DeviceBuffer<T>& buffer) {
  FileDescriptor file = shareable_file(buffer);
  channel.send(shareable_descriptor(buffer), file.get());
}

/// Maps the allocation `message` carries as `count` elements of T, owned by `stream`.
/// Throws IpcError: wrong_kind, wrong_device (the producer's device is not `stream`'s),
/// wrong_size (not `count` elements, or an allocation smaller than the descriptor
/// says), stale (the driver refused the handle).
template <class T>
ImportedBuffer<T> import_shareable(StreamRef stream, const IpcMessage& message, std::size_t count) {
  return ImportedBuffer<T>(DeviceBuffer<T>(detail::import_shareable_bytes(stream, message, count, sizeof(T)), count));
}
/// Receives the next message on `channel` and imports it, as import_shareable().
template <class T>
ImportedBuffer<T> receive_shareable(const IpcChannel& channel, StreamRef stream, std::size_t count,
                                    std::chrono::milliseconds timeout = default_ipc_timeout) {
  return import_shareable<T>(stream, channel.receive(timeout), count);
}

}  // namespace cudakit
