// The 3x3 stride-1 convolutions of ResNet-50 (and ResNet-18/34: the same shapes), each pass
// through oneDNN's direct kernels and through Winograd F(4x4, 3x3): not a test (timings are
// machine-dependent). Medians of REPS calls after one warm-up, on the threads OpenMP gives.
//
//   conv_bench [BATCH ...]        # default: 8; e.g. conv_bench 4 8 16
//
// Prints a Markdown table: per shape and batch, the output tiles, ms per call of each pass both
// ways, and direct / Winograd.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend/blas_core.h"
#include "kernels/conv2d.h"
#include "kernels/cpu/kernel_table.h"

namespace {

constexpr int kReps = 7;

template <class F>
double median_ms(F f) {
  f();  // warm-up: scratch areas, oneDNN primitives
  std::vector<double> ms;
  for (int i = 0; i < kReps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

std::vector<float> random_floats(long n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  sg::reexec_with_best_blas_core(argv);
  // The CPU convolution then runs every shape through oneDNN; Winograd is called directly.
  setenv("SINGULARITY_CONV", "direct", 1);
  std::vector<int> batches;
  for (int i = 1; i < argc; ++i) batches.push_back(std::atoi(argv[i]));
  if (batches.empty()) batches.push_back(8);
  const auto& k = sg::cpu::kernels();
  std::printf("kernels %s; ms per call, median of %d\n\n", k.isa, kReps);
  std::printf("| batch | HxW | C=K | tiles | direct fwd / data / weights | Winograd fwd / data / "
              "weights | direct / Winograd |\n|---|---|---|---|---|---|---|\n");
  const int layers[][2] = {{56, 64}, {28, 128}, {14, 256}, {7, 512}};
  for (int batch : batches) {
    for (const auto& layer : layers) {
      sg::Conv2dShape s;
      s.N = batch, s.H = s.W = layer[0], s.C = s.K = layer[1], s.R = s.S = 3, s.pad = 1;
      const auto x = random_floats(s.in_size(), 1), w = random_floats(s.weight_size(), 2);
      const auto dy = random_floats(s.out_size(), 3);
      std::vector<float> y(dy.size()), dx(x.size()), dw(w.size());
      const double d[3] = {
          median_ms([&] { sg::cpu::conv2d_forward(y.data(), x.data(), w.data(), s); }),
          median_ms([&] { sg::cpu::conv2d_backward_data(dx.data(), dy.data(), w.data(), s); }),
          median_ms([&] {
            sg::cpu::conv2d_backward_weights(dw.data(), dy.data(), x.data(), s);
          })};
      const double g[3] = {
          median_ms([&] { k.conv2d_winograd_forward(y.data(), x.data(), w.data(), s); }),
          median_ms([&] { k.conv2d_winograd_backward_data(dx.data(), dy.data(), w.data(), s); }),
          median_ms([&] {
            k.conv2d_winograd_backward_weights(dw.data(), dy.data(), x.data(), s);
          })};
      const long tiles = static_cast<long>(batch) * ((s.P() + 3) / 4) * ((s.Q() + 3) / 4);
      std::printf("| %d | %dx%d | %d | %ld%s | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f | "
                  "%.2fx / %.2fx / %.2fx |\n",
                  batch, s.H, s.W, s.C, tiles, sg::cpu::winograd_applies(s) ? "" : " (direct)",
                  d[0], d[1], d[2], g[0], g[1], g[2], d[0] / g[0], d[1] / g[1], d[2] / g[2]);
      std::fflush(stdout);
    }
  }
}
