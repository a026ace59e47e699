#include "memory/virtual_memory.hpp"

#include <string>

#include "cudakit/context.hpp"
#include "cudakit/device.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "device/device_state.hpp"
#include "driver/checked_call.hpp"
#include "memory/out_of_memory.hpp"

namespace cudakit::detail::vmm {

using driver::cu;

namespace {

Resource range_resource(CUdeviceptr address, int device) {
  return Resource::of(ResourceKind::buffer, reinterpret_cast<const void*>(address), device);
}

// The driver names a device location by its CUdevice handle, not by the ordinal.
int location_of(int device) { return Device::get(device).handle(); }

CUmemAccessDesc read_write_for(int device) {
  CUmemAccessDesc d{};
  d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  d.location.id = location_of(device);
  d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return d;
}

}  // namespace

bool supported(int device) {
  return Device::get(device).attribute(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) != 0;
}

CUmemAllocationProp chunk_properties(int device, CUmemAllocationHandleType shareable) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = location_of(device);
  p.requestedHandleTypes = shareable;
  return p;
}

// Not cached: a buffer asks once when it is made, which is no hot path, and the answer
// depends on the handle types as well as the device.
std::size_t granularity(int device, CUmemAllocationHandleType shareable) {
  CUmemAllocationProp p = chunk_properties(device, shareable);
  std::size_t g = 0;
  checked_call(cu.MemGetAllocationGranularity, Resource::of_device(device), &g, &p,
               CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  if (g == 0) g = std::size_t(2) << 20;  // never 0 on a real driver; 2 MiB is every GPU's page
  return g;
}

std::size_t round_up(std::size_t bytes, std::size_t granularity) {
  std::size_t rest = bytes % granularity;
  if (rest == 0) return bytes;
  if (bytes > static_cast<std::size_t>(-1) - (granularity - rest))
    throw InvalidArgument(std::to_string(bytes) + " bytes overflow size_t when rounded up to the allocation granularity (" +
                          std::to_string(granularity) + " bytes)");
  return bytes + (granularity - rest);
}

CUdeviceptr reserve(int device, std::size_t bytes, std::size_t alignment) {
  ContextRef(library_context(device), device).make_current();
  CUdeviceptr address = 0;
  CUresult r = cu.MemAddressReserve(&address, bytes, alignment, 0, 0);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) throw_device_out_of_memory(cu.MemAddressReserve.name(), device, bytes);
  check(r, cu.MemAddressReserve.name(), Resource::of_device(device));
  return address;
}

CUresult free_reservation(CUdeviceptr address, std::size_t bytes) noexcept {
  return cu.MemAddressFree(address, bytes);
}

CUmemGenericAllocationHandle create_chunk(int device, std::size_t bytes, const CUmemAllocationProp& properties) {
  CUmemGenericAllocationHandle handle = 0;
  CUresult r = cu.MemCreate(&handle, bytes, &properties, 0);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) throw_device_out_of_memory(cu.MemCreate.name(), device, bytes);
  check(r, cu.MemCreate.name(), Resource::of_device(device));
  return handle;
}

void grant_access(CUdeviceptr address, std::size_t bytes, std::span<const int> devices, int owner_device) {
  // At most a handful of devices: one descriptor each, on the stack.
  constexpr std::size_t most = 64;
  CUmemAccessDesc descriptors[most];
  std::size_t n = 0;
  for (int d : devices)
    if (n < most) descriptors[n++] = read_write_for(d);
  checked_call(cu.MemSetAccess, range_resource(address, owner_device), address, bytes, descriptors, n);
}

void map_chunk(int device, CUdeviceptr address, std::size_t bytes, CUmemGenericAllocationHandle handle,
               std::span<const int> peers) {
  checked_call(cu.MemMap, range_resource(address, device), address, bytes, std::size_t{0}, handle, 0ull);
  try {
    int devices[65];
    std::size_t n = 0;
    devices[n++] = device;
    for (int p : peers)
      if (n < 65 && p != device) devices[n++] = p;
    grant_access(address, bytes, std::span<const int>(devices, n), device);
  } catch (...) {
    (void)cu.MemUnmap(address, bytes);  // the access error is the one to report
    throw;
  }
}

CUmemGenericAllocationHandle map_new_chunk(int device, CUdeviceptr address, std::size_t bytes,
                                           std::span<const int> peers, CUmemAllocationHandleType shareable) {
  CUmemAllocationProp properties = chunk_properties(device, shareable);
  CUmemGenericAllocationHandle handle = create_chunk(device, bytes, properties);
  try {
    map_chunk(device, address, bytes, handle, peers);
  } catch (...) {
    (void)cu.MemRelease(handle);  // the mapping's error is the one to report
    throw;
  }
  return handle;
}

CUresult release_chunk(CUmemGenericAllocationHandle handle) noexcept { return cu.MemRelease(handle); }

TeardownResult unmap_and_release(CUdeviceptr address, std::size_t bytes, CUmemGenericAllocationHandle handle) noexcept {
  TeardownResult result;
  if (CUresult r = cu.MemUnmap(address, bytes); r != CUDA_SUCCESS) result = {r, cu.MemUnmap.name()};
  if (CUresult r = release_chunk(handle); r != CUDA_SUCCESS && result.code == CUDA_SUCCESS)
    result = {r, cu.MemRelease.name()};
  return result;
}

}  // namespace cudakit::detail::vmm
