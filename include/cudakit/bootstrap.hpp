// Rendezvous helpers: hand the unique id that rank 0 makes to every rank of a job of
// several processes (or hosts), with a deadline, and say which rank did not arrive.
//
//   nccl::UniqueId id = nccl::tcp_rendezvous("10.0.0.1:29500", rank, ranks, 60s);
//   nccl::Communicator comm(id, ranks, rank, Device::get(local_gpu));
//
// TCP: rank 0 listens at the address (its own host and a free port), waits for every
// other rank to connect and prove that it knows the job's secret, then sends each the id.
// The others connect (retrying while rank 0 is not listening yet) and wait for the id.
// Only the id travels this way; NCCL makes its own connections afterwards
// (NCCL_SOCKET_IFNAME and the other NCCL_* variables choose its interfaces and transports).
//
// The job secret (docs/security.md): every rank passes the same one, in
// TcpRendezvousOptions::secret or in the environment variable CUDAKIT_RENDEZVOUS_SECRET
// (the option wins). Rank 0 sends each connection a fresh random challenge; a rank answers
// with an HMAC-SHA-256 of it under the secret, and rank 0 answers the same way over the
// rank's own challenge, so each side knows the other holds the secret before the id moves,
// and a recorded exchange is worth nothing on another connection. A connection that does
// not prove the secret, sends garbage or too much, or stays silent past its read deadline
// is closed and never gets the id; the job still forms. A secret is required when the
// address is not a loopback address (127.0.0.0/8, ::1, localhost), unless
// allow_unauthenticated is set: without one, anyone who can connect could take the id.
// The id itself is not encrypted: someone who can read the network between the hosts can
// read it (and NCCL's own connections are not authenticated either).
//
// File: rank 0 writes the id to a file every rank can read (a shared filesystem across
// hosts), the others read it and each leaves a marker beside it; rank 0 waits for every
// marker, then removes the file and the markers. The file must not exist when the job
// starts: use a fresh path per run. Every file is created owner-only (mode 0600),
// exclusively and without following symbolic links, and published by an atomic rename;
// the id file must belong to the user who reads it. A folder that other users may write
// to without the sticky bit (mode o+w without +t) is refused: anyone could replace the
// files there.
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

/// How the TCP rendezvous authenticates its ranks (see above).
struct TcpRendezvousOptions {
  /// The job secret every rank shares; empty: CUDAKIT_RENDEZVOUS_SECRET, else none.
  std::string secret;
  /// Lets a job on a non-loopback address run without a secret (anyone who can connect
  /// can then take the id).
  bool allow_unauthenticated = false;
};

/// The id of a job, from rank 0 over TCP (see above). `address` is "host:port" (rank 0's
/// host name or IP address; IPv4 or [IPv6]). Rank 0 generates the id (UniqueId::generate).
CUDAKIT_API UniqueId tcp_rendezvous(const std::string& address, int rank, int ranks, std::chrono::milliseconds timeout);

/// The id of a job, through a file every rank can read (see above).
CUDAKIT_API UniqueId file_rendezvous(const std::string& path, int rank, int ranks, std::chrono::milliseconds timeout);

/// The same rendezvous with an id that rank 0 already has (`id` is ignored elsewhere):
/// for callers that make the id themselves, and for tests.
CUDAKIT_API UniqueId tcp_rendezvous(const std::string& address, int rank, int ranks, std::chrono::milliseconds timeout,
                                    const UniqueId& id);
/// The TCP rendezvous with explicit authentication options; `id` as above (rank 0's,
/// ignored elsewhere). Throws InvalidArgument for a non-loopback address without a secret
/// unless `options.allow_unauthenticated`.
CUDAKIT_API UniqueId tcp_rendezvous(const std::string& address, int rank, int ranks, std::chrono::milliseconds timeout,
                                    const UniqueId& id, const TcpRendezvousOptions& options);
/// As above, rank 0 generating the id.
CUDAKIT_API UniqueId tcp_rendezvous(const std::string& address, int rank, int ranks, std::chrono::milliseconds timeout,
                                    const TcpRendezvousOptions& options);
/// As tcp_rendezvous with a given id, through a file.
CUDAKIT_API UniqueId file_rendezvous(const std::string& path, int rank, int ranks, std::chrono::milliseconds timeout,
                                     const UniqueId& id);

}  // namespace cudakit::nccl
