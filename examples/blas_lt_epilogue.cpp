// A transformer's MLP block through cuBLASLt with fused epilogues, in bf16 with fp32
// accumulation: h = GELU(x·W1 + b1), then y = h·W2 + b2. Run once on a stream, then
// captured into a graph and replayed; both checked against the host on random data.
#include <cuda_bf16.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cudakit/blas_lt.hpp"
#include "example_main.hpp"

namespace {

using bf16 = __nv_bfloat16;

double value(bf16 v) { return __bfloat162float(v); }
double gelu(double v) { return 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); }

std::vector<bf16> random_values(std::size_t n, float scale, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<bf16> v(n);
  for (auto& x : v) x = bf16(dist(rng));
  return v;
}

// out[rows×cols] = act(in·w + bias) on the host, from the bf16 values the GPU saw; the
// second vector is each element's magnitude (the sum of |terms|) for the tolerance.
std::pair<std::vector<double>, std::vector<double>> host_layer(const std::vector<bf16>& in, const std::vector<bf16>& w,
                                                               const std::vector<bf16>& bias, int rows, int inner,
                                                               int cols, bool with_gelu) {
  std::vector<double> out(std::size_t(rows) * cols), magnitude(out.size());
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      double sum = value(bias[j]), mag = std::fabs(value(bias[j]));
      for (int p = 0; p < inner; ++p) {
        double term = value(in[std::size_t(i) * inner + p]) * value(w[std::size_t(p) * cols + j]);
        sum += term;
        mag += std::fabs(term);
      }
      out[std::size_t(i) * cols + j] = with_gelu ? gelu(sum) : sum;
      magnitude[std::size_t(i) * cols + j] = mag;
    }
  return {out, magnitude};
}

int count_wrong(const char* what, const std::vector<bf16>& got, const std::vector<double>& want,
                const std::vector<double>& magnitude) {
  int wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(value(got[i]) - want[i]) <= 1.5e-2 * magnitude[i] + 1e-3) && wrong++ < 5)
      std::printf("blas_lt_epilogue: %s element %zu is %.6g, the host says %.6g\n", what, i, value(got[i]), want[i]);
  return wrong;
}

int run() {
  cudakit::Gpu gpu{0};
  if (!cudakit::blas_available()) {
    std::printf("blas_lt_epilogue: no cuBLAS: neither libcublasLt.so.13 nor .12 was found (set CUDAKIT_LIBCUBLASLT)\n");
    return 2;
  }
  const int batch = 33, model = 512, hidden = 2048;
  std::mt19937 rng(std::random_device{}());
  auto hx = random_values(std::size_t(batch) * model, 1.0f, rng);
  auto hw1 = random_values(std::size_t(model) * hidden, 0.05f, rng), hb1 = random_values(hidden, 0.5f, rng);
  auto hw2 = random_values(std::size_t(hidden) * model, 0.05f, rng), hb2 = random_values(model, 0.5f, rng);
  auto x = gpu.upload(hx);
  auto w1 = gpu.upload(hw1), b1 = gpu.upload(hb1), w2 = gpu.upload(hw2), b2 = gpu.upload(hb2);
  auto h = gpu.alloc<bf16>(std::size_t(batch) * hidden, cudakit::uninitialized);
  auto y = gpu.alloc<bf16>(std::size_t(batch) * model, cudakit::uninitialized);

  cudakit::BlasLt lt(gpu.stream());  // a cuBLASLt handle with its workspace and algorithm cache
  auto mlp = [&] {
    lt.matmul(x, w1, b1, h, {.m = batch, .n = hidden, .k = model}, cudakit::Epilogue::gelu_bias);
    lt.matmul(h, w2, b2, y, {.m = batch, .n = model, .k = hidden}, cudakit::Epilogue::bias);
  };
  mlp();  // on the stream: each shape's algorithm is chosen here, once
  std::vector<bf16> got_h = gpu.download(h), got_y = gpu.download(y);

  cudakit::GraphExec replay = gpu.capture_nonempty(mlp).instantiate();  // the same two matmuls, captured
  gpu.fill(y, bf16(-777.0f));
  gpu.launch(replay);
  std::vector<bf16> replayed_y = gpu.download(y);

  auto [want_h, magnitude_h] = host_layer(hx, hw1, hb1, batch, model, hidden, true);
  auto [want_y, magnitude_y] = host_layer(got_h, hw2, hb2, batch, hidden, model, false);  // from the GPU's h
  int wrong = count_wrong("h", got_h, want_h, magnitude_h) + count_wrong("y", got_y, want_y, magnitude_y) +
              count_wrong("replayed y", replayed_y, want_y, magnitude_y);
  if (wrong != 0) {
    std::printf("blas_lt_epilogue: FAILED: %d elements wrong\n", wrong);
    return 1;
  }
  std::printf("ok: cuBLASLt MLP y = GELU(x·W1 + b1)·W2 + b2 in bf16 (%dx%d -> %d -> %d), on a stream and replayed "
              "from a graph, matches the host (%zu shapes planned)\n",
              batch, model, hidden, model, lt.cached_shapes());
  return 0;
}

}  // namespace

int main() { return example::run("blas_lt_epilogue", run); }
