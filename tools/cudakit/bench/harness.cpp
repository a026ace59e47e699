#include "bench/harness.hpp"

#include "cudakit/context.hpp"

namespace cudakit::tool::bench {

using driver::EntryId;

RawPrimaryContext::RawPrimaryContext(const Device& device) : device_(device.handle()) {
  check_raw(raw_entry<EntryId::DevicePrimaryCtxRetain>()(&context_, device_), "cuDevicePrimaryCtxRetain");
  check_raw(raw_entry<EntryId::CtxSetCurrent>()(context_), "cuCtxSetCurrent");
  // The current context changed behind cudakit's back (context.hpp asks to say so); it
  // is the same primary context cudakit uses, but cudakit's cache must not assume that.
  forget_cached_current_context();
}

RawPrimaryContext::~RawPrimaryContext() {
  CUresult status = raw_entry<EntryId::DevicePrimaryCtxRelease>()(device_);
  if (status != CUDA_SUCCESS) park_driver_error(status, "cuDevicePrimaryCtxRelease", Resource::none(), "raw benchmark");
}

RawStream::RawStream() {
  check_raw(raw_entry<EntryId::StreamCreateWithPriority>()(&stream_, CU_STREAM_NON_BLOCKING, 0),
            "cuStreamCreateWithPriority");
}

RawStream::~RawStream() {
  CUresult status = raw_entry<EntryId::StreamDestroy>()(stream_);
  if (status != CUDA_SUCCESS) park_driver_error(status, "cuStreamDestroy", Resource::none(), "raw benchmark");
}

RawEvent::RawEvent() {
  check_raw(raw_entry<EntryId::EventCreate>()(&event_, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
}

RawEvent::~RawEvent() {
  CUresult status = raw_entry<EntryId::EventDestroy>()(event_);
  if (status != CUDA_SUCCESS) park_driver_error(status, "cuEventDestroy", Resource::none(), "raw benchmark");
}

}  // namespace cudakit::tool::bench
