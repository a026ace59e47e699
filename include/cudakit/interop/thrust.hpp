// Thrust on a cudakit stream, its temporary storage from cudakit's memory pool.
//
//   cudakit::ThrustAllocator temp(stream);
//   cudakit::enqueue(stream, cudakit::writes(keys), [&](CUstream) {
//     auto begin = thrust::device_pointer_cast(keys.data());
//     thrust::sort(cudakit::thrust_on(stream, temp), begin, begin + keys.size());
//   });
//
// thrust_on() is `thrust::cuda::par_nosync(allocator).on(stream)`: Thrust runs every
// kernel and copy on the cudakit stream and does not synchronize it after an algorithm
// (an algorithm that returns a value to the host, such as thrust::reduce, still waits for
// that value). The allocator hands Thrust its temporary storage as DeviceBuffers on the
// stream: allocated and freed stream-ordered, from the device's pool, never with
// cudaMalloc or a synchronization.
//
// Thrust does not say which buffers it reads and writes: declare them around the call with
// enqueue(), as above, so that work on other streams is ordered against it. Thrust's
// temporary allocations make it unfit for capture into a graph (cudakit refuses an
// allocation on a capturing stream); use CUB with a scratch buffer there (cub.hpp).
//
// Only nvcc-compiled code includes this header; put CUDA 13's include/cccl (or CCCL's own
// include directory) on the include path.
#pragma once

#include <thrust/execution_policy.h>
#include <thrust/system/cuda/execution_policy.h>

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

#include "cudakit/device_buffer.hpp"
#include "cudakit/interop/runtime.hpp"

namespace cudakit {

/// Thrust's temporary storage from cudakit's memory pool, stream-ordered on one stream (see
/// above). Copies share their allocations; each allocation is freed, stream-ordered, when
/// Thrust deallocates it or when the last copy is destroyed.
class ThrustAllocator {
 public:
  /// What Thrust allocates: bytes.
  using value_type = char;

  /// Allocates on `stream` (EmptyHandle for an empty one).
  explicit ThrustAllocator(StreamRef stream) : state_(std::make_shared<State>(stream)) {
    stream.require_handle("ThrustAllocator");
  }

  /// `bytes` bytes from the pool, stream-ordered (OutOfMemory when the device has no room).
  char* allocate(std::ptrdiff_t bytes) {
    DeviceBuffer<char> buffer(state_->stream, static_cast<std::size_t>(bytes), uninitialized);
    char* p = buffer.data();
    std::lock_guard lock(state_->mutex);
    state_->live.emplace(p, std::move(buffer));
    return p;
  }
  /// Frees `p`, stream-ordered after the work Thrust submitted that uses it.
  void deallocate(char* p, std::size_t) noexcept {
    DeviceBuffer<char> buffer;
    std::lock_guard lock(state_->mutex);
    if (auto it = state_->live.find(p); it != state_->live.end()) {
      buffer = std::move(it->second);
      state_->live.erase(it);
    }
  }

  /// The stream the storage is ordered on.
  StreamRef stream() const noexcept { return state_->stream; }

 private:
  // What the copies share: the stream, and the live allocations by address.
  struct State {
    // Allocations go on `s`.
    explicit State(StreamRef s) : stream(s) {}
    StreamRef stream;
    std::mutex mutex;
    std::map<char*, DeviceBuffer<char>> live;
  };
  std::shared_ptr<State> state_;
};

/// Thrust's CUDA policy on `stream` with `allocator`'s storage and no synchronization after
/// each algorithm (thrust::cuda::par_nosync). `allocator` must outlive the algorithm call.
inline auto thrust_on(StreamRef stream, ThrustAllocator& allocator) {
  return thrust::cuda::par_nosync(allocator).on(runtime_stream(stream));
}

}  // namespace cudakit
