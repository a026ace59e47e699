// The fault-injection sweep over the launch area's public operations: modules
// and libraries loaded from memory (fatbin, cubin, PTX), kernel lookup, typed and untyped
// launches, launch attributes, occupancy queries, declared work (one and two devices, pinned
// buffers, inside a capture), and the Gpu facade's load and launch.
// The rules, and how an operation is written: fault_sweep.hpp. Program (NVRTC) is left
// out: compiling needs a real libnvrtc, and the driver calls it leads to are the module
// loads swept here. The tests are Call/FaultSweep.EndsCleanlyWhateverTheDriverAnswers/<name>.
#include <vector>

#include "cudakit/cudakit.hpp"
#include "device/device_state.hpp"
#include "fake_kernels.hpp"
#include "fault_sweep.hpp"

namespace cudakit {
namespace {

namespace sweep = testing::sweep;
using sweep::Scene;
using driver::EntryId;
using Buf = DeviceBuffer<float>;
using testing::SaxpySig;
using testing::FillSig;

constexpr int n = 64;

// The fake's images live with the fake driver: each fresh driver needs them registered
// again (no driver call: an input like any other).
int image(Scene& s) {
  return s.given<int>("image", [] {
    fake::FakeKernel plain{"plain", fake::params<float*>(), {}};
    fake::FakeKernel clustered{"clustered", fake::params<float*>(), {}};
    clustered.attributes[CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED] = 1;
    return testing::standard_image({plain, clustered});
  });
}
std::vector<unsigned char> fatbin(Scene& s) { return fake::fatbin_image(image(s), {90}, {}); }

const Module& module(Scene& s) {
  int id = image(s);
  return s.given<Module>("module", [&] { return Module::load(Device::get(0), fake::fatbin_image(id, {90}, {})); });
}
const Library& library(Scene& s) {
  int id = image(s);
  return s.given<Library>("library", [&] { return Library::load(fake::fatbin_image(id, {90}, {})); });
}
Kernel<SaxpySig>& saxpy(Scene& s) {
  const Module& m = module(s);
  return s.given<Kernel<SaxpySig>>("saxpy", [&] { return m.kernel<SaxpySig>("saxpy"); });
}
Function& function(Scene& s, const char* name) {
  const Module& m = module(s);
  return s.given<Function>(std::string("function ") + name, [&] { return m.function(name); });
}
Buf& buffer(Scene& s, const std::string& key, int on = 0) {
  StreamRef st = s.stream(on);
  return s.given<Buf>(key, [&] { return Buf(st, n, zeroed); });
}

const LaunchConfig one_block{.grid = 1, .block = n};

// A kernel's first lookup reads its cluster attributes, which only some GPUs and drivers
// report: INVALID_VALUE or NOT_SUPPORTED there means "cannot say", taken as 0
// (kernel.cpp). Operations that look a kernel up for the first time list it.
const std::vector<EntryId> optional_attributes = {EntryId::FuncGetAttribute};

// ---- modules and libraries ----
const bool module_ops = sweep::add("modules", {
    {"Module::load (fatbin, machine code)", [](Scene& s) { Module m = Module::load(s.device(), fatbin(s)); }},
    {"Module::load (fatbin, PTX only: JIT)",
     [](Scene& s) { Module m = Module::load(s.device(), fake::fatbin_image(image(s), {80}, {80})); }},
    {"Module::load (cubin)", [](Scene& s) { Module m = Module::load(s.device(), fake::cubin_image(image(s))); }},
    {"Module::load (PTX)", [](Scene& s) { Module m = Module::load(s.device(), fake::ptx_image(image(s))); }},
    {"Module::load (ContextRef)", [](Scene& s) { Module m = Module::load(s.context(), fatbin(s)); }},
    {"Module::load (second module on the device)", [](Scene& s) {
       module(s);
       Module m = Module::load(s.device(), fatbin(s));
     }},
    {"Module move and reset", [](Scene& s) {
       Module m = Module::load(s.device(), fatbin(s));
       Module k(std::move(m));
       k = Module();
     }},
    {"Module::function", [](Scene& s) { (void)module(s).function("fill"); }, optional_attributes},
    {"Module::kernel<Sig>", [](Scene& s) { (void)module(s).kernel<SaxpySig>("saxpy"); }, optional_attributes},
    {"Module::kernel_names", [](Scene& s) { (void)module(s).kernel_names(); }},
    {"Function::attribute", [](Scene& s) { (void)function(s, "fill").attribute(CU_FUNC_ATTRIBUTE_NUM_REGS); }},
    {"Library::load", [](Scene& s) { Library l = Library::load(fatbin(s)); }},
    {"Library::function (first use on the device)", [](Scene& s) { (void)library(s).function(s.device(), "fill"); }, optional_attributes},
    {"Library::kernel<Sig>", [](Scene& s) { (void)library(s).kernel<SaxpySig>(s.device(), "saxpy"); }, optional_attributes},
    {"Library::kernel_names", [](Scene& s) { (void)library(s).kernel_names(); }},
    {"Library::code_for", [](Scene& s) { (void)library(s).code_for(s.device()); }},
});

// ---- launches ----
const bool launch_ops = sweep::add("launches", {
    {"launch typed (buffers tracked)", [](Scene& s) {
       launch(s.stream(), saxpy(s), one_block, 2.0f, buffer(s, "x"), buffer(s, "y"), n);
     }},
    {"launch typed with buffers last written on other streams", [](Scene& s) {
       launch(s.stream(2), saxpy(s), one_block, 2.0f, buffer(s, "x", 0), buffer(s, "y", 1), n);
     }},
    {"launch typed (first launch of a fresh kernel)", [](Scene& s) {
       auto fill = module(s).kernel<FillSig>("fill");
       launch(s.stream(), fill, one_block, buffer(s, "y"), 1.0f, n);
     },
     optional_attributes},
    {"launch untyped (arguments)", [](Scene& s) {
       launch(s.stream(), function(s, "fill"), one_block, buffer(s, "y").device_pointer(), 1.0f, n);
     }},
    {"launch untyped (KernelArgs)", [](Scene& s) {
       launch(s.stream(), function(s, "fill"), one_block, KernelArgs().add(buffer(s, "y")).add(1.0f).add(n));
     }},
    {"launch with a cluster", [](Scene& s) {
       launch(s.stream(), function(s, "clustered"), {.grid = 8, .block = 32, .cluster = Dim3{2}},
              buffer(s, "y").device_pointer());
     }},
    {"launch cooperative", [](Scene& s) {
       launch(s.stream(), function(s, "plain"), {.grid = 4, .block = 32, .cooperative = true},
              buffer(s, "y").device_pointer());
     }},
    {"launch with a priority", [](Scene& s) {
       launch(s.stream(), function(s, "plain"), {.grid = 1, .block = 32, .priority = -1},
              buffer(s, "y").device_pointer());
     }},
    {"launch with large shared memory", [](Scene& s) {
       launch(s.stream(), function(s, "plain"),
              {.grid = 1, .block = 32, .shared_memory_bytes = 100 * 1024, .allow_large_shared_memory = true},
              buffer(s, "y").device_pointer());
     }},
    {"max_active_blocks_per_multiprocessor",
     [](Scene& s) { (void)max_active_blocks_per_multiprocessor(function(s, "fill"), 128); }},
    {"suggested_block_size", [](Scene& s) { (void)suggested_block_size(function(s, "fill")); }},
    {"max_active_clusters", [](Scene& s) {
       (void)max_active_clusters(function(s, "clustered"), {.grid = 8, .block = 32, .cluster = Dim3{2}});
     }},
    {"max_potential_cluster_size", [](Scene& s) {
       (void)max_potential_cluster_size(function(s, "clustered"), {.grid = 8, .block = 32, .cluster = Dim3{2}});
     }},
});

// ---- declared work ----
// The work is a raw driver call that reports its failure as cudakit's own calls do
// (check): an injected fault in it reaches the caller the same way.
void raw_fill(StreamRef s, const Buf& b, unsigned bits) {
  check(driver::cu.MemsetD32Async(b.device_pointer(), bits, b.size(), s.handle()), "cuMemsetD32Async",
        Resource::of(ResourceKind::stream, s.handle(), s.device_ordinal()));
}
void raw_copy(StreamRef s, const Buf& from, const Buf& to) {
  check(driver::cu.MemcpyDtoDAsync(to.device_pointer(), from.device_pointer(), from.size() * sizeof(float), s.handle()),
        "cuMemcpyDtoDAsync", Resource::of(ResourceKind::stream, s.handle(), s.device_ordinal()));
}

const bool declared_work_ops = sweep::add("declared work", {
    {"enqueue on one stream", [](Scene& s) {
       Buf& x = buffer(s, "x");
       Buf& y = buffer(s, "y");
       enqueue(s.stream(), reads(x), writes(y), [&](StreamRef st) { raw_copy(st, x, y); });
     }},
    {"enqueue with buffers last written on other streams", [](Scene& s) {
       Buf& x = buffer(s, "x", 0);
       Buf& y = buffer(s, "y", 1);
       enqueue(s.stream(2), reads(x), writes(y), [&](StreamRef st) { raw_copy(st, x, y); });
     }},
    {"enqueue of a pinned buffer read on another stream", [](Scene& s) {
       Buf& x = buffer(s, "x", 0);
       PinnedBuffer<float>& p = s.given<PinnedBuffer<float>>("pinned", [] { return PinnedBuffer<float>(n, zeroed); });
       s.setup([&] { download(s.stream(0), x, p); });
       enqueue(s.stream(1), reads(p), writes(x), [&](StreamRef st) {
         check(driver::cu.MemcpyHtoDAsync(x.device_pointer(), p.data(), n * sizeof(float), st.handle()),
               "cuMemcpyHtoDAsync", Resource::of(ResourceKind::stream, st.handle(), st.device_ordinal()));
       });
     }},
    {"enqueue inside a capture, replayed", [](Scene& s) {
       Buf& y = buffer(s, "y");
       StreamRef st = s.stream();
       Graph g = capture_nonempty(st, [&] { enqueue(st, writes(y), [&](StreamRef h) { raw_fill(h, y, 7); }); });
       GraphExec exec = g.instantiate();
       exec.launch(st);
     }},
});

// ---- declared work on two devices ----
const bool declared_work_peer_ops = sweep::add("declared work (two devices)", {
    {"enqueue of a buffer on another device", [](Scene& s) {
       StreamRef s1 = s.given<Stream>("stream on device 1", [&] { return Stream(Device::get(1)); }).ref();
       Buf& there = s.given<Buf>("buffer on device 1", [&] { return Buf(s1, n, zeroed); });
       Buf& here = buffer(s, "y");
       enqueue(s.stream(), reads(there), writes(here), [&](StreamRef st) {
         check(driver::cu.MemcpyPeerAsync(here.device_pointer(), detail::library_context(0), there.device_pointer(),
                                          detail::library_context(1), n * sizeof(float), st.handle()),
               "cuMemcpyPeerAsync", Resource::of(ResourceKind::stream, st.handle(), st.device_ordinal()));
       });
     },
     {}, 2},
});

// ---- the Gpu facade (load and launch) ----
const bool gpu_launch_ops = sweep::add("Gpu facade (launch)", {
    {"Gpu::load and Gpu::launch", [](Scene& s) {
       Gpu& gpu = s.given<Gpu>("gpu", [] { return Gpu(0); });
       Buf& y = s.given<Buf>("y on the gpu", [&] { return gpu.alloc<float>(n, zeroed); });
       Module m = gpu.load(fatbin(s));
       gpu.launch(m.kernel<FillSig>("fill"), 1, n, y, 3.0f, n);
       gpu.synchronize();
     },
     optional_attributes},
});

}  // namespace
}  // namespace cudakit
