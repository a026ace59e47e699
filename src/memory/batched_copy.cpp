// CopyBatch (batched_copy.hpp): tracking of every buffer, then one launch of the copy
// kernel, one cuMemcpyBatchAsync, or a cuMemcpyAsync per copy.
#include "cudakit/batched_copy.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "cudakit/context.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "device/device_state.hpp"
#include "memory/copy_kernel.hpp"
#include "memory/host_ranges.hpp"
#include "memory/stream_fault.hpp"

namespace cudakit {

using driver::cu;

namespace {

detail::Allocation* page_locked(const detail::HostBytes& host) {
  return host.pinned_known ? host.pinned : detail::find_host_range(host.data, host.bytes);
}

[[noreturn]] void refuse_pageable(const char* direction, const void* p, std::size_t bytes) {
  char address[32];
  std::snprintf(address, sizeof address, "%p", p);
  throw InvalidArgument(std::string("CopyBatch::add (") + direction + "): the host memory at " + address + " (" +
                        std::to_string(bytes) +
                        " bytes) is pageable; a batch copies page-locked memory only (a PinnedBuffer, or a range "
                        "inside one or inside a HostRegistration); copy() pageable memory");
}

bool capturing(StreamRef stream) {
  detail::StreamState* s = stream.state();
  return s != nullptr && s->marks.capture() != nullptr;
}

}  // namespace

bool CopyBatch::driver_batches() { return driver::has(driver::EntryId::MemcpyBatchAsync); }

void CopyBatch::clear() noexcept {
  destinations_.clear();
  sources_.clear();
  sizes_.clear();
  uses_.clear();
  device_ = -1;
  registered_host_ = false;
  largest_ = 0;
}

namespace {
// The device of a buffer in the batch; -1 for host memory (and no buffer).
int device_of(const detail::Allocation* a) {
  if (a == nullptr || a->kind == detail::AllocationKind::pinned_host || a->kind == detail::AllocationKind::registered_host)
    return -1;
  return a->device;
}
}  // namespace

void CopyBatch::join_devices(const detail::Allocation* source, const detail::Allocation* destination) {
  int d = device_;
  for (int b : {device_of(source), device_of(destination)}) {
    if (b < 0) continue;
    if (d >= 0 && b != d)
      throw InvalidArgument("CopyBatch::add: a buffer of device " + std::to_string(b) + " joins a batch of device " +
                            std::to_string(d) + "'s buffers; copies between devices are not batched (copy() them)");
    d = b;
  }
  device_ = d;
}

void CopyBatch::add_use(detail::Allocation* allocation, Access access) {
  if (allocation == nullptr) return;
  if (!uses_.empty() && uses_.back().allocation == allocation && uses_.back().access == access) return;
  registered_host_ = registered_host_ || allocation->kind == detail::AllocationKind::registered_host;
  uses_.push_back({allocation, access});
}

void CopyBatch::add_copy(CUdeviceptr destination, CUdeviceptr source, std::size_t bytes) {
  if (bytes == 0) return;
  destinations_.push_back(destination);
  sources_.push_back(source);
  sizes_.push_back(bytes);
  largest_ = std::max(largest_, bytes);
}

void CopyBatch::add_host_to_device(const detail::HostBytes& source, const detail::DeviceBytes& destination) {
  if (destination.bytes == 0) return;
  detail::Allocation* host = page_locked(source);
  if (host == nullptr) refuse_pageable("host to device", source.data, source.bytes);
  join_devices(nullptr, destination.allocation);
  add_use(host, Access::read);
  add_use(destination.allocation, Access::write);
  add_copy(destination.pointer, reinterpret_cast<CUdeviceptr>(source.data), destination.bytes);
}

void CopyBatch::add_device_to_host(const detail::DeviceBytes& source, const detail::HostBytes& destination) {
  if (source.bytes == 0) return;
  detail::Allocation* host = page_locked(destination);
  if (host == nullptr) refuse_pageable("device to host", destination.data, destination.bytes);
  join_devices(source.allocation, nullptr);
  add_use(source.allocation, Access::read);
  add_use(host, Access::write);
  add_copy(reinterpret_cast<CUdeviceptr>(destination.data), source.pointer, source.bytes);
}

void CopyBatch::add_device_to_device(const detail::DeviceBytes& source, const detail::DeviceBytes& destination) {
  if (destination.bytes == 0) return;
  if (source.allocation == destination.allocation && source.pointer < destination.pointer + destination.bytes &&
      destination.pointer < source.pointer + source.bytes)
    throw InvalidArgument("CopyBatch::add (device to device): the source and the destination overlap");
  join_devices(source.allocation, destination.allocation);
  add_use(source.allocation, Access::read);
  add_use(destination.allocation, Access::write);
  add_copy(destination.pointer, source.pointer, destination.bytes);
}

void CopyBatch::submit_one_per_copy(StreamRef stream) {
  for (std::size_t i = 0; i < sizes_.size(); ++i) {
    CUresult r = cu.MemcpyAsync(destinations_[i], sources_[i], sizes_[i], stream.handle());
    if (r != CUDA_SUCCESS) [[unlikely]]
      detail::check_on_stream(r, cu.MemcpyAsync.name(),
                              Resource::of(ResourceKind::buffer, reinterpret_cast<const void*>(destinations_[i]),
                                           stream.device_ordinal()),
                              stream);
  }
}

bool CopyBatch::takes_copy_kernel(BatchPath path, int device) const {
  if (path == BatchPath::copy_kernel) return detail::copy_kernel_available(device);
  return path == BatchPath::automatic && !registered_host_ && sizes_.size() > 1 &&
         largest_ <= detail::copy_kernel_largest_automatic_region && detail::copy_kernel_available(device);
}

void CopyBatch::submit(StreamRef stream, BatchPath path) {
  const char* call = cu.MemcpyBatchAsync.name();
  stream.require_handle(call);
  if (sizes_.empty()) return;
  const int device = stream.device_ordinal();
  if (device_ >= 0 && device_ != device)
    throw InvalidArgument("CopyBatch::submit: the batch's buffers are on device " + std::to_string(device_) +
                          ", the stream on device " + std::to_string(device));
  check_not_poisoned(call, Resource::of(ResourceKind::stream, stream.handle(), device));
  if (path == BatchPath::copy_kernel && registered_host_)
    throw InvalidArgument("CopyBatch::submit with BatchPath::copy_kernel: a copy reads or writes a HostRegistration, "
                          "which the copy kernel cannot address; use BatchPath::automatic");
  const bool kernel = takes_copy_kernel(path, device);  // before any use: loading it may fail, never half-ordered
  for (const Use& u : uses_) u.allocation->use(stream, u.access);
  ContextRef(detail::library_context(device), device).make_current();
  if (kernel) {
    detail::launch_copy_kernel(stream, destinations_.data(), sources_.data(), sizes_.data(), sizes_.size());
  } else if (path == BatchPath::one_per_copy) {
    submit_one_per_copy(stream);
  } else {
    submit_driver_batch(stream);
  }
}

void CopyBatch::submit_driver_batch(StreamRef stream) {
  // A capture gets one node per copy: cudakit does not rely on the driver capturing a batch.
  if (sizes_.size() == 1 || capturing(stream) || !driver_batches()) {
    submit_one_per_copy(stream);
    return;
  }
  const int device = stream.device_ordinal();
  CUmemcpyAttributes attributes{};
  attributes.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;  // ordered like any copy on the stream
  attributes.flags = CU_MEMCPY_FLAG_DEFAULT;
  std::size_t first_copy_of_attributes = 0;
  std::size_t failed = static_cast<std::size_t>(-1);
  CUresult r = cu.MemcpyBatchAsync(destinations_.data(), sources_.data(), sizes_.data(), sizes_.size(), &attributes,
                                   &first_copy_of_attributes, 1, &failed, stream.handle());
  if (r != CUDA_SUCCESS) [[unlikely]] {
    Resource res = Resource::of(ResourceKind::stream, stream.handle(), device);
    if (failed < sizes_.size()) {
      res = Resource::of(ResourceKind::buffer, reinterpret_cast<const void*>(destinations_[failed]), device);
    }
    detail::check_on_stream(r, cu.MemcpyBatchAsync.name(), res, stream);
  }
}

}  // namespace cudakit
