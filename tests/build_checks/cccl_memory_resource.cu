// Compiled by nvcc -std=c++20, every warning an error: cudakit's memory resources and
// CCCL's cuda::mr concepts meet both ways (interop/cccl_memory_resource.hpp). A
// PoolResource is a CCCL async resource with device_accessible memory; a CCCL resource
// (a resource ref, or one shaped as RMM's are) backs a DeviceBuffer.
#include <cudakit/interop/cccl_memory_resource.hpp>

#include <cudakit/device_buffer.hpp>

#include <cstddef>

namespace cccl_check {

// A resource shaped as RMM's stream-ordered resources are (allocate_async on a
// cuda::stream_ref, equality, the device_accessible property); never called.
class OutsideResource {
 public:
  void* allocate(std::size_t, std::size_t) { return nullptr; }
  void deallocate(void*, std::size_t, std::size_t) {}
  void* allocate_async(std::size_t, std::size_t, cuda::stream_ref) { return nullptr; }
  void deallocate_async(void*, std::size_t, std::size_t, cuda::stream_ref) {}
  friend bool operator==(const OutsideResource&, const OutsideResource&) { return true; }
  friend bool operator!=(const OutsideResource&, const OutsideResource&) { return false; }
  friend void get_property(const OutsideResource&, cuda::mr::device_accessible) noexcept {}
};

// Host memory only: no device_accessible property.
class HostOnlyResource {
 public:
  void* allocate(std::size_t, std::size_t) { return nullptr; }
  void deallocate(void*, std::size_t, std::size_t) {}
  void* allocate_async(std::size_t, std::size_t, cuda::stream_ref) { return nullptr; }
  void deallocate_async(void*, std::size_t, std::size_t, cuda::stream_ref) {}
  friend bool operator==(const HostOnlyResource&, const HostOnlyResource&) { return true; }
  friend bool operator!=(const HostOnlyResource&, const HostOnlyResource&) { return false; }
  friend void get_property(const HostOnlyResource&, cuda::mr::host_accessible) noexcept {}
};

using DeviceRef = cuda::mr::async_resource_ref<cuda::mr::device_accessible>;

// cudakit's pool, seen by CCCL.
static_assert(cuda::mr::async_resource<cudakit::PoolResource>);
static_assert(cuda::mr::async_resource_with<cudakit::PoolResource, cuda::mr::device_accessible>);
static_assert(!cuda::mr::async_resource_with<cudakit::PoolResource, cuda::mr::host_accessible>);
// cudakit's own concept.
static_assert(cudakit::DeviceMemoryResource<cudakit::PoolResource>);
static_assert(cudakit::DeviceMemoryResource<cudakit::MemoryResource>);
static_assert(cudakit::DeviceMemoryResource<cudakit::CcclResource<DeviceRef>>);
static_assert(cudakit::DeviceMemoryResource<cudakit::CcclResource<OutsideResource>>);
// Resources of the CCCL shape are adapted, not taken as they are; host memory never.
static_assert(!cudakit::DeviceMemoryResource<OutsideResource>);
static_assert(!cuda::mr::async_resource_with<HostOnlyResource, cuda::mr::device_accessible>);

}  // namespace cccl_check

using cccl_check::DeviceRef;
using cccl_check::OutsideResource;

// Never called: it instantiates the templates at compile time.
void cudakit_cccl_memory_resource_instantiate(cudakit::StreamRef stream, cudakit::PoolResource& pool,
                                              OutsideResource& outside) {
  DeviceRef ref = cudakit::to_cccl(pool);
  cuda::stream_ref on(cudakit::runtime_stream(stream));
  void* p = ref.allocate_async(64, 256, on);
  ref.deallocate_async(p, 64, 256, on);
  cudakit::DeviceBuffer<float> a(stream, 16, cudakit::uninitialized, cudakit::from_cccl(ref));
  cudakit::DeviceBuffer<float> b(stream, 16, cudakit::zeroed, pool);
  cudakit::DeviceBuffer<int> c(stream, 16, cudakit::zeroed, cudakit::from_cccl(DeviceRef(outside)));
  cudakit::DeviceBuffer<int> d(stream, 16, cudakit::uninitialized, cudakit::from_cccl(outside));
  cudakit::MemoryResource any = pool;
  cudakit::DeviceBuffer<double> e(stream, 4, cudakit::zeroed, any);
}
