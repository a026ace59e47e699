// Internal: making a pooled cuBLAS or cuBLASLt handle: the handle itself, made so that a
// capture in progress survives it, and the workspace it owns.
//
// cuBLAS allocates a workspace of its own when none is set, and inside a capture that
// allocation would become part of the graph (or fail). cudakit gives every handle one from
// cudakit memory up front: cublasSetWorkspace for cuBLAS, the matmul's workspace argument
// for cuBLASLt. It is allocated on the device's service stream (never on the user's stream,
// which may be capturing), and every call declares it written, so a handle that moves to
// another stream orders its next call after its last one.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "cudakit/context.hpp"
#include "cudakit/device_buffer.hpp"
#include "device/device_state.hpp"
#include "libraries/blas_error.hpp"
#include "libraries/capture_tolerant.hpp"
#include "libraries/cublas_api.hpp"

namespace cudakit::detail {

/// The workspace size cuBLAS recommends for the device: 32 MiB from compute capability 9.0
/// (Hopper) on, 4 MiB before.
std::size_t blas_workspace_bytes(int device);

/// A workspace for a handle on `device`, allocated on its service stream; safe to call
/// while a stream of this thread is capturing.
DeviceBuffer<std::byte> make_blas_workspace(int device);

/// A new slot (a struct with `api`, `device`, `workspace`) for `device`: its handle made by
/// `create(slot)` (cublasCreate or cublasLtCreate, returning the status; `call` names it)
/// with the device's context current and capture-tolerant, then its workspace. A slot whose
/// workspace fails destroys its handle.
template <class Slot, class Create>
std::unique_ptr<Slot> make_slot(const cublas::Api& api, int device, cublas::Entry call, Create&& create) {
  auto slot = std::make_unique<Slot>();
  slot->api = &api;
  slot->device = device;
  ContextRef(library_context(device), device).make_current();  // a handle belongs to the current device
  cublasStatus_t status = capture_tolerant(device, [&] { return create(*slot); });
  check_blas(status, call, Resource::of_device(device), [] { return std::string("a new handle"); });
  slot->workspace = make_blas_workspace(device);
  return slot;
}

}  // namespace cudakit::detail
