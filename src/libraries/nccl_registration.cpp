// User-buffer registration (nccl_registration.hpp).
#include "cudakit/nccl_registration.hpp"

#include <utility>

#include "libraries/nccl_comm_state.hpp"

namespace cudakit::nccl {

Registration::Registration(const Communicator& comm, cudakit::detail::Allocation* allocation, CUdeviceptr pointer,
                           std::size_t bytes) {
  if (!comm) throw EmptyHandle("nccl::Registration with an empty communicator");
  detail::CommState& s = *comm.state();
  if (allocation == nullptr || bytes == 0) throw InvalidArgument("nccl::Registration: the buffer is empty");
  if (allocation->device != s.device)
    throw InvalidArgument("nccl::Registration on " + s.words() + ": the buffer is on device " +
                          std::to_string(allocation->device));
  const raw::Api& api = raw::api();
  if (api.CommRegister == nullptr || api.CommDeregister == nullptr)
    throw NcclUnavailable("nccl::Registration needs ncclCommRegister, which NCCL " + raw::version_string(api.version) +
                          " in " + api.path + " does not have; it came with NCCL 2.19");
  std::lock_guard lock(s.call_lock);
  s.throw_if_ended();
  void* handle = nullptr;
  ncclResult_t r = api.CommRegister(s.comm, reinterpret_cast<void*>(pointer), bytes, &handle);
  if (r != ncclSuccess) throw s.error(r, "ncclCommRegister");
  allocation_ = cudakit::detail::Ref<cudakit::detail::Allocation>(allocation);
  comm_ = comm.state();
  handle_ = handle;
}

void Registration::reset() noexcept {
  if (handle_ != nullptr && comm_) {
    std::lock_guard lock(comm_->call_lock);
    if (comm_->comm != nullptr) {  // an aborted communicator took its registrations with it
      ncclResult_t r = raw::api().CommDeregister(comm_->comm, handle_);
      if (r != ncclSuccess)
        park_error({CUDA_SUCCESS, "nccl::Registration", comm_->error(r, "ncclCommDeregister").what()});
    }
  }
  allocation_.reset();
  handle_ = nullptr;
  comm_.reset();
}

Registration::~Registration() { reset(); }

Registration::Registration(Registration&& other) noexcept
    : comm_(std::move(other.comm_)), allocation_(std::move(other.allocation_)),
      handle_(std::exchange(other.handle_, nullptr)) {}

Registration& Registration::operator=(Registration&& other) noexcept {
  if (this != &other) {
    reset();
    comm_ = std::move(other.comm_);
    allocation_ = std::move(other.allocation_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

}  // namespace cudakit::nccl
