// Rendezvous helpers: hand the unique id that rank 0 makes to every rank of a job of
// several processes (or hosts), with a deadline, and say which rank did not arrive.
//
//   nccl::UniqueId id = nccl::tcp_rendezvous("10.0.0.1:29500", rank, ranks, 60s);
//   nccl::Communicator comm(id, ranks, rank, Device::get(local_gpu));
//
// TCP: rank 0 listens at the address (its own host and a free port), waits for every
// other rank to connect and say who it is, then sends each the id. The others connect
// (retrying while rank 0 is not listening yet) and wait for the id. Only the id travels
// this way; NCCL makes its own connections afterwards (NCCL_SOCKET_IFNAME and the other
// NCCL_* variables choose its interfaces and transports).
//
// File: rank 0 writes the id to a file every rank can read (a shared filesystem across
// hosts), the others read it and each leaves a marker beside it; rank 0 waits for every
// marker, then removes the file and the markers. The file must not exist when the job
// starts: use a fresh path per run.
//
// Both throw BootstrapError when the deadline passes: on rank 0 naming the ranks that did
// not arrive (missing_ranks()), which rank 0 also sends to every rank that did; on
// another rank saying that rank 0 could not be reached, or what rank 0 reported (once
// connected, the others wait up to 2 s past their deadline for rank 0's verdict). A rank
// number out of range, or a rank that arrives twice, is an error on both sides.
//
// With MPI, use nccl_mpi.hpp instead (the id goes by MPI_Bcast).
//
// Thread safety: each call is independent; the TCP form needs its port free on rank 0.
#pragma once

#include <chrono>
#include <string>

#include "cudakit/export.hpp"
#include "cudakit/nccl_communicator.hpp"

namespace cudakit::nccl {

/// The id of a job, from rank 0 over TCP (see above). `address` is "host:port" (rank 0's
/// host name or IP address; IPv4 or [IPv6]). Rank 0 generates the id (UniqueId::generate).
CUDAKIT_API UniqueId tcp_rendezvous(const std::string& address, int rank, int ranks, std::chrono::milliseconds timeout);

/// The id of a job, through a file every rank can read (see above).
CUDAKIT_API UniqueId file_rendezvous(const std::string& path, int rank, int ranks, std::chrono::milliseconds timeout);

/// The same rendezvous with an id that rank 0 already has (`id` is ignored elsewhere):
/// for callers that make the id themselves, and for tests.
CUDAKIT_API UniqueId tcp_rendezvous(const std::string& address, int rank, int ranks, std::chrono::milliseconds timeout,
                                    const UniqueId& id);
/// As tcp_rendezvous with a given id, through a file.
CUDAKIT_API UniqueId file_rendezvous(const std::string& path, int rank, int ranks, std::chrono::milliseconds timeout,
                                     const UniqueId& id);

}  // namespace cudakit::nccl
