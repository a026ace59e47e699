// The fault-injection sweep over sharing between processes: shareable pools, their
// exports and imports, pool allocations imported and released, shared and imported
// events, shareable virtual memory exported, imported and released. The fake lets one
// process import what it exported, so each operation runs in one process. The rules,
// and how an operation is written: fault_sweep.hpp. The tests are
// Call/FaultSweep.EndsCleanlyWhateverTheDriverAnswers/<name> (fault_sweep_test.cpp).
#include <vector>

#include "cudakit/cudakit.hpp"
#include "cudakit/shareable_memory.hpp"
#include "cudakit/shareable_pool.hpp"
#include "cudakit/shared_event.hpp"
#include "fault_sweep.hpp"

namespace cudakit {
namespace {

namespace sweep = testing::sweep;
using sweep::Scene;

constexpr std::size_t n = 64;

ShareablePool& pool(Scene& s) {
  return s.given<ShareablePool>("pool", [&] { return ShareablePool(s.device()); });
}
DeviceBuffer<float>& pool_buffer(Scene& s) {
  ShareablePool& p = pool(s);
  StreamRef st = s.stream();
  return s.given<DeviceBuffer<float>>("pool buffer", [&] { return p.allocate<float>(st, n, zeroed); });
}
ImportedPool& imported_pool(Scene& s) {
  ShareablePool& p = pool(s);
  Device d = s.device();
  return s.given<ImportedPool>("imported pool", [&] { return ImportedPool(IpcMessage{p.descriptor(), p.file()}, d); });
}
SharedEvent& shared_event(Scene& s) {
  return s.given<SharedEvent>("shared event", [&] { return SharedEvent(s.device()); });
}
DeviceBuffer<float>& shareable_buffer(Scene& s) {
  StreamRef st = s.stream();
  return s.given<DeviceBuffer<float>>("shareable buffer", [&] { return allocate_shareable<float>(st, n, zeroed); });
}

const bool ipc_ops = sweep::add("sharing between processes", {
    {"ShareablePool create and destroy", [](Scene& s) { ShareablePool p(s.device()); }},
    // Out of memory: the pool is trimmed and the allocation tried again (memory_pool.hpp).
    {"ShareablePool allocate and free", [](Scene& s) {
       DeviceBuffer<float> b = pool(s).allocate<float>(s.stream(), n, zeroed);
     }, {driver::EntryId::MemAllocFromPoolAsync}},
    {"ShareablePool file and descriptors", [](Scene& s) {
       ShareablePool& p = pool(s);
       FileDescriptor f = p.file();
       (void)p.descriptor();
       (void)p.descriptor(pool_buffer(s));
     }},
    {"ImportedPool import and destroy", [](Scene& s) {
       ShareablePool& p = pool(s);
       ImportedPool imported(IpcMessage{p.descriptor(), p.file()}, s.device());
     }},
    {"ImportedPool import of an allocation, used on two streams, released", [](Scene& s) {
       const IpcMessage m{pool(s).descriptor(pool_buffer(s)), FileDescriptor()};
       ImportedBuffer<float> b = imported_pool(s).import<float>(s.stream(), m, n);
       fill(s.stream(1), b.span(), 2.0f);
       b.release();
     }},
    {"SharedEvent create, record after writes, descriptor", [](Scene& s) {
       SharedEvent e(s.device());
       e.record_after_writes(s.stream(1), pool_buffer(s));
       (void)e.descriptor();
     }},
    {"ImportedEvent open, wait, ordered import", [](Scene& s) {
       SharedEvent& e = shared_event(s);
       const IpcMessage m{pool(s).descriptor(pool_buffer(s)), FileDescriptor()};
       const IpcDescriptor ed = s.given<IpcDescriptor>("event descriptor", [&] { return e.descriptor(); });
       ImportedEvent ready(IpcMessage{ed, FileDescriptor()}, s.device());
       ImportedBuffer<float> b = imported_pool(s).import<float>(s.stream(), m, n);
       b.after(ready, s.stream(1));
     }},
    {"allocate_shareable and free", [](Scene& s) { DeviceBuffer<float> b = allocate_shareable<float>(s.stream(), n, zeroed); }},
    {"shareable file and descriptor", [](Scene& s) {
       DeviceBuffer<float>& b = shareable_buffer(s);
       FileDescriptor f = shareable_file(b);
       (void)shareable_descriptor(b);
     }},
    {"import_shareable, used, released", [](Scene& s) {
       DeviceBuffer<float>& b = shareable_buffer(s);
       IpcMessage& m = s.given<IpcMessage>("shareable message", [&] {
         return IpcMessage{shareable_descriptor(b), shareable_file(b)};
       });
       ImportedBuffer<float> view = import_shareable<float>(s.stream(), m, n);
       fill(s.stream(), view.span(), 3.0f);
     }},
});

}  // namespace
}  // namespace cudakit
