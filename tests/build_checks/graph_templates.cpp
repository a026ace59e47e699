// Compiled with -Wall -Wextra -Wpedantic -Wconversion -Wshadow -Werror: the graph and
// capture templates, as users instantiate them, compile without a warning in a strict
// user's build.
#include <cudakit/cudakit.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

using namespace cudakit;

void graphs(StreamRef s, const Module& m, DeviceBuffer<float>& x, const DeviceBuffer<float>& cx,
            DeviceBuffer<std::uint16_t>& h, std::vector<float>& host, int k) {
  auto saxpy = m.kernel<void(float, const float*, float*, int)>("saxpy");
  Graph g(Device::get(0));
  GraphNode fill = g.add_fill(x.span(), 1.0f);
  GraphNode half = g.add_fill(h.span(), std::uint16_t{7});
  GraphNode run = g.add_kernel({fill, half}, saxpy, LaunchConfig{grid_for(k, 256), 256}, 2.0f, cx, x, k);
  GraphNode up = g.add_copy(x.span(), std::span<const float>(host), run);
  GraphNode down = g.add_copy(std::span<float>(host), cx.span(), up);
  GraphNode dup = g.add_copy(x.span(), cx.span(), down);
  g.add_host([k] { (void)k; }, dup);
  g.add_kernel(m.function("saxpy"), {1, 1}, KernelArgs().add(2.0f).add(cx).add(x).add(k));
  ConditionalHandle c = g.make_condition(1);
  ConditionalNode loop = g.add_while(c, dup);
  loop.body.add_kernel(saxpy, {1, 32}, 1.0f, x.span(), x, k);
  GraphExec exec = g.instantiate({.upload_on = s, .use_node_priority = true});
  exec.update_kernel_arguments(GraphNode{}, saxpy, 3.0f, cx, x, k);
  exec.launch(s);
  std::optional<Graph> none = capture(s, [&] { launch(s, saxpy, {1, 1}, 2.0f, cx, x, k); });
  Graph some = capture_nonempty(s, [&](StreamRef on) { launch(on, saxpy, {1, 1}, 2.0f, cx, x, k); },
                                CaptureMode::relaxed);
  exec.update(some);
}

void graph_cache(StreamRef s, const Module& m, DeviceBuffer<float>& x, const DeviceBuffer<float>& cx, int k) {
  auto saxpy = m.kernel<void(float, const float*, float*, int)>("saxpy");
  auto positions = m.kernel<void(const int*, float*, int)>("positions");
  DeviceValue<int> position(s, 0);
  DeviceValue<double> scale(s, 0.5);
  GraphCache<int> by_batch({.capacity = 4});
  GraphCache<std::pair<int, int>> by_shape;
  for (int step = 0; step < k; ++step) {
    position.set(s, step);
    by_batch.run(s, 8, [&](StreamRef on) {
      launch(on, saxpy, {1, 32}, 2.0f, cx, x, k);
      launch(on, positions, {1, 32}, position.span(), x, k);
    });
  }
  by_batch.update_and_run(s, 8, [&] { launch(s, saxpy, {1, 32}, 2.0f, cx, x, k); });
  by_shape.run(s, {8, k}, [&](StreamRef on) { launch(on, saxpy, {1, 32}, 2.0f, cx, x, k); });
  GraphCacheStatistics st = by_batch.statistics();
  (void)st.runs();
  (void)by_batch.not_capturable_reason(8);
  if (GraphExec* exec = by_batch.executable(8)) exec->launch(s);
  (void)by_batch.graph(8).kernel_nodes();
  (void)scale.read(s);
}
