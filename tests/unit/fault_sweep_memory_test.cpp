// The fault-injection sweep over the memory area's public operations: device
// buffers, spans, copies, fills, pinned memory, host registrations, the memory pool,
// cross-stream hand-offs, ManualOrdering, peer access, and the Gpu facade's memory
// operations. The rules, and how an operation is written: fault_sweep.hpp. The tests are
// Call/FaultSweep.EndsCleanlyWhateverTheDriverAnswers/<name> (fault_sweep_test.cpp).
#include <span>
#include <vector>

#include "cudakit/cudakit.hpp"
#include "memory/staging.hpp"
#include "fault_sweep.hpp"

namespace cudakit {
namespace {

namespace sweep = testing::sweep;
using sweep::Scene;
using driver::EntryId;
using Buf = DeviceBuffer<float>;

constexpr std::size_t n = 64;

// A zeroed buffer of n floats allocated on stream `on` (an input: made outside the sweep).
// Zeroing is a write: the buffer's last writer is stream `on`, so a use on another
// stream is a hand-off.
Buf& buffer(Scene& s, const std::string& key, int on = 0) {
  StreamRef st = s.stream(on);
  return s.given<Buf>(key, [&] { return Buf(st, n, zeroed); });
}
template <class T = float>
PinnedBuffer<T>& pinned(Scene& s, const std::string& key) {
  return s.given<PinnedBuffer<T>>(key, [] { return PinnedBuffer<T>(n, zeroed); });
}
std::vector<float>& host(Scene& s, const std::string& key) {
  return s.given<std::vector<float>>(key, [] { return std::vector<float>(n, 2.0f); });
}

// Host memory of its own for each run, kept for the scene's life: after a failed
// cuMemHostUnregister the driver still holds the range, and registering it again is
// refused (host_registration.hpp), so a run again must not land on the same addresses.
std::vector<float>& fresh_host(Scene& s) {
  auto& all = s.given<std::vector<std::vector<float>>>("registered", [] { return std::vector<std::vector<float>>(); });
  all.reserve(8);  // the elements' own storage never moves; only the outer vector grows
  return all.emplace_back(n, 1.0f);
}

// Small staging buffers for the operation's scope, so a small pageable copy takes
// several of them (and waits for one to come back). reset_library_state()
// restores the defaults at the end of every run too.
struct SmallStaging {
  SmallStaging() { detail::set_staging_limits_for_testing(64, 2); }
  ~SmallStaging() { detail::set_staging_limits_for_testing(detail::default_staging_chunk_bytes, detail::default_staging_max_chunks); }
};

// A staging buffer's cuEventQuery that fails counts as "still busy" (staging.cpp): the
// copy then takes or waits for another buffer, and a real failure surfaces from that
// wait. Operations that reuse staging buffers list it as a recovery.
const std::vector<EntryId> staging_reuse = {EntryId::EventQuery};

// ---- device buffers and spans ----
const bool buffer_ops = sweep::add("device buffers", {
    {"DeviceBuffer(Stream, n, uninitialized) (first pool allocation on the device)",
     [](Scene& s) { Buf b(s.stream(), n, uninitialized); }},
    {"DeviceBuffer(Stream, n, zeroed) (first pool allocation on the device)",
     [](Scene& s) { Buf b(s.stream(), n, zeroed); }},
    {"DeviceBuffer(Stream, n, uninitialized) (later pool allocations)",
     [](Scene& s) { buffer(s, "earlier"); Buf b(s.stream(), n, uninitialized); }},
    {"DeviceBuffer(Stream, n, zeroed) (later pool allocations)",
     [](Scene& s) { buffer(s, "earlier"); Buf b(s.stream(), n, zeroed); }},
    {"DeviceBuffer(Stream, n, uninitialized, plain)",
     [](Scene& s) { Buf b(s.stream(), n, uninitialized, Allocator::plain); }},
    {"DeviceBuffer(Stream, n, zeroed, plain)", [](Scene& s) { Buf b(s.stream(), n, zeroed, Allocator::plain); }},
    {"DeviceBuffer move construct and assign", [](Scene& s) {
       Buf a(s.stream(), n, uninitialized);
       Buf b(std::move(a));
       Buf c(s.stream(), n / 2, uninitialized, Allocator::plain);
       c = std::move(b);  // frees c's plain memory
     }},
    {"DeviceBuffer::reset after a use", [](Scene& s) {
       Buf b(s.stream(), n, zeroed);
       fill(s.stream(), b, 1.0f);
       b.reset();
     }},
    {"DeviceBuffer destruction after a use on another stream", [](Scene& s) {
       Buf b(s.stream(0), n, zeroed);
       fill(s.stream(1), b, 1.0f);  // the hand-off: stream 1 waits for the allocation on stream 0
     }},
    {"DeviceBuffer (plain) destruction after uses on two streams", [](Scene& s) {
       Buf b(s.stream(0), n, zeroed, Allocator::plain);
       fill(s.stream(1), b, 1.0f);
       fill(s.stream(0), b, 2.0f);
     }},
    {"DeviceSpan sub-ranges: fill and copy between halves", [](Scene& s) {
       Buf& b = buffer(s, "b");
       fill(s.stream(), b.subspan(8, 16), 3.0f);
       copy(s.stream(), b.first(n / 2), b.last(n / 2));
     }},
    {"DeviceSpan sub-range of a buffer on another stream", [](Scene& s) {
       Buf& b = buffer(s, "b", 0);
       fill(s.stream(1), b.subspan(n / 2), 3.0f);
     }},
});

// ---- copies, fills, upload, download ----
const bool copy_ops = sweep::add("copies", {
    {"copy H2D from std::vector (pageable, staged)", [](Scene& s) { copy(s.stream(), host(s, "h"), buffer(s, "b")); }},
    {"copy H2D from std::span (pageable, staged)",
     [](Scene& s) { copy(s.stream(), std::span<const float>(host(s, "h")), buffer(s, "b").span()); }},
    {"copy H2D pageable in several staging buffers", [](Scene& s) {
       SmallStaging small;
       copy(s.stream(), host(s, "h"), buffer(s, "b"));
     },
     staging_reuse},
    {"copy D2H into std::vector (pageable, staged)", [](Scene& s) { copy(s.stream(), buffer(s, "b"), host(s, "h")); }},
    {"copy D2H into std::span (pageable, staged)",
     [](Scene& s) { copy(s.stream(), buffer(s, "b").subspan(0, 8), std::span<float>(host(s, "h")).first(8)); }},
    {"copy D2H pageable in several staging buffers", [](Scene& s) {
       SmallStaging small;
       copy(s.stream(), buffer(s, "b"), host(s, "h"));
     },
     staging_reuse},
    {"copy H2D from a PinnedBuffer", [](Scene& s) { copy(s.stream(), pinned(s, "p"), buffer(s, "b")); }},
    {"copy D2H into a PinnedBuffer", [](Scene& s) { copy(s.stream(), buffer(s, "b"), pinned(s, "p")); }},
    {"copy D2D buffer to buffer", [](Scene& s) { copy(s.stream(), buffer(s, "a"), buffer(s, "b")); }},
    {"copy D2D span to span", [](Scene& s) { copy(s.stream(), buffer(s, "a").first(8), buffer(s, "b").last(8)); }},
    {"copy D2D on a third stream (two hand-offs)",
     [](Scene& s) { copy(s.stream(2), buffer(s, "a", 0), buffer(s, "b", 1)); }},
    {"fill", [](Scene& s) { fill(s.stream(), buffer(s, "b"), 1.5f); }},
    {"fill of 8-byte elements (two strided memsets)", [](Scene& s) {
       auto& b = s.given<DeviceBuffer<double>>("d", [&] { return DeviceBuffer<double>(s.stream(), n, zeroed); });
       fill(s.stream(), b, -1.25);
     }},
    {"fill_pattern8", [](Scene& s) { fill_pattern8(s.stream(), buffer(s, "b"), 0x3f); }},
    {"fill_pattern16", [](Scene& s) { fill_pattern16(s.stream(), buffer(s, "b"), 0x3f80); }},
    {"fill_pattern32", [](Scene& s) { fill_pattern32(s.stream(), buffer(s, "b"), 0x3f800000u); }},
    {"upload (pool)", [](Scene& s) { Buf b = upload(s.stream(), host(s, "h")); }},
    {"upload (plain)", [](Scene& s) { Buf b = upload(s.stream(), host(s, "h"), Allocator::plain); }},
    {"download into a vector", [](Scene& s) { (void)download(s.stream(), buffer(s, "b")); }},
    {"download into a span", [](Scene& s) { download(s.stream(), buffer(s, "b"), std::span<float>(host(s, "h"))); }},
    {"download of a buffer written on another stream", [](Scene& s) { (void)download(s.stream(1), buffer(s, "b", 0)); }},
    {"download into a PinnedBuffer", [](Scene& s) { download(s.stream(), buffer(s, "b"), pinned(s, "p")); }},
});

// ---- page-locked host memory ----
const bool pinned_ops = sweep::add("pinned memory", {
    {"PinnedBuffer(n, uninitialized)", [](Scene&) { PinnedBuffer<float> p(n, uninitialized); }},
    {"PinnedBuffer(n, zeroed, mapped)", [](Scene&) { PinnedBuffer<float> p(n, zeroed, {.mapped = true}); }},
    {"PinnedBuffer(n, uninitialized, write-combined) and move", [](Scene&) {
       PinnedBuffer<float> p(n, uninitialized, {.write_combined = true});
       PinnedBuffer<float> q(std::move(p));
       PinnedBuffer<float> r(1, zeroed);
       r = std::move(q);
     }},
    {"PinnedBuffer used on two streams: synchronize, destroy", [](Scene& s) {
       PinnedBuffer<float> p(n, zeroed);
       copy(s.stream(0), p, buffer(s, "a", 0));
       copy(s.stream(1), buffer(s, "b", 1), p);
       p.synchronize();
     }},
    {"PinnedBuffer::reset after a use", [](Scene& s) {
       PinnedBuffer<float> p(n, zeroed);
       copy(s.stream(), p, buffer(s, "b"));
       p.reset();
     }},
    {"HostRegistration(vector)", [](Scene& s) { HostRegistration r(fresh_host(s)); }},
    {"HostRegistration(pointer, bytes, mapped)",
     [](Scene& s) { HostRegistration r(fresh_host(s).data(), n * sizeof(float), {.mapped = true}); }},
    {"HostRegistration used by copies, synchronize, destroy", [](Scene& s) {
       std::vector<float>& h = fresh_host(s);
       HostRegistration r(h);
       copy(s.stream(0), h, buffer(s, "a", 0));
       copy(s.stream(1), buffer(s, "b", 1), h);
       r.synchronize();
     }},
    {"HostRegistration move and reset", [](Scene& s) {
       HostRegistration r(fresh_host(s));
       HostRegistration q(std::move(r));
       q.reset();
     }},
});

// ---- the memory pool ----
const bool pool_ops = sweep::add("memory pool", {
    {"MemoryPoolRef::device_default", [](Scene& s) { (void)default_memory_pool(s.device()); }},
    {"MemoryPoolRef::release_threshold", [](Scene& s) { (void)default_memory_pool(s.device()).release_threshold(); }},
    {"MemoryPoolRef::set_release_threshold (before the first allocation)",
     [](Scene& s) { default_memory_pool(s.device()).set_release_threshold(1 << 20); }},
    {"MemoryPoolRef::trim_to", [](Scene& s) {
       buffer(s, "b");
       default_memory_pool(s.device()).trim_to(0);
     }},
    {"MemoryPoolRef::usage", [](Scene& s) {
       buffer(s, "b");
       (void)default_memory_pool(s.device()).usage();
     }},
    {"MemoryPoolRef::reset_peaks", [](Scene& s) { default_memory_pool(s.device()).reset_peaks(); }},
    {"DeviceBuffer from a PoolResource, used on two streams", [](Scene& s) {
       Buf& in = buffer(s, "in");
       Buf b(s.stream(0), n, zeroed, PoolResource(s.device()));
       copy(s.stream(0), in, b);
       copy(s.stream(1), b, in);
     }},
});

// ---- cross-stream ordering ----
const bool ordering_ops = sweep::add("cross-stream ordering", {
    {"hand-off: written on stream 0, read on stream 1",
     [](Scene& s) { copy(s.stream(1), buffer(s, "a", 0), buffer(s, "b", 1)); }},
    {"hand-off: written on stream 0, written on stream 1", [](Scene& s) { fill(s.stream(1), buffer(s, "a", 0), 4.0f); }},
    {"hand-off: read on streams 1 and 2, then written on stream 0", [](Scene& s) {
       Buf& a = buffer(s, "a", 0);
       copy(s.stream(1), a, buffer(s, "b", 1));
       copy(s.stream(2), a, buffer(s, "c", 2));
       fill(s.stream(0), a, 5.0f);
     }},
    {"ManualOrdering scope", [](Scene& s) {
       Buf& a = buffer(s, "a", 0);
       ManualOrdering manual;
       s.stream(1).wait(s.stream(0));
       fill(s.stream(1), a, 4.0f);
     }},
});

// ---- two devices ----
const bool peer_ops = sweep::add("peer access", {
    {"enable_peer_access", [](Scene& s) { enable_peer_access(s.device(0), s.device(1)); }, {}, 2},
    {"copy D2D between two devices (enables peer access)", [](Scene& s) {
       StreamRef s1 = s.given<Stream>("stream on device 1", [&] { return Stream(Device::get(1)); }).ref();
       Buf& b = s.given<Buf>("b on device 1", [&] { return Buf(s1, n, zeroed); });
       copy(s1, buffer(s, "a", 0), b);
     },
     // Copies enable peer access where they can and otherwise leave the pair to the
     // driver's staged peer copies (peer_access.hpp): a failed enable is a fallback.
     {EntryId::CtxEnablePeerAccess}, 2},
});

// ---- the Gpu facade (memory) ----
const bool gpu_memory_ops = sweep::add("Gpu facade (memory)", {
    {"Gpu(0)", [](Scene&) { Gpu gpu{0}; }},
    {"Gpu::new_stream", [](Scene& s) { Stream x = s.given<Gpu>("gpu", [] { return Gpu(0); }).new_stream(); }},
    {"Gpu::alloc (uninitialized, zeroed)", [](Scene& s) {
       Gpu& gpu = s.given<Gpu>("gpu", [] { return Gpu(0); });
       Buf a = gpu.alloc<float>(n, uninitialized);
       Buf b = gpu.alloc<float>(n, zeroed);
     }},
    {"Gpu::upload, fill, copy, download", [](Scene& s) {
       Gpu& gpu = s.given<Gpu>("gpu", [] { return Gpu(0); });
       Buf a = gpu.upload(host(s, "h"));
       Buf& b = s.given<Buf>("b", [&] { return gpu.alloc<float>(n, zeroed); });
       gpu.fill(b, 1.0f);
       gpu.copy(a, b);
       gpu.download(b, host(s, "h"));
       (void)gpu.download(a);
       gpu.synchronize();
     },
     staging_reuse},
});

}  // namespace
}  // namespace cudakit
