// The fault-injection sweep over growable (virtual-memory) buffers, managed buffers and
// batched copies. The rules, and how an operation is written: fault_sweep.hpp. The tests
// are Call/FaultSweep.EndsCleanlyWhateverTheDriverAnswers/<name>.
#include <vector>

#include "cudakit/batched_copy.hpp"
#include "cudakit/cudakit.hpp"
#include "cudakit/growable_buffer.hpp"
#include "cudakit/managed_buffer.hpp"
#include "fault_sweep.hpp"

namespace cudakit {
namespace {

namespace sweep = testing::sweep;
using sweep::Scene;
using driver::EntryId;

constexpr std::size_t chunk_floats = (std::size_t(2) << 20) / sizeof(float);  // the fake's granularity

const bool growable_ops = sweep::add("growable buffers", {
    {"GrowableBuffer(device, n)", [](Scene& s) { GrowableBuffer<float> b(s.device(), 8 * chunk_floats); }},
    {"GrowableBuffer grow, fill, shrink", [](Scene& s) {
       GrowableBuffer<float> b(s.device(), 8 * chunk_floats);
       b.resize(100);
       b.resize(3 * chunk_floats);
       fill(s.stream(), b, 2.0f);
       b.resize(10);
     }},
    {"GrowableBuffer shrink after a use on a second stream", [](Scene& s) {
       GrowableBuffer<float> b(s.device(), 8 * chunk_floats);
       b.resize(chunk_floats);
       b.resize(2 * chunk_floats);
       fill(s.stream(0), b, 1.0f);
       fill(s.stream(1), b, 2.0f);
       b.shrink_to_fit();
       b.resize(0);
     }},
});

const bool managed_ops = sweep::add("managed buffers", {
    {"ManagedBuffer(Stream, n, zeroed), prefetch, advise", [](Scene& s) {
       ManagedBuffer<float> m(s.stream(), 256, zeroed);
       m.prefetch_to(s.stream(), s.device());
       m.advise(ManagedAdvice::read_mostly);
       m.prefetch_to_host(s.stream(1));
     }},
});

const bool batch_ops = sweep::add("batched copies", {
    {"CopyBatch H2D, D2D, D2H", [](Scene& s) {
       auto& in = s.given<PinnedBuffer<float>>("in", [] { return PinnedBuffer<float>(64, zeroed); });
       auto& out = s.given<PinnedBuffer<float>>("out", [] { return PinnedBuffer<float>(64, zeroed); });
       auto& a = s.given<DeviceBuffer<float>>("a", [&] { return DeviceBuffer<float>(s.stream(), 64, zeroed); });
       auto& b = s.given<DeviceBuffer<float>>("b", [&] { return DeviceBuffer<float>(s.stream(), 64, zeroed); });
       CopyBatch up, across;
       for (std::size_t i = 0; i < 4; ++i) {
         up.add(in.span().subspan(i * 16, 16), a.subspan(i * 16, 16));
         across.add(a.subspan(i * 16, 16), b.subspan(48 - i * 16, 16));
       }
       up.submit(s.stream(1));
       across.submit(s.stream(1));
       CopyBatch down;
       down.add(b, out.span());
       down.submit(s.stream(0));
     }},
});

}  // namespace
}  // namespace cudakit
