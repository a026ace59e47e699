// Events shared between processes: the producer's SharedEvent, the consumer's
// ImportedEvent. They order a consumer's stream after a producer's work as an event
// orders two streams of one process.
//
//   // producer                                     // consumer
//   SharedEvent ready(device);                      ImportedEvent ready = ImportedEvent::receive(channel, device);
//   channel.send(ready.descriptor());               ...
//   launch(write_kernel, ..., buffer);              buffer.after(ready, stream);   // imported_buffer.hpp
//   ready.record_after_writes(stream, buffer);      launch(read_kernel, ..., buffer);
//
// The driver's interprocess event handle (cuIpcGetEventHandle) is 64 bytes, not a file
// descriptor: whoever reads them can open the event, wait on it and record it. cudakit
// sends them only over an IpcChannel, whose peer the kernel vouched for (SO_PEERCRED,
// ipc_channel.hpp): never write a descriptor() to a file or a network socket.
//
// A shared event has timing disabled and is interprocess (CU_EVENT_INTERPROCESS |
// CU_EVENT_DISABLE_TIMING), as the driver requires. An imported event waits for the
// producer's last record before the consumer's wait was submitted.
//
// Thread safety: as Event.
#pragma once

#include <chrono>

#include "cudakit/device.hpp"
#include "cudakit/device_buffer.hpp"
#include "cudakit/event.hpp"
#include "cudakit/export.hpp"
#include "cudakit/ipc_channel.hpp"
#include "cudakit/ipc_descriptor.hpp"
#include "cudakit/stream.hpp"

namespace cudakit {

/// An event another process may wait on (see above). Move-only.
class CUDAKIT_API SharedEvent {
 public:
  /// An interprocess event on `device` (its primary context). Throws DriverError.
  explicit SharedEvent(Device device);

  /// Records the event on `stream`.
  void record(StreamRef stream) const { event_.record(stream); }
  /// Records the event on `stream` after every write to `buffer` so far, whichever
  /// stream made it (the buffer's tracking orders `stream` after its last writer).
  template <class T>
  void record_after_writes(StreamRef stream, const DeviceBuffer<T>& buffer) const {
    record_after_writes_of(stream, buffer.allocation());
  }
  /// The descriptor that lets a process open this event (kind event, the driver's IPC
  /// handle as payload): send it only over an IpcChannel (see above).
  IpcDescriptor descriptor() const;
  /// Sends descriptor() over `channel`.
  void send(const IpcChannel& channel) const { channel.send(descriptor()); }

  /// The event, for queries and local waits.
  EventRef ref() const noexcept { return event_.ref(); }

 private:
  void record_after_writes_of(StreamRef stream, detail::Allocation* allocation) const;
  Event event_;
};

/// An event another process shared (see above). Move-only; closing it leaves the
/// producer's event alone.
class CUDAKIT_API ImportedEvent {
 public:
  /// Opens the event `message` names on `device`. Throws IpcError: wrong_kind (not an
  /// event), wrong_device (the producer's device is not `device`), stale (the driver
  /// refused the handle: the event is gone, or the handle is forged).
  ImportedEvent(const IpcMessage& message, Device device);
  /// Receives the next message on `channel` and opens it (as above, and as receive()).
  static ImportedEvent receive(const IpcChannel& channel, Device device,
                               std::chrono::milliseconds timeout = default_ipc_timeout);

  /// Makes `stream` wait for the producer's last record.
  void wait(StreamRef stream) const { stream.wait(event_.ref()); }
  /// Blocks the calling thread until the producer's last record completed.
  void synchronize() const { event_.synchronize(); }
  /// The event.
  EventRef ref() const noexcept { return event_.ref(); }

 private:
  Event event_;
};

}  // namespace cudakit
