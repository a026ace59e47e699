// Copies and fills (copy.hpp): extent checks, tracking, and the choice between a direct
// driver copy (page-locked host memory) and staging (pageable host memory).
#include "cudakit/copy.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <string>

#include "cudakit/context.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "cudakit/peer_access.hpp"
#include "device/device_state.hpp"
#include "driver/checked_call.hpp"
#include "memory/host_ranges.hpp"
#include "memory/prefault.hpp"
#include "memory/staging.hpp"
#include "memory/stream_fault.hpp"

namespace cudakit::detail {

using driver::cu;

namespace {

Resource buffer_resource(const DeviceBytes& d) {
  return Resource::of(ResourceKind::buffer, reinterpret_cast<const void*>(d.pointer), d.device);
}

void make_current_for(StreamRef stream) {
  int device = stream.device_ordinal();
  ContextRef(library_context(device), device).make_current();
}

// The page-locked allocation holding the host bytes, or null when they are pageable.
Allocation* page_locked(const HostBytes& host) {
  return host.pinned_known ? host.pinned : find_host_range(host.data, host.bytes);
}

bool capturing(StreamRef stream) {
  StreamState* s = stream.state();
  return s != nullptr && s->marks.capture() != nullptr;
}

void refuse_in_capture(StreamRef stream, const char* what) {
  if (capturing(stream)) [[unlikely]]
    throw CaptureError(std::string(what) + " cannot be captured into a graph: " +
                       "cudakit stages pageable memory through buffers it reuses, so a replay would copy stale bytes "
                       "(and a blocking download cannot wait inside a capture); use a PinnedBuffer or a "
                       "HostRegistration for copies in a graph");
}

std::string count_words(std::size_t count, std::size_t element_bytes) {
  return std::to_string(count) + (count == 1 ? " element (" : " elements (") + std::to_string(count * element_bytes) +
         " bytes)";
}

// A pageable upload: chunk by chunk through staging buffers (detail/staging.hpp).
void staged_upload(StreamRef stream, const void* source, CUdeviceptr destination, std::size_t bytes,
                   const Resource& res) {
  const auto* from = static_cast<const unsigned char*>(source);
  for (std::size_t done = 0; done < bytes;) {
    StagingLease lease = acquire_staging(stream, true);
    std::size_t n = std::min(lease.capacity(), bytes - done);
    note_host_access(nullptr, lease.host(), n, true, "staging buffer (filled from pageable memory)");
    std::memcpy(lease.host(), from + done, n);
    check_on_stream(cu.MemcpyHtoDAsync(destination + done, lease.host(), n, stream.handle()), cu.MemcpyHtoDAsync.name(), res,
                    stream);
    lease.submitted(stream.handle());
    lease.record();  // the buffer is reused only after this copy read it
    done += n;
  }
  // Every byte of the source has been copied into staging: the caller may reuse it.
}

// Where a blocking download puts the bytes: memory the caller has, or memory made once
// the first copies are queued (a new vector). Either way its pages are mapped in one call
// then (memory/prefault.hpp): the allocation and the first touch overlap the device's
// work instead of following it, page fault by page fault.
class HostDestination {
 public:
  explicit HostDestination(void* data) : data_(static_cast<unsigned char*>(data)) {}
  explicit HostDestination(NewHostMemory make) : make_(make) {}
  // Called once the first copy is queued, before the first wait.
  unsigned char* get(std::size_t bytes) {
    if (ready_) return data_;
    ready_ = true;
    if (data_ != nullptr) {
      prefault_for_write(data_, bytes);
      return data_;
    }
    prefault_for_write(make_.reserve(make_.context, bytes), bytes);  // before the vector's zero-fill touches it
    data_ = static_cast<unsigned char*>(make_.make(make_.context, bytes));
    return data_;
  }

 private:
  unsigned char* data_ = nullptr;
  NewHostMemory make_{};
  bool ready_ = false;
};

// A blocking pageable download: copies into staging buffers, a few in flight at a time,
// each emptied into the destination once its copy completed.
void staged_download_blocking(StreamRef stream, CUdeviceptr source, HostDestination destination, std::size_t bytes,
                              const Resource& res) {
  constexpr std::size_t max_in_flight = 4;
  struct InFlight {
    StagingLease lease;
    std::size_t offset = 0;
    std::size_t n = 0;
  };
  std::array<InFlight, max_in_flight> window;  // a ring, oldest at `head`: no allocation
  std::size_t head = 0, count = 0;
  auto finish_oldest = [&] {
    InFlight& f = window[head];
    unsigned char* to = destination.get(bytes);  // before the wait: it overlaps the copies
    f.lease.wait(stream);
    note_host_access(nullptr, f.lease.host(), f.n, false, "staging buffer (emptied into pageable memory)");
    std::memcpy(to + f.offset, f.lease.host(), f.n);
    f.lease = StagingLease();  // the buffer goes back to the pool, idle
    head = (head + 1) % max_in_flight;
    --count;
  };
  for (std::size_t done = 0; done < bytes;) {
    // While this thread holds buffers, it empties its own rather than wait for others'.
    StagingLease lease = acquire_staging(stream, count == 0);
    if (!lease) {
      finish_oldest();
      continue;
    }
    std::size_t n = std::min(lease.capacity(), bytes - done);
    check_on_stream(cu.MemcpyDtoHAsync(lease.host(), source + done, n, stream.handle()), cu.MemcpyDtoHAsync.name(), res,
                    stream);
    lease.submitted(stream.handle());
    lease.record();
    window[(head + count) % max_in_flight] = InFlight{std::move(lease), done, n};
    ++count;
    if (count == max_in_flight) finish_oldest();
    done += n;
  }
  while (count != 0) finish_oldest();
}

// A stream-ordered pageable download: each chunk lands in a staging buffer, and a host
// callback on the stream copies it into the destination; the buffer's event is recorded
// after the callback, so it is reused only once the callback has read it.
void staged_download_async(StreamRef stream, CUdeviceptr source, void* destination, std::size_t bytes,
                           const Resource& res) {
  auto* to = static_cast<unsigned char*>(destination);
  for (std::size_t done = 0; done < bytes;) {
    StagingLease lease = acquire_staging(stream, true);
    std::size_t n = std::min(lease.capacity(), bytes - done);
    check_on_stream(cu.MemcpyDtoHAsync(lease.host(), source + done, n, stream.handle()), cu.MemcpyDtoHAsync.name(), res,
                    stream);
    lease.submitted(stream.handle());
    stream.host_callback([from = lease.host(), into = to + done, n, on = stream.handle()] {
      note_host_access(on, from, n, false, "staging buffer (emptied into pageable memory by a host callback)");
      std::memcpy(into, from, n);
    });
    lease.record();
    // The destination's pages mapped in one call while the device works (the callbacks
    // only write; the call changes no byte, so it may overlap them).
    if (done == 0) prefault_for_write(destination, bytes);
    done += n;
  }
}

}  // namespace

void throw_extent_mismatch(const char* operation, std::size_t source_count, std::size_t destination_count,
                           std::size_t element_bytes) {
  throw InvalidArgument(std::string(operation) + ": the source has " + count_words(source_count, element_bytes) +
                        " but the destination has " + count_words(destination_count, element_bytes) +
                        "; a copy needs equal extents (copy a part with subspan())");
}

void copy_host_to_device(StreamRef stream, HostBytes source, DeviceBytes destination) {
  stream.require_handle(cu.MemcpyHtoDAsync.name());
  if (destination.bytes == 0) return;
  Resource res = buffer_resource(destination);
  check_not_poisoned(cu.MemcpyHtoDAsync.name(), res);
  Allocation* pinned = page_locked(source);
  if (pinned == nullptr) refuse_in_capture(stream, "a copy from pageable host memory");
  destination.allocation->use(stream, Access::write);
  make_current_for(stream);
  if (pinned != nullptr) {
    pinned->use(stream, Access::read);
    check_on_stream(cu.MemcpyHtoDAsync(destination.pointer, source.data, destination.bytes, stream.handle()),
                    cu.MemcpyHtoDAsync.name(), res, stream);
    return;
  }
  staged_upload(stream, source.data, destination.pointer, destination.bytes, res);
}

void copy_device_to_host(StreamRef stream, DeviceBytes source, HostBytes destination, bool wait) {
  stream.require_handle(cu.MemcpyDtoHAsync.name());
  if (source.bytes == 0) return;
  Resource res = buffer_resource(source);
  check_not_poisoned(cu.MemcpyDtoHAsync.name(), res);
  Allocation* pinned = page_locked(destination);
  if (wait) refuse_in_capture(stream, "a blocking download");
  else if (pinned == nullptr) refuse_in_capture(stream, "a copy into pageable host memory");
  source.allocation->use(stream, Access::read);  // waits for the last writer only (DESIGN 5)
  make_current_for(stream);
  if (pinned != nullptr) {
    pinned->use(stream, Access::write);
    check_on_stream(cu.MemcpyDtoHAsync(destination.data, source.pointer, source.bytes, stream.handle()),
                    cu.MemcpyDtoHAsync.name(), res, stream);
    if (wait) stream.synchronize();
    return;
  }
  if (wait) staged_download_blocking(stream, source.pointer, HostDestination(destination.data), source.bytes, res);
  else staged_download_async(stream, source.pointer, destination.data, source.bytes, res);
}

void download_to_new_host_memory(StreamRef stream, DeviceBytes source, NewHostMemory destination) {
  stream.require_handle(cu.MemcpyDtoHAsync.name());
  if (source.bytes == 0) return;
  Resource res = buffer_resource(source);
  check_not_poisoned(cu.MemcpyDtoHAsync.name(), res);
  refuse_in_capture(stream, "a blocking download");
  source.allocation->use(stream, Access::read);  // waits for the last writer only (DESIGN 5)
  make_current_for(stream);
  // New memory is never page-locked: always staged.
  staged_download_blocking(stream, source.pointer, HostDestination(destination), source.bytes, res);
}

void copy_device_to_device(StreamRef stream, DeviceBytes source, DeviceBytes destination) {
  stream.require_handle(cu.MemcpyDtoDAsync.name());
  if (destination.bytes == 0) return;
  if (source.allocation == destination.allocation && source.pointer < destination.pointer + destination.bytes &&
      destination.pointer < source.pointer + source.bytes) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "copy (device to device): the source [0x%llx, +%zu) and the destination [0x%llx, +%zu) overlap",
                  static_cast<unsigned long long>(source.pointer), source.bytes,
                  static_cast<unsigned long long>(destination.pointer), destination.bytes);
    throw InvalidArgument(buf);
  }
  Resource res = buffer_resource(destination);
  const bool peer = source.device != destination.device;
  const char* call = peer ? cu.MemcpyPeerAsync.name() : cu.MemcpyDtoDAsync.name();
  check_not_poisoned(call, res);
  check_not_poisoned(call, buffer_resource(source));
  if (peer) enable_peer_access_for_copies(source.device, destination.device);
  source.allocation->use(stream, Access::read);
  destination.allocation->use(stream, Access::write);
  make_current_for(stream);
  if (!peer) {
    check_on_stream(cu.MemcpyDtoDAsync(destination.pointer, source.pointer, destination.bytes, stream.handle()), call,
                    res, stream);
    return;
  }
  check_on_stream(cu.MemcpyPeerAsync(destination.pointer, library_context(destination.device), source.pointer,
                                     library_context(source.device), destination.bytes, stream.handle()),
                  call, res, stream);
}

namespace {

// The driver's memset for a pattern of `pattern_bytes`; 8-byte patterns take two strided
// 4-byte memsets (cuMemsetD2D32Async, one per half: rows of one 4-byte word, 8 bytes
// apart), or one 4-byte memset when both halves are equal. Stream-ordered on `stream`.
CUresult submit_fill(CUdeviceptr pointer, std::size_t bytes, std::uint64_t pattern, int pattern_bytes, CUstream stream) {
  switch (pattern_bytes) {
    case 1: return cu.MemsetD8Async(pointer, static_cast<unsigned char>(pattern), bytes, stream);
    case 2: return cu.MemsetD16Async(pointer, static_cast<unsigned short>(pattern), bytes / 2, stream);
    case 4: return cu.MemsetD32Async(pointer, static_cast<unsigned>(pattern), bytes / 4, stream);
    default: break;
  }
  const auto low = static_cast<unsigned>(pattern);
  const auto high = static_cast<unsigned>(pattern >> 32);
  if (low == high) return cu.MemsetD32Async(pointer, low, bytes / 4, stream);
  const std::size_t elements = bytes / 8;
  CUresult r = cu.MemsetD2D32Async(pointer, 8, low, 1, elements, stream);
  if (r != CUDA_SUCCESS) return r;
  return cu.MemsetD2D32Async(pointer + 4, 8, high, 1, elements, stream);
}

const char* fill_call(int pattern_bytes) {
  switch (pattern_bytes) {
    case 1: return cu.MemsetD8Async.name();
    case 2: return cu.MemsetD16Async.name();
    case 4: return cu.MemsetD32Async.name();
    default: return cu.MemsetD2D32Async.name();
  }
}

}  // namespace

void fill_device(StreamRef stream, DeviceBytes destination, std::uint64_t pattern, int pattern_bytes,
                 const char* operation) {
  const char* call = fill_call(pattern_bytes);
  stream.require_handle(call);
  if (destination.bytes == 0) return;
  auto width = static_cast<std::size_t>(pattern_bytes);
  if (destination.bytes % width != 0)
    throw InvalidArgument(std::string(operation) + ": the destination has " + std::to_string(destination.bytes) +
                          " bytes, not a multiple of the " + std::to_string(width) + "-byte pattern");
  if (destination.pointer % width != 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(destination.pointer));
    throw InvalidArgument(std::string(operation) + ": the destination address " + buf + " is not " +
                          std::to_string(width) + "-byte aligned, as a " + std::to_string(width) +
                          "-byte pattern needs");
  }
  Resource res = buffer_resource(destination);
  check_not_poisoned(call, res);
  destination.allocation->use(stream, Access::write);
  make_current_for(stream);
  check_on_stream(submit_fill(destination.pointer, destination.bytes, pattern, pattern_bytes, stream.handle()), call,
                  res, stream);
}

}  // namespace cudakit::detail
