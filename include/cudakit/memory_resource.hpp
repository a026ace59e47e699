// Memory resources: where a buffer's device memory comes from, as an object.
//
// A memory resource allocates and frees memory, stream-ordered or not. cudakit's shape
// for it is the one CCCL's `cuda::mr::async_resource` concept defines (CUDA 13's
// libcu++), with cudakit's StreamRef where CCCL names `cuda::stream_ref`:
//
//   void* allocate(std::size_t bytes, std::size_t alignment);
//   void  deallocate(void* pointer, std::size_t bytes, std::size_t alignment);
//   void* allocate_async(std::size_t bytes, std::size_t alignment, StreamRef stream);
//   void  deallocate_async(void* pointer, std::size_t bytes, std::size_t alignment, StreamRef stream);
//   equality (two resources are equal when memory from one may be freed by the other)
//
// and, like CCCL, properties as tags found through `get_property(resource, tag)`:
// `device_accessible` says the memory is device memory a kernel can use. A DeviceBuffer
// takes any resource with that property (DeviceMemoryResource), wrapped in a
// MemoryResource, which the buffer holds until its memory is freed (DESIGN 4):
//
//   cudakit::PoolResource pool(device);                 // pool_resource.hpp
//   DeviceBuffer<float> x(stream, n, cudakit::uninitialized, pool);
//
// The buffer frees its memory with deallocate_async on a stream that is ordered after
// every stream that used it (DESIGN 5), as it does for its own pool memory. Alignment is
// the resource's: a DeviceBuffer asks for default_alignment (256 bytes, what cuMemAlloc
// guarantees).
//
// CCCL and RMM resources back cudakit buffers, and cudakit's PoolResource backs CCCL
// code, through include/cudakit/interop/cccl_memory_resource.hpp; the core needs no
// CCCL header.
//
// Thread safety: a MemoryResource may be copied and used from any thread when the
// resource it wraps may be (PoolResource may).
#pragma once

#include <concepts>
#include <cstddef>
#include <memory>
#include <type_traits>
#include <typeinfo>
#include <utility>

#include "cudakit/export.hpp"
#include "cudakit/stream.hpp"

namespace cudakit {

/// The property of a resource whose memory the device can use (CCCL's
/// cuda::mr::device_accessible, as a cudakit tag).
struct device_accessible {};
/// The property of a resource whose memory the host can use.
struct host_accessible {};

/// The alignment a DeviceBuffer asks of its resource: 256 bytes, cuMemAlloc's.
inline constexpr std::size_t default_alignment = 256;

/// `get_property(resource, Property{})` is declared for R (CCCL's has_property).
template <class R, class Property>
concept has_property = requires(const R& resource) { get_property(resource, Property{}); };

/// CCCL's async_resource concept, with cudakit's StreamRef for the stream.
template <class R>
concept AsyncMemoryResource =
    std::equality_comparable<R> && std::copy_constructible<R> &&
    requires(R& resource, void* pointer, std::size_t bytes, std::size_t alignment, StreamRef stream) {
      { resource.allocate(bytes, alignment) } -> std::same_as<void*>;
      { resource.deallocate(pointer, bytes, alignment) } -> std::same_as<void>;
      { resource.allocate_async(bytes, alignment, stream) } -> std::same_as<void*>;
      { resource.deallocate_async(pointer, bytes, alignment, stream) } -> std::same_as<void>;
    };

/// A resource a DeviceBuffer can take: asynchronous, and its memory device-accessible.
template <class R>
concept DeviceMemoryResource = AsyncMemoryResource<R> && has_property<R, device_accessible>;

namespace detail {
/// The type-erased interface behind MemoryResource.
struct ResourceModel {
  virtual ~ResourceModel() = default;
  virtual void* allocate(std::size_t bytes, std::size_t alignment) = 0;
  virtual void deallocate(void* pointer, std::size_t bytes, std::size_t alignment) = 0;
  virtual void* allocate_async(std::size_t bytes, std::size_t alignment, StreamRef stream) = 0;
  virtual void deallocate_async(void* pointer, std::size_t bytes, std::size_t alignment, StreamRef stream) = 0;
  virtual bool equals(const ResourceModel& other) const noexcept = 0;
  virtual const std::type_info& type() const noexcept = 0;
};

template <class R>
struct ResourceModelOf final : ResourceModel {
  explicit ResourceModelOf(R r) : resource(std::move(r)) {}
  void* allocate(std::size_t bytes, std::size_t alignment) override { return resource.allocate(bytes, alignment); }
  void deallocate(void* pointer, std::size_t bytes, std::size_t alignment) override {
    resource.deallocate(pointer, bytes, alignment);
  }
  void* allocate_async(std::size_t bytes, std::size_t alignment, StreamRef stream) override {
    return resource.allocate_async(bytes, alignment, stream);
  }
  void deallocate_async(void* pointer, std::size_t bytes, std::size_t alignment, StreamRef stream) override {
    resource.deallocate_async(pointer, bytes, alignment, stream);
  }
  bool equals(const ResourceModel& other) const noexcept override {
    return other.type() == typeid(R) && static_cast<const ResourceModelOf&>(other).resource == resource;
  }
  const std::type_info& type() const noexcept override { return typeid(R); }
  R resource;
};
}  // namespace detail

/// Any device memory resource, held by value and shared by its copies (a copy is cheap:
/// one reference count). A buffer allocated from it keeps the resource alive until the
/// buffer's memory is freed. Satisfies DeviceMemoryResource itself.
class MemoryResource {
 public:
  /// Wraps a copy of `resource`.
  template <class R>
    requires(!std::same_as<std::remove_cvref_t<R>, MemoryResource>) && DeviceMemoryResource<R>
  MemoryResource(R resource)  // NOLINT: implicit, so a buffer takes a resource as it is
      : model_(std::make_shared<detail::ResourceModelOf<R>>(std::move(resource))) {}

  /// The wrapped resource's blocking allocation.
  void* allocate(std::size_t bytes, std::size_t alignment = default_alignment) const {
    return model_->allocate(bytes, alignment);
  }
  /// The wrapped resource's blocking free.
  void deallocate(void* pointer, std::size_t bytes, std::size_t alignment = default_alignment) const {
    model_->deallocate(pointer, bytes, alignment);
  }
  /// The wrapped resource's allocation, stream-ordered on `stream`.
  void* allocate_async(std::size_t bytes, std::size_t alignment, StreamRef stream) const {
    return model_->allocate_async(bytes, alignment, stream);
  }
  /// The wrapped resource's free, stream-ordered on `stream`.
  void deallocate_async(void* pointer, std::size_t bytes, std::size_t alignment, StreamRef stream) const {
    model_->deallocate_async(pointer, bytes, alignment, stream);
  }

  /// Equal when the wrapped resources are of one type and compare equal.
  friend bool operator==(const MemoryResource& a, const MemoryResource& b) noexcept {
    return a.model_ == b.model_ || a.model_->equals(*b.model_);
  }
  /// Its memory is device memory (only device resources are wrapped).
  friend void get_property(const MemoryResource&, device_accessible) noexcept {}

  /// Internal: the shared model (what a buffer's allocation keeps alive).
  const std::shared_ptr<detail::ResourceModel>& model() const noexcept { return model_; }

 private:
  std::shared_ptr<detail::ResourceModel> model_;
};

}  // namespace cudakit
