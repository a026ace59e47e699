#include "cudakit/context.hpp"

#include "cudakit/detail/capture_counts.hpp"
#include "device/capture_tolerant_scope.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "device/device_state.hpp"
#include "driver/checked_call.hpp"

namespace cudakit {

using driver::cu;

namespace detail {

thread_local constinit CUcontext cached_current_context = nullptr;

void set_current_context_slow(CUcontext context, int device) {
  if (context == nullptr) throw_empty_handle("Context");
  Resource res = Resource::of(ResourceKind::context, context, device);
  check_not_poisoned(cu.CtxSetCurrent.name(), res);  // DESIGN 7
  checked_call(cu.CtxSetCurrent, res, context);
  cached_current_context = context;
}

}  // namespace detail

void ContextRef::synchronize() const {
  if (handle_ == nullptr) detail::throw_empty_handle("Context");
  Resource res = Resource::of(ResourceKind::context, handle_, device_);
  check_not_poisoned(cu.CtxSynchronize.name(), res);
  if (detail::active_captures.load(std::memory_order_relaxed) != 0)
    throw CaptureError("cuCtxSynchronize on " + describe(res) +
                       " refused: a stream capture is in progress, and a context cannot be synchronized while any of "
                       "its streams captures (the driver would invalidate the capture); synchronize the streams you "
                       "need, or wait for the capture to end");
  make_current();
  checked_call(cu.CtxSynchronize, res);
}

std::pair<int, int> ContextRef::stream_priority_range() const {
  if (handle_ == nullptr) detail::throw_empty_handle("Context");
  Resource res = Resource::of(ResourceKind::context, handle_, device_);
  check_not_poisoned(cu.CtxGetStreamPriorityRange.name(), res);  // DESIGN 7, even when cached
  auto& s = detail::device_state(device_);
  int least = s.priority_least.load(std::memory_order_relaxed);
  int greatest = s.priority_greatest.load(std::memory_order_relaxed);
  if (least != INT_MIN && greatest != INT_MIN) return {least, greatest};
  make_current();
  checked_call(cu.CtxGetStreamPriorityRange, res, &least, &greatest);
  s.priority_greatest.store(greatest, std::memory_order_relaxed);
  s.priority_least.store(least, std::memory_order_relaxed);
  return {least, greatest};
}

Context Context::primary(Device device) {
  Resource res = Resource::of_device(device.ordinal());
  check_not_poisoned(cu.DevicePrimaryCtxRetain.name(), res);
  CUcontext context = nullptr;
  detail::CaptureTolerantScope tolerant;  // retaining beside a capture leaves it valid (DESIGN 6)
  checked_call(cu.DevicePrimaryCtxRetain, res, &context, device.handle());
  return Context(ContextRef(context, device.ordinal()));
}

Context Context::clone() const {
  ContextRef ref = checked_ref();
  Resource res = Resource::of_device(ref.device_ordinal());
  check_not_poisoned(cu.DevicePrimaryCtxRetain.name(), res);
  CUcontext context = nullptr;
  checked_call(cu.DevicePrimaryCtxRetain, res, &context, detail::device_state(ref.device_ordinal()).handle);
  return Context(ContextRef(context, ref.device_ordinal()));
}

ContextRef Context::checked_ref() const {
  if (!ref_) detail::throw_empty_handle("Context");
  return ref_;
}

void Context::reset() noexcept {
  if (!ref_) return;
  ContextRef ref = std::exchange(ref_, {});
  try {
    CUresult r = cu.DevicePrimaryCtxRelease(detail::device_state(ref.device_ordinal()).handle);
    if (r != CUDA_SUCCESS)
      park_driver_error(r, cu.DevicePrimaryCtxRelease.name(), Resource::of(ResourceKind::context, ref.handle(), ref.device_ordinal()),
                        "~Context");
  } catch (const std::exception& e) {
    park_error({CUDA_SUCCESS, "~Context", e.what()});
  }
}

}  // namespace cudakit
