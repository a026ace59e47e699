// Internal: NCCL, opened at run time like the driver and NVRTC (DESIGN 2), so that cudakit
// links nothing of it and a program that never makes a communicator never needs it.
// nccl_declarations.hpp supplies the types and signatures; nothing links libnccl.
//
// The library is looked for, in order: the path in CUDAKIT_LIBNCCL (only that, when set);
// libnccl.so.2 on the loader's path (LD_LIBRARY_PATH, the distribution's libraries);
// the CUDA toolkit's lib64 and lib; the distribution's multiarch and lib64 folders; and
// pip's nvidia-nccl wheels (site-packages/nvidia/nccl/lib, or nvidia/cu13/lib) of the
// active virtual or conda environment, of each python3 on PATH, and of the system's and
// the user's Python. A failed search is remembered and reported as NcclUnavailable,
// naming every place tried.
//
// Before the library is opened, NCCL_NVLS_ENABLE is set to 0 unless the user set it:
// NVLink multicast (NVLS) can take a shared host's GPUs out of service, so cudakit never
// lets NCCL use it by default (docs/multi-gpu.md). cudakit never calls cuMulticastCreate.
//
// Only this folder calls nccl* functions, through the table: `raw::api().AllReduce(...)`.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "libraries/nccl_declarations.hpp"

// Every NCCL entry cudakit calls, X(Name, Required): the C name is "nccl" #Name. The
// fault sweep and the fake read this list. Optional entries may be missing from an older
// library; the feature that needs one says so.
#define CUDAKIT_NCCL_ENTRIES(X) \
  X(GetVersion, true)           \
  X(GetErrorString, true)       \
  X(GetLastError, true)         \
  X(GetUniqueId, true)          \
  X(CommInitRankConfig, true)   \
  X(CommSplit, true)            \
  X(CommFinalize, true)         \
  X(CommDestroy, true)          \
  X(CommAbort, true)            \
  X(CommGetAsyncError, true)    \
  X(CommCount, true)            \
  X(CommCuDevice, true)         \
  X(CommUserRank, true)         \
  X(AllReduce, true)            \
  X(Reduce, true)               \
  X(Broadcast, true)            \
  X(AllGather, true)            \
  X(ReduceScatter, true)        \
  X(Send, true)                 \
  X(Recv, true)                 \
  X(GroupStart, true)           \
  X(GroupEnd, true)             \
  X(CommRegister, false)        \
  X(CommDeregister, false)

namespace cudakit::nccl::raw {

/// Identifies one entry; the order is that of CUDAKIT_NCCL_ENTRIES.
enum class EntryId : std::size_t {
#define CUDAKIT_X(name, required) name,
  CUDAKIT_NCCL_ENTRIES(CUDAKIT_X)
#undef CUDAKIT_X
  count_
};
inline constexpr std::size_t entry_count = static_cast<std::size_t>(EntryId::count_);

/// "ncclAllReduce" for EntryId::AllReduce.
inline constexpr const char* entry_names[] = {
#define CUDAKIT_X(name, required) "nccl" #name,
    CUDAKIT_NCCL_ENTRIES(CUDAKIT_X)
#undef CUDAKIT_X
};
inline constexpr const char* entry_name(EntryId id) { return entry_names[static_cast<std::size_t>(id)]; }

/// The oldest NCCL cudakit runs on: 2.18 (communicator split, non-blocking communicators).
inline constexpr int minimum_version = 21800;

/// The entries, resolved with dlsym; an optional entry the library lacks is null.
struct Api {
#define CUDAKIT_X(name, required) decltype(&::nccl##name) name = nullptr;
  CUDAKIT_NCCL_ENTRIES(CUDAKIT_X)
#undef CUDAKIT_X
  int version = 0;   // ncclGetVersion: 22809 for 2.28.9
  std::string path;  // the file loaded
};

/// Loads NCCL on first use (thread-safe) and returns its entries. Throws NcclUnavailable
/// (nccl_error.hpp) when it cannot be found, is older than 2.18 or lacks an entry.
const Api& api();

/// "2.28.9" from 22809.
std::string version_string(int version);

/// Sets NCCL_NVLS_ENABLE=0 in the environment unless it is set (see above).
void keep_nvlink_multicast_off() noexcept;

namespace testing {
/// Replaces NCCL with a table (a fake in unit tests); `api.path` says what it is.
void install(const Api& api);
/// Forgets an installed table, a loaded library or a remembered failure: the next api()
/// searches again (e.g. after changing CUDAKIT_LIBNCCL).
void reset();
/// The places the loader would try, in order (for the loader's tests).
std::vector<std::string> candidates();
}  // namespace testing

}  // namespace cudakit::nccl::raw
