// NCCL communicators for MPI programs: the unique id goes from one rank to the others by
// MPI_Bcast, so a program that already runs under MPI (mpirun, srun) needs no other
// rendezvous. Header-only and not part of cudakit.hpp or nccl.hpp: only a program that
// includes <mpi.h> and links MPI includes it.
//
//   MPI_Init(&argc, &argv);
//   nccl::Communicator comm = nccl::mpi_communicator(MPI_COMM_WORLD, Device::get(local_rank));
//
// MPI's own calls have no deadline here: MPI decides how a missing rank is reported.
// Thread safety: as MPI's and the communicator's.
#pragma once

#include <mpi.h>

#include <string>

#include "cudakit/nccl_communicator.hpp"

namespace cudakit::nccl {

/// The job's unique id: made on `root` (UniqueId::generate), broadcast over `comm`.
/// Every rank of `comm` must call it. NcclError when MPI fails.
inline UniqueId mpi_unique_id(MPI_Comm comm, int root = 0) {
  int rank = -1;
  if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS)
    throw NcclError(0, "MPI_Comm_rank", -1, 0, -1, "", "mpi_unique_id: MPI_Comm_rank failed");
  UniqueId id;
  if (rank == root) id = UniqueId::generate();
  if (MPI_Bcast(id.bytes.data(), static_cast<int>(id.bytes.size()), MPI_BYTE, root, comm) != MPI_SUCCESS)
    throw NcclError(0, "MPI_Bcast", rank, 0, -1, "", "mpi_unique_id: MPI_Bcast of the unique id failed on rank " +
                                                         std::to_string(rank));
  return id;
}

/// A communicator of every rank of `comm` (same ranks, same order), this rank on `device`.
inline Communicator mpi_communicator(MPI_Comm comm, Device device, const Options& options = {}) {
  int rank = -1, ranks = 0;
  if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS || MPI_Comm_size(comm, &ranks) != MPI_SUCCESS)
    throw NcclError(0, "MPI_Comm_size", -1, 0, -1, "", "mpi_communicator: MPI could not say this rank or the size");
  return Communicator(mpi_unique_id(comm), ranks, rank, device, options);
}

}  // namespace cudakit::nccl
