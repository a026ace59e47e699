// The doctor's checks of sharing between processes: a shareable pool and its exported
// handle and allocation, an interprocess event, a shareable virtual-memory allocation,
// each carried over a socket pair and parsed back. The import itself needs a second
// process; the device tests and `cudakit bench --filter ipc` make one. Each check
// prints "skip" where the driver or the device cannot share that way.
#include <optional>
#include <string>

#include "command.hpp"
#include "cudakit/cudakit.hpp"
#include "cudakit/ipc_channel.hpp"
#include "cudakit/shareable_memory.hpp"
#include "cudakit/shareable_pool.hpp"
#include "cudakit/shared_event.hpp"

namespace cudakit::tool {
namespace {

// Sends `descriptor` (with `file`) from one end of a new socket pair and receives it at
// the other: what arrives must be the same kind, size and device, with a file exactly
// when the kind carries one.
std::string round_trip(const IpcDescriptor& descriptor, int file) {
  auto [a, b] = IpcChannel::socket_pair();
  IpcChannel from = IpcChannel::adopt(std::move(a)), to = IpcChannel::adopt(std::move(b));
  from.send(descriptor, file);
  IpcMessage m = to.receive();
  if (m.descriptor.kind != descriptor.kind || m.descriptor.bytes != descriptor.bytes ||
      m.descriptor.device_uuid != descriptor.device_uuid || static_cast<bool>(m.file) != (file >= 0))
    return std::string("a ") + ipc_kind_name(descriptor.kind) + " descriptor changed on its way through a socket";
  return {};
}

CUDAKIT_DOCTOR_CHECK("sharing a memory pool between processes", 70, true, [](const Device* d) -> CheckOutcome {
  std::optional<ShareablePool> pool;
  try {
    pool.emplace(*d);
  } catch (const FeatureUnavailable& e) {
    throw CheckSkipped(std::string("skipped: ") + e.what());
  }
  Stream s(*d);
  DeviceBuffer<float> buffer = pool->allocate<float>(s, 1 << 20, zeroed);
  FileDescriptor file = pool->file();
  if (!file) return "cuMemPoolExportToShareableHandle gave no file descriptor";
  if (std::string why = round_trip(pool->descriptor(), file.get()); !why.empty()) return why;
  if (std::string why = round_trip(pool->descriptor(buffer), -1); !why.empty()) return why;
  SharedEvent ready(*d);
  ready.record_after_writes(s, buffer);
  if (std::string why = round_trip(ready.descriptor(), -1); !why.empty()) return why;
  s.synchronize();
  return CheckOutcome::passed("pool, allocation and event exported; the import needs a second process "
                              "(cudakit bench --filter ipc)");
});

CUDAKIT_DOCTOR_CHECK("sharing virtual memory between processes", 71, true, [](const Device* d) -> CheckOutcome {
  std::size_t granularity = 0;
  try {
    granularity = shareable_granularity(*d);
  } catch (const FeatureUnavailable& e) {
    throw CheckSkipped(std::string("skipped: ") + e.what());
  }
  Stream s(*d);
  DeviceBuffer<float> buffer = allocate_shareable<float>(s, 1000, zeroed);
  FileDescriptor file = shareable_file(buffer);
  if (std::string why = round_trip(shareable_descriptor(buffer), file.get()); !why.empty()) return why;
  s.synchronize();
  return CheckOutcome::passed("granularity " + std::to_string(granularity >> 10) + " KiB");
});

}  // namespace
}  // namespace cudakit::tool
