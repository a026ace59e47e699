// What making a stream or an event begins with (stream.cpp, event.cpp): the context must
// be one, its device must not be poisoned, and cudakit's library context for that device
// must exist, because it outlives every stream and event made on it (DESIGN 4).
#pragma once

#include "cudakit/context.hpp"
#include "cudakit/error.hpp"
#include "device/device_state.hpp"

namespace cudakit::detail {

/// The checks before `call` makes a stream or an event in `context`; returns the device,
/// as the resource a failure names. EmptyHandle for an empty context, the poisoned
/// device's error when it is poisoned.
inline Resource begin_create(ContextRef context, const char* call) {
  if (!context) throw_empty_handle("Context");
  Resource res = Resource::of_device(context.device_ordinal());
  check_not_poisoned(call, res);
  library_context(context.device_ordinal());
  return res;
}

}  // namespace cudakit::detail
