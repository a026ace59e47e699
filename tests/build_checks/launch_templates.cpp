// Compiled with -Wall -Wextra -Wpedantic -Wconversion -Wshadow -Werror: the launch
// templates, as users instantiate them, and the option structs, as users fill them with
// designated initializers, compile without a warning in a strict user's build.
#include <cudakit/cudakit.hpp>

using namespace cudakit;

void launches(StreamRef s, const Module& m, DeviceBuffer<float>& x, const DeviceBuffer<float>& cx, std::size_t n,
              int k) {
  auto saxpy = m.kernel<void(float, const float*, float*, int)>("saxpy");
  launch(s, saxpy, LaunchConfig{grid_for(n, 256), 256}, 2.0f, cx, x, k);
  launch(s, saxpy, LaunchConfig{grid_for(k, 256), {16, 16}}, 2.0f, x.span(), x.subspan(0, 4), k);
  launch(s, saxpy, {.grid = 8, .block = 128, .cluster = Dim3{2}, .priority = -1}, 2.0f, x, x, k);
  launch(s, m.function("saxpy"), {1, 1}, 2.0f, cx, x, k);
  KernelArgs a;
  a.add(2.0f).add(cx).add(x).add(k);
  launch(s, m.function("saxpy"), {1, 1}, a);
  launch(s, m.kernel<void()>("empty"), {.grid = 1, .block = 1});
}

void options(Device d) {
  Module a = Module::load(d, "k.ptx", {.jit_policy = JitPolicy::refuse});
  Module b = Module::load(d, "k.ptx", {.jit = {.optimization_level = 3}});
  Program p("extern \"C\" __global__ void k() {}");
  CompiledProgram c = p.compile({.arch = "sm_90", .output = ProgramOutput::ptx});
  CompiledProgram e = p.compile(d, {.use_cache = false});
  Library l = Library::load(e);
  (void)l.kernel<void(int)>(d, "k");
  (void)max_active_clusters(a.function("k"), {.grid = 4, .block = 32, .cluster = Dim3{2}});
  (void)Module::load(d, c);
  (void)b;
}
