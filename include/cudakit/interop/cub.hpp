// CUB device algorithms (cub::DeviceReduce, DeviceScan, DeviceRadixSort, ...) on a cudakit
// stream, their temporary storage from cudakit's memory pool and their buffers declared
// (declared_work.hpp), so they are ordered and kept alive like a typed launch's.
//
//   cudakit::run_cub(stream, cudakit::reads(in), cudakit::writes(sum),
//                    [&](void* temp, std::size_t& bytes, cudaStream_t s) {
//                      return cub::DeviceReduce::Sum(temp, bytes, in.data(), sum.data(), n, s);
//                    });
//
// The callable is CUB's two-phase call with the pointers filled in: run_cub calls it once
// with a null `temp` to learn the size, allocates that many bytes on the stream (a
// DeviceBuffer<std::byte>, stream-ordered: no synchronization), calls it again, and frees
// the storage stream-ordered after the algorithm. A failed CUB call throws Error with the
// runtime's words (cudaErrorInvalidValue: ...).
//
// Inside a capture no allocation is possible on the capturing stream (cudakit refuses
// graph memory nodes): pass a scratch buffer made before the capture instead. The
// scratch form grows it when it is too small (outside a capture) and declares it written,
// so a graph keeps it alive and two streams sharing it are ordered.
//
// Only nvcc-compiled code includes this header (CUB's algorithms are CUDA C++); put
// CUDA 13's include/cccl (or CCCL's own include directory) on the include path.
#pragma once

#include <cuda_runtime_api.h>

#include <cub/cub.cuh>
#include <cstddef>
#include <string>
#include <utility>

#include "cudakit/declared_work.hpp"
#include "cudakit/device_buffer.hpp"
#include "cudakit/error.hpp"

namespace cudakit {

namespace detail {
/// Throws Error for a failed CUB call, naming the phase and the runtime's error.
inline void check_cub(cudaError_t status, const char* phase) {
  if (status == cudaSuccess) [[likely]]
    return;
  throw Error(std::string("run_cub: the CUB algorithm failed ") + phase + ": " + cudaGetErrorName(status) + ": " +
              cudaGetErrorString(status));
}
}  // namespace detail

/// Runs a two-phase CUB algorithm on `stream` with temporary storage from the pool (see
/// above). `call(void* temp, std::size_t& bytes, cudaStream_t s)` returns cudaError_t.
/// Throws CaptureError when the stream is capturing (use the scratch form), Error when
/// CUB fails, and what enqueue() throws.
template <std::size_t R, std::size_t W, class Call>
void run_cub(StreamRef stream, const Reads<R>& read, const Writes<W>& write, Call&& call) {
  enqueue(stream, read, write, [&](StreamRef s) {
    std::size_t bytes = 0;
    detail::check_cub(call(nullptr, bytes, s.handle()), "asked for its temporary storage size");
    DeviceBuffer<std::byte> temp(s, bytes, uninitialized);
    detail::check_cub(call(static_cast<void*>(temp.data()), bytes, s.handle()), "on the stream");
  });  // temp is freed here, ordered after the algorithm on its stream
}

/// The same with temporary storage from `scratch`, grown (outside a capture) when it is
/// smaller than the algorithm asks, and declared written: usable inside a capture once it
/// is large enough.
template <std::size_t R, std::size_t W, class Call>
void run_cub(StreamRef stream, DeviceBuffer<std::byte>& scratch, const Reads<R>& read, const Writes<W>& write,
             Call&& call) {
  std::size_t bytes = 0;
  stream.require_handle("run_cub");
  detail::check_cub(call(nullptr, bytes, stream.handle()), "asked for its temporary storage size");
  if (scratch.size() < bytes) scratch = DeviceBuffer<std::byte>(stream, bytes, uninitialized);
  Writes<W + 1> written;
  for (std::size_t i = 0; i < W; ++i) written.allocations[i] = write.allocations[i];
  written.allocations[W] = scratch.allocation();
  enqueue(stream, read, written, [&](CUstream s) {
    std::size_t available = scratch.size();
    detail::check_cub(call(static_cast<void*>(scratch.data()), available, s), "on the stream");
  });
}

}  // namespace cudakit
