#include "cudakit/context.hpp"

#include "cudakit/detail/capture_guard.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "device/device_state.hpp"

namespace cudakit {

using driver::cu;

namespace detail {

thread_local CUcontext cached_current_context = nullptr;

void set_current_context_slow(CUcontext context, int device) {
  if (context == nullptr) throw_empty_handle("Context");
  Resource res = Resource::of(ResourceKind::context, context, device);
  check_not_poisoned("cuCtxSetCurrent", res);  // DESIGN 7
  check(cu.CtxSetCurrent(context), "cuCtxSetCurrent", res);
  cached_current_context = context;
}

}  // namespace detail

void ContextRef::synchronize() const {
  if (handle_ == nullptr) detail::throw_empty_handle("Context");
  Resource res = Resource::of(ResourceKind::context, handle_, device_);
  check_not_poisoned("cuCtxSynchronize", res);
  if (detail::active_captures.load(std::memory_order_relaxed) != 0)
    throw CaptureError("cuCtxSynchronize on " + describe(res) +
                       " refused: a stream capture is in progress, and a context cannot be synchronized while any of "
                       "its streams captures (the driver would invalidate the capture); synchronize the streams you "
                       "need, or wait for the capture to end");
  make_current();
  check(cu.CtxSynchronize(), "cuCtxSynchronize", res);
}

std::pair<int, int> ContextRef::stream_priority_range() const {
  if (handle_ == nullptr) detail::throw_empty_handle("Context");
  Resource res = Resource::of(ResourceKind::context, handle_, device_);
  check_not_poisoned("cuCtxGetStreamPriorityRange", res);  // DESIGN 7, even when cached
  auto& s = detail::device_state(device_);
  int least = s.priority_least.load(std::memory_order_relaxed);
  int greatest = s.priority_greatest.load(std::memory_order_relaxed);
  if (least != INT_MIN && greatest != INT_MIN) return {least, greatest};
  make_current();
  check(cu.CtxGetStreamPriorityRange(&least, &greatest), "cuCtxGetStreamPriorityRange", res);
  s.priority_greatest.store(greatest, std::memory_order_relaxed);
  s.priority_least.store(least, std::memory_order_relaxed);
  return {least, greatest};
}

Context Context::primary(Device device) {
  Resource res = Resource::of_device(device.ordinal());
  check_not_poisoned("cuDevicePrimaryCtxRetain", res);
  CUcontext context = nullptr;
  detail::CaptureTolerantScope tolerant;  // retaining beside a capture leaves it valid (DESIGN 6)
  check(cu.DevicePrimaryCtxRetain(&context, device.handle()), "cuDevicePrimaryCtxRetain", res);
  return Context(ContextRef(context, device.ordinal()));
}

Context Context::clone() const {
  ContextRef ref = checked_ref();
  Resource res = Resource::of_device(ref.device_ordinal());
  check_not_poisoned("cuDevicePrimaryCtxRetain", res);
  CUcontext context = nullptr;
  check(cu.DevicePrimaryCtxRetain(&context, detail::device_state(ref.device_ordinal()).handle), "cuDevicePrimaryCtxRetain",
        res);
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
      park_driver_error(r, "cuDevicePrimaryCtxRelease", Resource::of(ResourceKind::context, ref.handle(), ref.device_ordinal()),
                        "~Context");
  } catch (const std::exception& e) {
    park_error({CUDA_SUCCESS, "~Context", e.what()});
  }
}

}  // namespace cudakit
