// CopyBatch: many small copies submitted to a stream as one operation.
//
//   cudakit::CopyBatch batch;
//   for (int i = 0; i < 1000; ++i) batch.add(pinned.subspan(i * n, n), device_buffer.subspan(i * n, n));
//   batch.submit(stream);                  // one driver call on CUDA 12.8 and newer
//   batch.clear();                         // keeps its memory for the next step
//
// Each copy is host to device, device to host or device to device, between the same
// ranges copy() takes (copy.hpp), except that host memory must be page-locked (a
// PinnedBuffer, or a range inside one or inside a HostRegistration): the whole batch is
// asynchronous, and pageable memory would need staging per copy, which is what a batch
// avoids. Pageable host memory throws InvalidArgument when it is added.
//
// submit() orders every buffer involved like copy() does (each source is read, each
// destination written, DESIGN 5), a graph that captures the batch keeps them all alive,
// and then submits the copies by its path:
//   - BatchPath::automatic (the default): the copy kernel when every copy is small (at most
//     64 KiB) and every side is memory the device addresses, else the driver's batch. The
//     first submit on a device compiles the kernel with NVRTC (about a hundred
//     milliseconds, once per process); without NVRTC the driver's batch runs instead.
//   - BatchPath::copy_kernel: one launch of cudakit's copy kernel whose parameters carry
//     the table of regions: every side must be memory the device addresses (device,
//     managed, or PinnedBuffer memory; not a HostRegistration, InvalidArgument). Where the
//     kernel is unavailable (no NVRTC), the driver's batch runs instead. Inside a capture it
//     is one kernel node.
//   - BatchPath::driver_batch: cuMemcpyBatchAsync where the driver has it (CUDA 12.8 and
//     newer), one call for the whole batch, ordered on the stream like any copy; otherwise,
//     and inside a capture, one cuMemcpyAsync per copy (the driver makes each a graph node).
//   - BatchPath::one_per_copy: one cuMemcpyAsync per copy.
// On the H200, 1,000 copies of 4 KiB took 0.009x to 0.047x the time of a loop of single
// copies through the kernel, and 0.43x to 0.92x through cuMemcpyBatchAsync (docs/memory.md).
// Use a batch for many copies of a few KiB each (gathering a step's small tensors, paged
// KV-cache blocks): submission costs one launch or call instead of one per copy. Large
// copies gain nothing from it; copy() them.
//
// The copies of one batch are not ordered among themselves (the driver may run them at
// once): a batch must not read what another copy of it writes. Submit two batches then.
//
// The extents of each pair must match (InvalidArgument naming both, as copy()); copies
// between two devices are not batched (copy() them: they need peer access checks).
//
// Thread safety: one thread at a time fills and submits a batch, like a standard
// container; the buffers follow their own rules.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <vector>

#include "cudakit/copy.hpp"
#include "cudakit/export.hpp"
#include "cudakit/stream.hpp"

namespace cudakit {

/// How submit() sends the copies to the driver (see above).
enum class BatchPath {
  automatic,      ///< the copy kernel for small copies the device addresses, else driver_batch
  copy_kernel,    ///< one kernel launch copies every region (see above); driver_batch where unavailable
  driver_batch,   ///< cuMemcpyBatchAsync where available and not capturing, else one call per copy
  one_per_copy,   ///< one cuMemcpyAsync per copy (for comparisons)
};

/// A list of copies submitted together (see above). Move-only like a container of them.
class CUDAKIT_API CopyBatch {
 public:
  /// An empty batch.
  CopyBatch() = default;

  /// Host to device: `source` must be page-locked host memory.
  template <class Source, class Destination>
    requires host_range<const Source&> && writable_device_range<Destination> &&
             std::same_as<host_value_t<const Source&>, device_value_t<Destination>>
  void add(const Source& source, Destination&& destination) {
    auto dst = detail::as_device_span(std::forward<Destination>(destination));
    detail::check_extents("CopyBatch::add (host to device)", std::ranges::size(source), dst.size(),
                          sizeof(device_value_t<Destination>));
    add_host_to_device(detail::host_bytes(source), detail::device_bytes(dst));
  }
  /// Device to host: `destination` must be page-locked host memory.
  template <class Source, class Destination>
    requires device_range<const Source&> && writable_host_range<Destination&&> &&
             std::same_as<device_value_t<const Source&>, host_value_t<Destination&&>>
  void add(const Source& source, Destination&& destination) {
    auto src = detail::as_device_span(source);
    detail::check_extents("CopyBatch::add (device to host)", src.size(), std::ranges::size(destination),
                          sizeof(host_value_t<Destination&&>));
    add_device_to_host(detail::device_bytes(src), detail::host_bytes(destination));
  }
  /// Device to device, on one device; the ranges must not overlap.
  template <class Source, class Destination>
    requires device_range<const Source&> && writable_device_range<Destination> &&
             std::same_as<device_value_t<const Source&>, device_value_t<Destination>>
  void add(const Source& source, Destination&& destination) {
    auto src = detail::as_device_span(source);
    auto dst = detail::as_device_span(std::forward<Destination>(destination));
    detail::check_extents("CopyBatch::add (device to device)", src.size(), dst.size(), sizeof(device_value_t<Destination>));
    add_device_to_device(detail::device_bytes(src), detail::device_bytes(dst));
  }

  /// Orders every buffer of the batch on `stream` and submits the copies there. The batch
  /// keeps its copies (submit it again, or clear() it). Throws InvalidArgument for buffers
  /// of another device than `stream`'s, DriverError for the driver's refusal (naming the
  /// copy it refused where the driver says).
  void submit(StreamRef stream, BatchPath path = BatchPath::automatic);

  /// How many copies the batch holds, and whether it holds none.
  std::size_t size() const noexcept { return sizes_.size(); }
  bool empty() const noexcept { return sizes_.empty(); }
  /// Forgets the copies and keeps the memory for the next ones.
  void clear() noexcept;

  /// Whether this driver has cuMemcpyBatchAsync (CUDA 12.8 and newer).
  static bool driver_batches();

 private:
  struct Use {
    detail::Allocation* allocation;
    Access access;
  };
  void add_host_to_device(const detail::HostBytes& source, const detail::DeviceBytes& destination);
  void add_device_to_host(const detail::DeviceBytes& source, const detail::HostBytes& destination);
  void add_device_to_device(const detail::DeviceBytes& source, const detail::DeviceBytes& destination);
  void add_copy(CUdeviceptr destination, CUdeviceptr source, std::size_t bytes);
  void join_devices(const detail::Allocation* source, const detail::Allocation* destination);
  void add_use(detail::Allocation* allocation, Access access);
  void submit_one_per_copy(StreamRef stream);
  void submit_driver_batch(StreamRef stream);
  bool takes_copy_kernel(BatchPath path, int device) const;

  std::vector<CUdeviceptr> destinations_;
  std::vector<CUdeviceptr> sources_;
  std::vector<std::size_t> sizes_;
  std::vector<Use> uses_;  // per copy, a use repeated back to back recorded once
  int device_ = -1;        // the device of the device buffers, -1 while none
  bool registered_host_ = false;  // a side is a HostRegistration: the copy kernel cannot address it
  std::size_t largest_ = 0;       // bytes of the largest copy
};

}  // namespace cudakit
