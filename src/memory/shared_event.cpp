#include "cudakit/shared_event.hpp"

#include <cstring>

#include "cudakit/context.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "cudakit/imported_buffer.hpp"
#include "device/device_state.hpp"
#include "driver/checked_call.hpp"
#include "memory/shared_pool_state.hpp"

namespace cudakit {

using driver::cu;

namespace {

Resource event_resource(CUevent event, int device) { return Resource::of(ResourceKind::event, event, device); }

}  // namespace

SharedEvent::SharedEvent(Device device) {
  const int d = device.ordinal();
  Resource res = Resource::of_device(d);
  check_not_poisoned(cu.EventCreate.name(), res);
  ContextRef(detail::library_context(d), d).make_current();
  CUevent event = nullptr;
  // The driver requires both flags for an event another process opens.
  checked_call(cu.EventCreate, res, &event, unsigned{CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING});
  event_ = Event::adopt(event, d);
}

void SharedEvent::record_after_writes_of(StreamRef stream, detail::Allocation* allocation) const {
  // A read orders `stream` after the buffer's last writer, whichever stream wrote.
  if (allocation != nullptr) allocation->use(stream, Access::read);
  event_.record(stream);
}

IpcDescriptor SharedEvent::descriptor() const {
  EventRef e = event_.ref();
  if (!e) detail::throw_empty_handle("SharedEvent");
  Resource res = event_resource(e.handle(), e.device_ordinal());
  check_not_poisoned(cu.IpcGetEventHandle.name(), res);
  CUipcEventHandle handle{};
  checked_call(cu.IpcGetEventHandle, res, &handle, e.handle());
  IpcDescriptor d;
  d.kind = IpcKind::event;
  d.device_uuid = Device::get(e.device_ordinal()).uuid();
  d.payload_bytes = sizeof handle.reserved;
  std::memcpy(d.payload.data(), handle.reserved, sizeof handle.reserved);
  return d;
}

ImportedEvent::ImportedEvent(const IpcMessage& message, Device device) {
  const char* what = "import of an event";
  detail::require_ipc_kind(message.descriptor, IpcKind::event, what);
  detail::require_ipc_device(message.descriptor, device, what);
  const int d = device.ordinal();
  const char* call = cu.IpcOpenEventHandle.name();
  check_not_poisoned(call, Resource::of_device(d));
  ContextRef(detail::library_context(d), d).make_current();
  CUipcEventHandle handle{};
  std::memcpy(handle.reserved, message.descriptor.payload.data(), sizeof handle.reserved);
  CUevent event = nullptr;
  CUresult r = cu.IpcOpenEventHandle(&event, handle);
  if (r != CUDA_SUCCESS) {
    if (is_sticky(r)) check(r, call, Resource::of_device(d));
    detail::throw_stale_handle(r, call, d, what);
  }
  // An opened event is destroyed with cuEventDestroy like one of this process.
  event_ = Event::adopt(event, d);
}

ImportedEvent ImportedEvent::receive(const IpcChannel& channel, Device device, std::chrono::milliseconds timeout) {
  return ImportedEvent(channel.receive(timeout), device);
}

namespace detail {

void order_after_producer(Allocation* allocation, const ImportedEvent& ready, StreamRef stream) {
  // A write on `stream`: later uses on other streams wait for it, and so for the
  // producer's write that the wait below orders it after.
  if (allocation != nullptr) allocation->use(stream, Access::write);
  ready.wait(stream);
}

}  // namespace detail

}  // namespace cudakit
