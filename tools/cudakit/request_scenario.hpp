// The request of the concurrency and idiom-phases benchmarks, the predecessors' scenario:
// upload 64 Ki floats, run 48 small kernels (add_arrays with a weights buffer, then
// scale_offset, alternating), download 64 Ki floats. Every output is compared with a
// host reference computed once.
//
// Each arm serves the same request its own way:
//   README idiom:   upload(stream, vector) into a new DeviceBuffer, two more new buffers,
//                   typed launches, download(stream, buffer) returning a new vector.
//   raw pageable:   the same with the raw driver: cuMemAllocAsync per buffer,
//                   cuMemcpyHtoDAsync / cuMemcpyDtoHAsync on pageable memory (a new
//                   vector out), cuStreamSynchronize, cuMemFreeAsync.
//   cudakit pinned: PinnedBuffer in and out and device buffers made once, copy(),
//                   typed launches, download() into the pinned output.
//   raw staged:     the README idiom's work by hand with the raw driver, as a careful
//                   program does it: buffers made per request with cuMemAllocAsync, the
//                   input copied into page-locked memory of its own (cuMemHostAlloc, made
//                   once), the async copies, the new output vector made before the wait
//                   and filled from page-locked memory after it, cuMemFreeAsync.
//   raw pinned:     cuMemHostAlloc memory and device buffers made once, the async
//                   copies, cuStreamSynchronize.
#pragma once

#include <cuda.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cudakit/cudakit.hpp"

namespace cudakit::tool::bench::requests {

inline constexpr int elements = 64 * 1024;
inline constexpr std::size_t bytes = elements * sizeof(float);
inline constexpr int kernels_per_request = 48;

std::vector<float> make_input();
std::vector<float> make_weights();
/// The request on the host: temp = x + w; x = temp * 0.5 + 1; 24 times.
std::vector<float> reference(const std::vector<float>& input, const std::vector<float>& weights);

/// The module the two kernels come from: the embedded test kernels, unless a unit test
/// (on the fake driver) set an image with host-run kernels of the same names.
std::span<const unsigned char> kernel_image();
/// Unit tests: the image kernel_image() gives from now on; empty restores the embedded one.
void set_kernel_image_for_testing(std::vector<unsigned char> image);

/// The two kernels, typed for cudakit and as raw handles for the raw arms.
struct Kernels {
  explicit Kernels(const Device& device);
  Module module;
  Kernel<void(const float*, const float*, float*, int)> add_arrays;
  Kernel<void(const float*, float*, float, float, int)> scale_offset;
  CUfunction add_function = nullptr;
  CUfunction scale_function = nullptr;
};

/// The 48 launches of one request through cudakit: in -> x, with temp between.
void launch_request(StreamRef stream, const Kernels& k, const DeviceBuffer<float>& weights,
                    const DeviceBuffer<float>& in, DeviceBuffer<float>& temp, DeviceBuffer<float>& x);
/// The same with cuLaunchKernel.
void launch_request_raw(CUstream stream, const Kernels& k, CUdeviceptr weights, CUdeviceptr in, CUdeviceptr temp,
                        CUdeviceptr x);

/// One request as the README teaches it (see above); returns the new output vector.
std::vector<float> idiom_request(StreamRef stream, const Kernels& k, const DeviceBuffer<float>& weights,
                                 const std::vector<float>& input);
/// One request with the raw driver on pageable memory, buffers made per request.
std::vector<float> raw_pageable_request(CUstream stream, const Kernels& k, CUdeviceptr weights,
                                        const std::vector<float>& input);

/// One request with the raw driver on pageable memory staged by hand through the
/// caller's page-locked `staging_in` and `staging_out` (each `bytes` long), buffers made
/// per request.
std::vector<float> raw_staged_request(CUstream stream, const Kernels& k, CUdeviceptr weights,
                                      const std::vector<float>& input, float* staging_in, float* staging_out);

/// Device memory from cuMemAlloc, released at the end of the scope.
class RawDeviceMemory {
 public:
  explicit RawDeviceMemory(std::size_t size);
  ~RawDeviceMemory();
  RawDeviceMemory(RawDeviceMemory&& other) noexcept : pointer_(std::exchange(other.pointer_, 0)) {}
  RawDeviceMemory(const RawDeviceMemory&) = delete;
  RawDeviceMemory& operator=(const RawDeviceMemory&) = delete;
  CUdeviceptr pointer() const { return pointer_; }

 private:
  CUdeviceptr pointer_ = 0;
};

/// Makes `context` current on the calling thread with cuCtxSetCurrent, as an application
/// must on each of its threads; once per thread (the thread remembers it).
void make_raw_context_current(CUcontext context);

/// The weights of the raw arms: uploaded and waited for with raw calls.
RawDeviceMemory upload_raw_weights(const std::vector<float>& weights);

/// What an arm's outputs looked like: how many were wrong, and the distinct outputs.
class Outputs {
 public:
  explicit Outputs(const std::vector<float>& expected) : expected_(expected) {}
  /// Cheap when right (one memcmp); a wrong output is hashed to count distinct ones.
  void check(const float* output);
  long correct() const { return correct_.load(); }
  long wrong() const;
  long distinct() const;
  /// "1 distinct outputs, 0 of 7000 wrong".
  std::string summary() const;
  /// Empty when every output was right and there was at least one; else the summary.
  std::string failure() const;

 private:
  const std::vector<float>& expected_;
  std::atomic<long> correct_{0};
  mutable std::mutex mutex_;
  long wrong_ = 0;
  std::set<std::uint64_t> wrong_hashes_;
};

/// Threads that live as long as the pool and run one batch at a time: the way a server's
/// workers serve requests, so per-thread state (caches, staging) is warm after the first
/// batch and no thread is created while timing.
class WorkerThreads {
 public:
  explicit WorkerThreads(int count);
  ~WorkerThreads();
  WorkerThreads(const WorkerThreads&) = delete;
  WorkerThreads& operator=(const WorkerThreads&) = delete;
  int count() const { return static_cast<int>(threads_.size()); }
  /// Runs body(t) on every thread t at once and returns when all finished; rethrows the
  /// first exception.
  void run(const std::function<void(int thread)>& body);

 private:
  void serve(int t);
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable start_, done_;
  const std::function<void(int)>* body_ = nullptr;
  std::uint64_t generation_ = 0;
  int running_ = 0;
  bool stop_ = false;
  std::vector<std::exception_ptr> errors_;
};

}  // namespace cudakit::tool::bench::requests
