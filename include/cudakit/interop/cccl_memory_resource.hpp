// Interop with CCCL's memory resources (libcu++'s cuda::mr, CUDA 13; RMM's resources
// speak the same concept): a CCCL or RMM resource backs cudakit buffers, and cudakit's
// PoolResource backs CCCL code.
//
//   // cudakit's pool behind CCCL: a PoolResource is a cuda::mr async resource with the
//   // device_accessible property as it is (this header adds the property).
//   cudakit::PoolResource pool(device);
//   cuda::mr::async_resource_ref<cuda::mr::device_accessible> ref{pool};
//
//   // A CCCL or RMM resource behind a cudakit buffer (RMM: rmm::device_async_resource_ref).
//   cudakit::DeviceBuffer<float> x(stream, n, cudakit::uninitialized, cudakit::from_cccl(ref));
//
// The buffer holds the CCCL resource by value (a resource ref is a view: the resource it
// names must outlive the buffer's memory) and gives the memory back with its
// deallocate_async on a cudakit stream, ordered after every stream that used it.
//
// libcu++'s memory resources are still behind LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE
// in CUDA 13: this header defines it. Include it before any other CCCL header, or define
// the macro for the whole build (-DLIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE).
// Not included by cudakit.hpp: it needs CCCL's headers (CUDA 13's include/cccl) and
// calls into the runtime API's types.
#pragma once

#ifndef LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE
#define LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE
#endif

#include <cuda/memory_resource>
#include <cuda/stream_ref>

#include <cstddef>
#include <utility>

#include "cudakit/interop/runtime.hpp"
#include "cudakit/memory_resource.hpp"
#include "cudakit/pool_resource.hpp"

namespace cudakit {

/// A PoolResource's memory is device memory, in CCCL's terms too.
inline void get_property(const PoolResource&, cuda::mr::device_accessible) noexcept {}

/// A CCCL async resource with the device_accessible property (an RMM resource ref, a
/// cuda::mr::async_resource_ref, a resource of your own) as a cudakit resource: the
/// stream a buffer names becomes a cuda::stream_ref.
template <class R>
  requires cuda::mr::async_resource_with<R, cuda::mr::device_accessible>
class CcclResource {
 public:
  /// Holds a copy of `resource` (a resource ref: a view of it).
  explicit CcclResource(R resource) : resource_(std::move(resource)) {}

  /// The CCCL resource's blocking allocation.
  void* allocate(std::size_t bytes, std::size_t alignment) { return resource_.allocate(bytes, alignment); }
  /// The CCCL resource's blocking free.
  void deallocate(void* pointer, std::size_t bytes, std::size_t alignment) {
    resource_.deallocate(pointer, bytes, alignment);
  }
  /// The CCCL resource's allocation on the same stream as a cuda::stream_ref (EmptyHandle
  /// for an empty stream).
  void* allocate_async(std::size_t bytes, std::size_t alignment, StreamRef stream) {
    return resource_.allocate_async(bytes, alignment, cuda::stream_ref(runtime_stream(stream)));
  }
  /// The CCCL resource's free on the same stream as a cuda::stream_ref.
  void deallocate_async(void* pointer, std::size_t bytes, std::size_t alignment, StreamRef stream) {
    resource_.deallocate_async(pointer, bytes, alignment, cuda::stream_ref(runtime_stream(stream)));
  }

  /// The CCCL resource.
  const R& upstream() const noexcept { return resource_; }

  /// Equal when the CCCL resources are.
  friend bool operator==(const CcclResource& a, const CcclResource& b) { return a.resource_ == b.resource_; }
  /// Its memory is device memory (the CCCL resource has device_accessible).
  friend void get_property(const CcclResource&, device_accessible) noexcept {}

 private:
  R resource_;
};

/// A CCCL or RMM resource as a resource a DeviceBuffer takes (see above).
template <class R>
  requires cuda::mr::async_resource_with<R, cuda::mr::device_accessible>
MemoryResource from_cccl(R resource) {
  return MemoryResource(CcclResource<R>(std::move(resource)));
}

/// A CCCL view of cudakit's pool resource, which must outlive it.
inline cuda::mr::async_resource_ref<cuda::mr::device_accessible> to_cccl(PoolResource& pool) {
  return cuda::mr::async_resource_ref<cuda::mr::device_accessible>(pool);
}

}  // namespace cudakit
