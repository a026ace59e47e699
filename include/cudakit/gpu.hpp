// Gpu: the short path for most users (DESIGN 2, facade layer).
//
// One device, its primary context and its own non-blocking stream. Everything it does
// goes through the lower layers, which stay within reach (device(), context(),
// stream(), and the raw handles through them) for whatever it does not wrap.
//
//   cudakit::Gpu gpu{0};
//   auto x = gpu.upload(std::span{host_x});          // DeviceBuffer<float>
//   auto y = gpu.alloc<float>(n, cudakit::zeroed);
//   Module m = gpu.load(cudakit::Program(source).compile(gpu.device()));
//   auto saxpy = m.kernel<void(float, const float*, float*, int)>("saxpy");
//   gpu.launch(saxpy, cudakit::grid_for(n, 256), 256, 2.0f, x, y, n);  // grid, block, args
//   std::vector<float> out = gpu.download(y);         // waits for y's last writer only
//
// Thread safety: a Gpu may be shared by threads. Its own stream accepts work from
// several threads at once (the driver orders submissions; work from different threads
// interleaves in submission order). For independent work per thread, give each thread
// its own stream (new_stream()); buffers order themselves across them (DESIGN 5).
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cudakit/export.hpp"
#include "cudakit/capture.hpp"
#include "cudakit/context.hpp"
#include "cudakit/copy.hpp"
#include "cudakit/device.hpp"
#include "cudakit/device_buffer.hpp"
#include "cudakit/graph.hpp"
#include "cudakit/graph_exec.hpp"
#include "cudakit/launch.hpp"
#include "cudakit/launch_config.hpp"
#include "cudakit/module.hpp"
#include "cudakit/program.hpp"
#include "cudakit/stream.hpp"

namespace cudakit {

/// One device with its primary context and a stream of its own, for programs that want
/// the common calls in one place (see above). Move-only. Each call is the free
/// function's or the member's it names, on the Gpu's stream, and throws as that does.
class CUDAKIT_API Gpu {
 public:
  /// Device `ordinal`, its primary context (retained) and a new non-blocking stream.
  /// Throws InvalidArgument for an ordinal out of range, DriverUnavailable without a
  /// driver, DriverError when retaining or creating fails.
  explicit Gpu(int ordinal = 0) : Gpu(Device::get(ordinal)) {}
  explicit Gpu(Device device) : device_(device), context_(Context::primary(device)), stream_(device) {}

  Gpu(Gpu&&) noexcept = default;
  Gpu& operator=(Gpu&&) noexcept = default;
  Gpu(const Gpu&) = delete;
  Gpu& operator=(const Gpu&) = delete;

  /// The device, and its primary context (held while the Gpu lives).
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
  /// The same, zero-filled on the Gpu's stream.
  template <class T>
  DeviceBuffer<T> alloc(std::size_t count, Zeroed tag) const {
    return DeviceBuffer<T>(stream_, count, tag);
  }

  /// A new buffer holding a copy of `source` (a host range), on the Gpu's stream.
  template <class Source>
    requires host_range<const Source&>
  DeviceBuffer<host_value_t<const Source&>> upload(const Source& source) const {
    return cudakit::upload(stream(), source);
  }

  /// The contents of `source` (a device range), after its last writer finished.
  template <class Source>
    requires device_range<const Source&>
  std::vector<device_value_t<const Source&>> download(const Source& source) const {
    return cudakit::download(stream(), source);
  }
  /// Copies `source` (a device range) into `destination` (a host range); returns when done.
  template <class Source, class Destination>
    requires device_range<const Source&> && writable_host_range<Destination&&> &&
             std::same_as<device_value_t<const Source&>, host_value_t<Destination&&>>
  void download(const Source& source, Destination&& destination) const {
    cudakit::download(stream(), source, std::forward<Destination>(destination));
  }

  /// Sets every element of `destination` to `value` (1, 2 or 4-byte elements).
  template <class Destination>
    requires writable_device_range<Destination>
  void fill(Destination&& destination, const std::type_identity_t<device_value_t<Destination>>& value) const {
    cudakit::fill(stream(), std::forward<Destination>(destination), value);
  }

  /// A stream-ordered copy in any direction (host to device, device to host, device to
  /// device); asynchronous like cudakit::copy.
  template <class Source, class Destination>
    requires requires(StreamRef s, const Source& src, Destination&& dst) {
      cudakit::copy(s, src, std::forward<Destination>(dst));
    }
  void copy(const Source& source, Destination&& destination) const {
    cudakit::copy(stream(), source, std::forward<Destination>(destination));
  }

  /// A module on this device: from an image in memory, NVRTC's output, or a file.
  Module load(std::span<const std::byte> image, const ModuleOptions& options = {}) const {
    return Module::load(device_, image, options);
  }
  /// The same from unsigned bytes (what xxd -i and embedded fatbins give).
  Module load(std::span<const unsigned char> image, const ModuleOptions& options = {}) const {
    return Module::load(device_, image, options);
  }
  /// The same from NVRTC's output (program.hpp).
  Module load(const CompiledProgram& program, const ModuleOptions& options = {}) const {
    return Module::load(device_, program, options);
  }
  /// The same from a .cubin, .fatbin or .ptx file.
  Module load(const std::filesystem::path& file, const ModuleOptions& options = {}) const {
    return Module::load(device_, file, options);
  }

  /// A typed launch on the Gpu's stream.
  template <class... Params, class... Args>
  void launch(const Kernel<void(Params...)>& kernel, const LaunchConfig& config, Args&&... args) const {
    cudakit::launch(stream(), kernel, config, std::forward<Args>(args)...);
  }
  /// The same with only a grid and a block shape (no dynamic shared memory).
  template <class... Params, class... Args>
  void launch(const Kernel<void(Params...)>& kernel, Dim3 grid, Dim3 block, Args&&... args) const {
    cudakit::launch(stream(), kernel, LaunchConfig{.grid = grid, .block = block}, std::forward<Args>(args)...);
  }

  /// Captures the work `f` submits to the Gpu's stream into a graph (capture.hpp): none
  /// for an empty capture. The graph keeps every buffer it touches alive.
  template <class F>
  std::optional<Graph> capture(F&& f, CaptureMode mode = CaptureMode::per_thread) const {
    return cudakit::capture(stream(), std::forward<F>(f), mode);
  }
  /// The same, throwing EmptyCapture when nothing was captured.
  template <class F>
  Graph capture_nonempty(F&& f, CaptureMode mode = CaptureMode::per_thread) const {
    return cudakit::capture_nonempty(stream(), std::forward<F>(f), mode);
  }
  /// Replays an executable graph on the Gpu's stream (its buffers' tracking follows).
  void launch(GraphExec& executable) const { executable.launch(stream()); }

  /// Waits for the work submitted to the Gpu's stream.
  void synchronize() const { stream_.synchronize(); }

 private:
  Device device_;
  Context context_;
  Stream stream_;
};

}  // namespace cudakit
