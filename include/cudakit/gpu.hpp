// Gpu: the short path for most users (issue 6, point 1; DESIGN 2, facade layer).
//
// One device, its primary context and its own non-blocking stream. Everything it does
// goes through the lower layers, which stay within reach (device(), context(),
// stream(), and the raw handles through them) for whatever it does not wrap.
//
//   cudakit::Gpu gpu{0};
//   auto x = gpu.upload(std::span{host_x});          // DeviceBuffer<float>
//   auto y = gpu.alloc<float>(n, cudakit::zeroed);
//   gpu.launch(saxpy, cudakit::grid_for(n, 256), 2.0f, x, y, n);
//   std::vector<float> out = gpu.download(y);         // waits for y's last writer only
//
// Thread safety: a Gpu may be shared by threads. Its own stream accepts work from
// several threads at once (the driver orders submissions; work from different threads
// interleaves in submission order). For independent work per thread, give each thread
// its own stream (new_stream()); buffers order themselves across them (DESIGN 5).
#pragma once

#include <cstddef>

#include "cudakit/context.hpp"
#include "cudakit/device.hpp"
#include "cudakit/device_buffer.hpp"
#include "cudakit/stream.hpp"

namespace cudakit {

class Gpu {
 public:
  /// Device `ordinal`, its primary context (retained) and a new non-blocking stream.
  explicit Gpu(int ordinal = 0) : Gpu(Device::get(ordinal)) {}
  explicit Gpu(Device device) : device_(device), context_(Context::primary(device)), stream_(device) {}

  Gpu(Gpu&&) noexcept = default;
  Gpu& operator=(Gpu&&) noexcept = default;
  Gpu(const Gpu&) = delete;
  Gpu& operator=(const Gpu&) = delete;

  const Device& device() const noexcept { return device_; }
  ContextRef context() const noexcept { return context_.ref(); }
  /// The Gpu's own stream: where alloc, upload, download, fill and launch go.
  StreamRef stream() const noexcept { return stream_.ref(); }
  /// "sm_90": the architecture to compile for.
  std::string arch() const { return device_.compute_capability().arch(); }

  /// Another non-blocking stream on this device (owned by the caller).
  Stream new_stream(int priority = 0) const { return Stream(context_.ref(), priority); }

  /// Device memory from the pool, stream-ordered on the Gpu's stream.
  template <class T>
  DeviceBuffer<T> alloc(std::size_t count, Uninitialized tag) const {
    return DeviceBuffer<T>(stream_, count, tag);
  }
  template <class T>
  DeviceBuffer<T> alloc(std::size_t count, Zeroed tag) const {
    return DeviceBuffer<T>(stream_, count, tag);
  }

  /// Waits for the work submitted to the Gpu's stream.
  void synchronize() const { stream_.synchronize(); }

 private:
  Device device_;
  Context context_;
  Stream stream_;
};

}  // namespace cudakit
