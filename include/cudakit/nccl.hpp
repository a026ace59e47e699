// NCCL in cudakit: communicators, collectives and point-to-point transfers on cudakit
// buffers and streams, the rendezvous helpers that hand a unique id to every rank, and
// user-buffer registration. docs/multi-gpu.md explains them together.
//
// NCCL is opened at run time (libnccl.so.2; CUDAKIT_LIBNCCL names another file), with
// NVLink multicast kept off (NCCL_NVLS_ENABLE=0 unless the user set it). MPI programs
// add cudakit/nccl_mpi.hpp, which this header does not include.
#pragma once

#include "cudakit/bootstrap.hpp"
#include "cudakit/nccl_collectives.hpp"
#include "cudakit/nccl_communicator.hpp"
#include "cudakit/nccl_error.hpp"
#include "cudakit/nccl_registration.hpp"
