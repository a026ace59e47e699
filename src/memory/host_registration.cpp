#include "device/capture_tolerant_scope.hpp"
#include "cudakit/host_registration.hpp"

#include "cudakit/context.hpp"
#include "cudakit/driver.hpp"
#include "device/device_state.hpp"
#include "driver/checked_call.hpp"
#include "memory/host_ranges.hpp"
#include "memory/out_of_memory.hpp"

namespace cudakit::detail {

using driver::cu;

Ref<Allocation> register_host_memory(const void* data, std::size_t bytes, HostRegistrationOptions options,
                                 CUdeviceptr* mapped) {
  *mapped = 0;
  if (bytes == 0) return nullptr;
  if (data == nullptr) throw InvalidArgument("HostRegistration of " + std::to_string(bytes) + " bytes at a null pointer");
  constexpr int device = 0;  // portable: see pinned_buffer.cpp
  Resource res = Resource::of(ResourceKind::host_registration, data, device);
  check_not_poisoned(cu.MemHostRegister.name(), res);
  ContextRef(library_context(device), device).make_current();
  unsigned flags = CU_MEMHOSTREGISTER_PORTABLE;
  if (options.mapped) flags |= CU_MEMHOSTREGISTER_DEVICEMAP;
  if (options.read_only) flags |= CU_MEMHOSTREGISTER_READ_ONLY;
  void* p = const_cast<void*>(data);  // the driver only page-locks it
  detail::CaptureTolerantScope tolerant;  // beside a capture: relaxed mode leaves it valid (DESIGN 6)
  CUresult r = cu.MemHostRegister(p, bytes, flags);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) throw_host_out_of_memory(cu.MemHostRegister.name(), res, bytes);
  check(r, cu.MemHostRegister.name(), res);
  Ref<Allocation> a;
  try {
    a = Allocation::create(reinterpret_cast<CUdeviceptr>(p), bytes, device, AllocationKind::registered_host,
                           StreamRef{});
  } catch (...) {
    (void)cu.MemHostUnregister(p);
    throw;
  }
  try {
    if (options.mapped) checked_call(cu.MemHostGetDevicePointer, res, mapped, p, 0);
    register_host_range(p, bytes, a.get());
  } catch (...) {
    *mapped = 0;
    throw;  // `a` unregisters it (nothing used it yet)
  }
  return a;
}

}  // namespace cudakit::detail
