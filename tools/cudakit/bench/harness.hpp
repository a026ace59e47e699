// What a benchmark file includes: the registry, the interleaved timing, the result
// builders, and the raw driver as an application calling the Driver API would hold it.
//
// The raw side of a comparison calls the driver's own function pointers, resolved once
// up front (raw_entry), with the status checked after each call as any careful
// application does; it never goes through a cudakit wrapper. Its objects are created
// with raw calls as well, so the comparison is cudakit's whole path against the
// driver's.
#pragma once

#include <cuda.h>

#include "bench/registry.hpp"
#include "bench/result.hpp"
#include "bench/timing.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"

namespace cudakit::tool::bench {

/// The driver's pointer for an entry at the ABI version cudakit pins: what an
/// application would get from cuGetProcAddress. Loads the driver when needed.
template <driver::EntryId Id>
typename driver::EntryType<Id>::type raw_entry() {
  return reinterpret_cast<typename driver::EntryType<Id>::type>(driver::detail::resolve(Id));
}

/// Throws DriverError naming `call` unless `status` is CUDA_SUCCESS: the raw side's
/// status check (one compare on success, like cudakit's own).
inline void check_raw(CUresult status, const char* call) { check(status, call, Resource::none()); }

/// The device's primary context retained and made current with raw driver calls, as an
/// application would set it up before creating raw streams and events; released at the
/// end of the scope.
class RawPrimaryContext {
 public:
  explicit RawPrimaryContext(const Device& device);
  ~RawPrimaryContext();
  RawPrimaryContext(const RawPrimaryContext&) = delete;
  RawPrimaryContext& operator=(const RawPrimaryContext&) = delete;
  CUcontext handle() const { return context_; }

 private:
  CUdevice device_;
  CUcontext context_ = nullptr;
};

/// A raw stream (non-blocking, priority 0) or event (timing disabled) destroyed at the
/// end of the scope; a failed destroy is parked (error.hpp), and `cudakit bench`
/// reports parked errors as the benchmark's failure.
class RawStream {
 public:
  RawStream();
  ~RawStream();
  RawStream(const RawStream&) = delete;
  RawStream& operator=(const RawStream&) = delete;
  CUstream handle() const { return stream_; }

 private:
  CUstream stream_ = nullptr;
};

class RawEvent {
 public:
  RawEvent();
  ~RawEvent();
  RawEvent(const RawEvent&) = delete;
  RawEvent& operator=(const RawEvent&) = delete;
  CUevent handle() const { return event_; }

 private:
  CUevent event_ = nullptr;
};

}  // namespace cudakit::tool::bench
