// Memory pools shared between processes: the producer's ShareablePool, the consumer's
// ImportedPool.
//
//   // producer                                    // consumer
//   ShareablePool pool(device);                    ImportedPool pool = ImportedPool::receive(channel, device);
//   pool.send(channel);                            ...
//   auto kv = pool.allocate<float>(stream, n);     ImportedBuffer<float> kv = pool.receive<float>(channel, stream, n);
//   pool.send(channel, kv);                        kv.after(ready, stream);    // shared_event.hpp
//
// A ShareablePool is a pool of its own (cuMemPoolCreate) whose shareable handle is a
// POSIX file descriptor (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR): that descriptor
// travels once, through SCM_RIGHTS, and each allocation then travels as the driver's 64
// bytes of export data, which only a process holding the pool can use. Its allocations
// are DeviceBuffers like any other: tracked, stream-ordered, freed after their users.
//
// What an import trusts (docs/memory.md): the kernel for who the peer is, and the driver
// for what the handle is. It checks the rest: the descriptor's kind, its device (by
// UUID) against the device asked for, its size against the elements asked for, that the
// allocation is still live (the pool's allocation ledger, which send() sends after the
// pool: the driver itself imports an allocation already freed), and, once the driver
// mapped the memory, the size and device the driver reports against the descriptor. A
// failed check releases what was imported and throws IpcError.
//
// Lifetimes: a pool lives until it is destroyed and every buffer of it is gone (a buffer
// keeps its pool, DESIGN 4); an imported pool lives until every buffer imported through
// it is released. The producer must free a buffer only after every consumer released its
// import (imported_buffer.hpp).
//
// Thread safety: a pool may allocate and export from several threads; one thread at a
// time moves or destroys it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "cudakit/device.hpp"
#include "cudakit/device_buffer.hpp"
#include "cudakit/export.hpp"
#include "cudakit/imported_buffer.hpp"
#include "cudakit/ipc_channel.hpp"
#include "cudakit/ipc_descriptor.hpp"
#include "cudakit/memory_init.hpp"
#include "cudakit/memory_pool.hpp"
#include "cudakit/shared_event.hpp"
#include "cudakit/stream.hpp"

namespace cudakit {

namespace detail {
struct SharedPoolState;
}  // namespace detail

/// A memory pool whose allocations other processes may import (see above). Move-only.
class CUDAKIT_API ShareablePool {
 public:
  /// A new pool on `device`, shareable as a POSIX file descriptor, keeping up to
  /// `release_threshold` bytes of freed memory. Throws FeatureUnavailable where the
  /// device has no memory pools or cannot share them as file descriptors, DriverError
  /// otherwise.
  explicit ShareablePool(Device device, std::uint64_t release_threshold = keep_all_pool_memory);
  ShareablePool(ShareablePool&&) noexcept;
  ShareablePool& operator=(ShareablePool&&) noexcept;
  ~ShareablePool();

  /// A view of the pool (usage, trimming).
  MemoryPoolRef ref() const;

  /// `count` elements from the pool, allocated on `stream` (which must be on the pool's
  /// device), as DeviceBuffer's constructors do.
  template <class T>
  DeviceBuffer<T> allocate(StreamRef stream, std::size_t count, Uninitialized) const {
    return DeviceBuffer<T>(allocate_bytes(stream, bytes_for<T>(count), false), count);
  }
  /// The same, zero-filled on `stream`.
  template <class T>
  DeviceBuffer<T> allocate(StreamRef stream, std::size_t count, Zeroed) const {
    return DeviceBuffer<T>(allocate_bytes(stream, bytes_for<T>(count), true), count);
  }

  /// The pool's descriptor (kind memory_pool), and a new file descriptor of its
  /// shareable handle (the caller owns it): send both with IpcChannel::send.
  IpcDescriptor descriptor() const;
  FileDescriptor file() const;
  /// Sends the pool and its allocation ledger to the peer of `channel` (two messages,
  /// which ImportedPool::receive takes).
  void send(const IpcChannel& channel) const;

  /// The descriptor of `buffer`, an allocation of this pool (kind pool_allocation), at any
  /// time after it was allocated (before or after the pool itself is sent). Throws
  /// InvalidArgument for a buffer of another pool or none, EmptyHandle for a moved-from one.
  template <class T>
  IpcDescriptor descriptor(const DeviceBuffer<T>& buffer) const {
    buffer.require_not_moved_from();
    return descriptor_of(buffer.allocation());
  }
  /// Sends descriptor(buffer) to the peer of `channel`.
  template <class T>
  void send(const IpcChannel& channel, const DeviceBuffer<T>& buffer) const {
    channel.send(descriptor(buffer));
  }

 private:
  template <class T>
  static std::size_t bytes_for(std::size_t count) {
    if (count > static_cast<std::size_t>(-1) / sizeof(T))
      throw InvalidArgument("ShareablePool allocation of " + std::to_string(count) + " elements overflows size_t");
    return count * sizeof(T);
  }
  detail::Ref<detail::Allocation> allocate_bytes(StreamRef stream, std::size_t bytes, bool zero) const;
  IpcDescriptor descriptor_of(const detail::Allocation* allocation) const;
  std::shared_ptr<detail::SharedPoolState> state_;
};

/// A pool another process shared, through which its allocations are imported (see
/// above). Move-only.
class CUDAKIT_API ImportedPool {
 public:
  /// Imports the pool `message` carries on `device`. Throws IpcError: wrong_kind (not a
  /// pool), wrong_device (the producer's device is not `device`), stale (the driver
  /// refused the handle). A pool imported from its message alone has no allocation
  /// ledger: its imports cannot tell an allocation its producer freed (receive() can).
  ImportedPool(IpcMessage message, Device device);
  /// Receives the pool and its allocation ledger (the two messages ShareablePool::send
  /// sends) on `channel` and imports them; an allocation ledger that is not one (not a
  /// sealed memfd of its size) is IpcError malformed.
  static ImportedPool receive(const IpcChannel& channel, Device device,
                              std::chrono::milliseconds timeout = default_ipc_timeout);
  ImportedPool(ImportedPool&&) noexcept;
  ImportedPool& operator=(ImportedPool&&) noexcept;
  ~ImportedPool();

  /// Imports the allocation `message` describes as `count` elements of T, owned by
  /// `stream` (on the pool's device). Throws IpcError: wrong_kind, wrong_device,
  /// wrong_size (the bytes are not `count` elements, or the driver's allocation is
  /// smaller than the descriptor says), stale (the pool's ledger says the producer freed
  /// the allocation, or the driver refused the export data as forged).
  template <class T>
  ImportedBuffer<T> import(StreamRef stream, const IpcMessage& message, std::size_t count) const {
    return ImportedBuffer<T>(DeviceBuffer<T>(import_bytes(stream, message, count, sizeof(T)), count));
  }
  /// Receives the next message on `channel` and imports it, as import().
  template <class T>
  ImportedBuffer<T> receive(const IpcChannel& channel, StreamRef stream, std::size_t count,
                            std::chrono::milliseconds timeout = default_ipc_timeout) const {
    return import<T>(stream, channel.receive(timeout), count);
  }

  /// The driver's handle of the imported pool.
  CUmemoryPool handle() const noexcept;

 private:
  detail::Ref<detail::Allocation> import_bytes(StreamRef stream, const IpcMessage& message, std::size_t count,
                                               std::size_t element_bytes) const;
  std::shared_ptr<detail::SharedPoolState> state_;
};

}  // namespace cudakit
