// User-buffer registration (ncclCommRegister): tells NCCL ahead of time about a buffer
// that collectives will use, so that it can skip internal copies on some transports
// (NVLink SHARP, collnet, IB SHARP, peer-to-peer with user buffers). Optional: without it
// collectives work the same.
//
//   nccl::Registration keep(comm, grads);   // until `keep` goes
//
// A registration keeps the buffer's memory and the communicator alive until it is
// deregistered (ncclCommDeregister, in the destructor; a failure is parked). It needs
// NCCL 2.19 or newer (NcclUnavailable otherwise).
//
// Thread safety: as the communicator's.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <memory>

#include "cudakit/device_buffer.hpp"
#include "cudakit/device_span.hpp"
#include "cudakit/export.hpp"
#include "cudakit/nccl_communicator.hpp"

namespace cudakit::nccl {

/// A buffer registered with a communicator (see above). Move-only.
class CUDAKIT_API Registration {
 public:
  /// Nothing registered.
  Registration() = default;
  /// Registers `buffer`'s memory with `comm`; InvalidArgument for an empty view or one
  /// on another device than the communicator's, NcclError when NCCL refuses.
  template <class T>
  Registration(const Communicator& comm, DeviceSpan<T> buffer)
      : Registration(comm, buffer.allocation(), buffer.device_pointer(), buffer.size_bytes()) {}
  /// Registers a whole buffer.
  template <class T>
  Registration(const Communicator& comm, const DeviceBuffer<T>& buffer) : Registration(comm, buffer.span()) {}

  ~Registration();
  Registration(Registration&& other) noexcept;
  Registration& operator=(Registration&& other) noexcept;
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;

  /// NCCL's registration handle; null when nothing is registered.
  void* handle() const noexcept { return handle_; }

 private:
  Registration(const Communicator& comm, cudakit::detail::Allocation* allocation, CUdeviceptr pointer, std::size_t bytes);
  void reset() noexcept;

  std::shared_ptr<detail::CommState> comm_;
  cudakit::detail::Ref<cudakit::detail::Allocation> allocation_;  // kept allocated while registered
  void* handle_ = nullptr;
};

}  // namespace cudakit::nccl
