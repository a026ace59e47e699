// The driver layer: the only code in cudakit that calls the CUDA Driver API (DESIGN 2).
//
// libcuda.so.1 is opened at run time (never linked), and every entry is resolved
// through cuGetProcAddress_v2 at the ABI version listed in detail/driver_entries.hpp,
// lazily on its first call and thread-safely. A call reads one atomic pointer and
// jumps through it: nothing else sits on the hot path.
//
// Call an entry as `driver::cu.StreamQuery(stream)`. The result is the raw CUresult;
// the resource layers turn it into an exception with `driver::check` (error.hpp).
//
// Thread safety: everything here may be used from any thread at any time.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <atomic>
#include <cstddef>
#include <string>

#include "cudakit/export.hpp"
#include "cudakit/detail/driver_entries.hpp"

namespace cudakit::driver {

/// Identifies one driver entry; the order is that of CUDAKIT_DRIVER_ENTRIES.
enum class EntryId : std::size_t {
#define CUDAKIT_X(name, abi, since) name,
  CUDAKIT_DRIVER_ENTRIES(CUDAKIT_X)
#undef CUDAKIT_X
  count_
};

/// How many entries the table has.
inline constexpr std::size_t entry_count = static_cast<std::size_t>(EntryId::count_);

/// What the table knows of an entry: its C name, the ABI version we call, and the
/// driver version that introduced it.
struct CUDAKIT_API EntryInfo {
  const char* name;   // "cuStreamQuery"
  int abi_version;    // the _v suffix of the PFN we call (cuGetProcAddress's version)
  int introduced_in;  // 12040 for CUDA 12.4
};

/// One EntryInfo per entry, indexed by EntryId.
inline constexpr EntryInfo entry_infos[] = {
#define CUDAKIT_X(name, abi, since) {"cu" #name, abi, since},
    CUDAKIT_DRIVER_ENTRIES(CUDAKIT_X)
#undef CUDAKIT_X
};

/// The EntryInfo of `id` (compile-time; no driver needed).
constexpr const EntryInfo& entry_info(EntryId id) { return entry_infos[static_cast<std::size_t>(id)]; }

/// The oldest driver cudakit runs on (CUDA 12.0). Newer entries are detected at run time.
inline constexpr int minimum_driver_version = 12000;

namespace detail {
// One resolved pointer per entry; null until its first call (or a fake table's install).
CUDAKIT_API extern std::atomic<void*> slots[entry_count];
// Resolves one entry, loading the driver first if needed. Throws DriverUnavailable when
// the driver cannot be loaded and FeatureUnavailable when this driver lacks the entry.
CUDAKIT_API void* resolve(EntryId id);
// Whether the driver is loaded (or a fake table installed) now. Never loads it, never
// blocks: the error layer asks it before naming a code through the driver, which
// must not happen while the loader itself is naming cuInit's failure.
CUDAKIT_API bool loaded() noexcept;
}  // namespace detail

/// A callable for one entry, typed by the PFN of its pinned ABI version.
template <EntryId Id, class Fn>
struct Entry;

/// Calling it costs one acquire load and an indirect call; the first call resolves the
/// pointer (cuGetProcAddress at the pinned ABI version), throwing DriverUnavailable or
/// FeatureUnavailable when it cannot. Returns the driver's status unchecked.
template <EntryId Id, class R, class... Args>
struct Entry<Id, R(CUDAAPI*)(Args...)> {
  static constexpr EntryId id = Id;
  static constexpr const char* name() { return entry_info(Id).name; }

  R operator()(Args... args) const {
    void* fn = detail::slots[static_cast<std::size_t>(Id)].load(std::memory_order_acquire);
    if (fn == nullptr) [[unlikely]]
      fn = detail::resolve(Id);
    return reinterpret_cast<R(CUDAAPI*)(Args...)>(fn)(args...);
  }
};

/// The PFN type of an entry at its pinned ABI version.
template <EntryId Id>
struct EntryType;
#define CUDAKIT_X(name, abi, since)                  \
  template <>                                        \
  struct EntryType<EntryId::name> {                  \
    using type = PFN_cu##name##_v##abi;              \
  };
CUDAKIT_DRIVER_ENTRIES(CUDAKIT_X)
#undef CUDAKIT_X

/// Every entry, as members named without the "cu" prefix: `cu.StreamQuery(s)`.
struct CUDAKIT_API Api {
#define CUDAKIT_X(name, abi, since) [[no_unique_address]] Entry<EntryId::name, PFN_cu##name##_v##abi> name;
  CUDAKIT_DRIVER_ENTRIES(CUDAKIT_X)
#undef CUDAKIT_X
};

/// The table through which all of cudakit calls the driver (`driver::cu.Name(...)`).
inline constexpr Api cu{};

/// Loads and initialises the driver (cuInit) if that has not happened; throws
/// DriverUnavailable with the reason when it cannot. Cheap after the first call.
CUDAKIT_API void ensure_loaded();

/// The driver's CUDA version, e.g. 13000 for CUDA 13.0 (loads the driver).
CUDAKIT_API int version();

/// The file the driver was loaded from, as the dynamic loader resolved it.
CUDAKIT_API std::string library_path();

/// Whether this driver has the entry (resolving it if needed). Never throws for a
/// missing entry; throws DriverUnavailable when there is no driver at all.
CUDAKIT_API bool has(EntryId id);

/// Throws FeatureUnavailable naming `feature`, the entry and the version that
/// introduced it, when this driver lacks the entry.
CUDAKIT_API void require(EntryId id, const char* feature);

/// "13.0" from 13000.
CUDAKIT_API std::string version_string(int version);

}  // namespace cudakit::driver
