// The convolutions the CPU backend takes off oneDNN's direct kernels, each pass both ways: not a
// test (timings are machine-dependent). Medians of kReps calls after one warm-up, on the threads
// OpenMP gives.
//  - ResNet-50's 3x3 stride-1 layers (and ResNet-18/34's: the same shapes): oneDNN's direct
//    kernels against Winograd F(4x4, 3x3);
//  - its stride-1 1x1 layers (the bottlenecks' and the first stage's shortcut): oneDNN's jit_1x1
//    against one sgemm per pass;
//  - the spatial layers oneDNN's direct kernels keep (stride 2, 7x7x512): its channel-blocked
//    layout with the reorders against NHWC as it is, the data from memory.
//
//   conv_bench [BATCH ...]        # default: 8; e.g. conv_bench 4 8 16
//
// Prints three Markdown tables: per shape and batch, ms per call of each pass both ways, and
// direct / the other.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend/blas_core.h"
#include "bench/batch_arg.h"
#include "kernels/conv2d.h"
#include "kernels/cpu/kernel_table.h"

namespace {

constexpr int kReps = 7;

// Writing this much between calls leaves a call's data in memory, as inside a step.
void flush_caches() {
  static std::vector<float> junk(64 << 20);
  for (size_t i = 0; i < junk.size(); i += 16) junk[i] += 1.0f;
}

template <class F>
double median_ms(F f, bool cold = false) {
  f();  // warm-up: scratch areas, oneDNN primitives
  std::vector<double> ms;
  for (int i = 0; i < kReps; ++i) {
    if (cold) flush_caches();
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

// ms per call of the forward, the input gradient and the weight gradient.
struct Passes {
  double fwd, data, weights;
};

Passes time_passes(const sg::Conv2dShape& s, const sg::cpu::ConvAlgorithms& chosen,
                   bool cold = false) {
  sg::cpu::set_conv_algorithms(chosen);
  const auto x = random_floats(s.in_size(), 1), w = random_floats(s.weight_size(), 2);
  const auto dy = random_floats(s.out_size(), 3);
  std::vector<float> y(dy.size()), dx(x.size()), dw(w.size());
  return {median_ms([&] { sg::cpu::conv2d_forward(y.data(), x.data(), w.data(), s); }, cold),
          median_ms([&] { sg::cpu::conv2d_backward_data(dx.data(), dy.data(), w.data(), s); },
                    cold),
          median_ms([&] { sg::cpu::conv2d_backward_weights(dw.data(), dy.data(), x.data(), s); },
                    cold)};
}

// One table row; with end_line false the row stays open for another column.
void print_row(const std::string& head, const Passes& d, const Passes& g, bool end_line = true) {
  std::printf("| %s | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f | %.2fx / %.2fx / %.2fx |%s",
              head.c_str(), d.fwd, d.data, d.weights, g.fwd, g.data, g.weights, d.fwd / g.fwd,
              d.data / g.data, d.weights / g.weights, end_line ? "\n" : "");
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  sg::reexec_with_best_blas_core(argv);
  std::vector<int> batches;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::printf("usage: conv_bench [BATCH ...]   (default 8; e.g. conv_bench 4 8 16)\n");
      return 0;
    }
    int batch = 0;
    if (!sg::bench::parse_batch(argv[i], &batch)) {
      std::fprintf(stderr, "conv_bench: a batch must be a positive integer, not '%s' (usage: "
                           "conv_bench [BATCH ...])\n", argv[i]);
      return 2;
    }
    batches.push_back(batch);
  }
  if (batches.empty()) batches.push_back(8);
  const sg::cpu::ConvAlgorithms direct{false, false}, gemm{false, true};
  std::printf("kernels %s; ms per call, median of %d\n\n", sg::cpu::kernels().isa, kReps);
  std::printf("| batch | HxW | C=K | tiles | direct fwd / data / weights | Winograd fwd / data / "
              "weights | direct / Winograd |\n|---|---|---|---|---|---|---|\n");
  const int layers[][2] = {{56, 64}, {28, 128}, {14, 256}, {7, 512}};
  for (int batch : batches) {
    for (const auto& layer : layers) {
      sg::Conv2dShape s;
      s.N = batch, s.H = s.W = layer[0], s.C = s.K = layer[1], s.R = s.S = 3, s.pad = 1;
      // Winograd's kernels called whatever winograd_applies says, to show where it pays.
      const Passes d = time_passes(s, direct);
      const auto& k = sg::cpu::kernels();
      const auto x = random_floats(s.in_size(), 1), w = random_floats(s.weight_size(), 2);
      const auto dy = random_floats(s.out_size(), 3);
      std::vector<float> y(dy.size()), dx(x.size()), dw(w.size());
      const Passes g{
          median_ms([&] { k.conv2d_winograd_forward(y.data(), x.data(), w.data(), s); }),
          median_ms([&] { k.conv2d_winograd_backward_data(dx.data(), dy.data(), w.data(), s); }),
          median_ms([&] {
            k.conv2d_winograd_backward_weights(dw.data(), dy.data(), x.data(), s);
          })};
      const long tiles = static_cast<long>(batch) * ((s.P() + 3) / 4) * ((s.Q() + 3) / 4);
      print_row(std::to_string(batch) + " | " + std::to_string(s.H) + "x" + std::to_string(s.W) +
                    " | " + std::to_string(s.C) + " | " + std::to_string(tiles) +
                    (sg::cpu::winograd_applies(s)           ? ""
                     : sg::cpu::winograd_weights_applies(s) ? " (weights only)"
                                                            : " (none)"),
                d, g);
    }
  }
  std::printf("\n| batch | HxW | C -> K | direct fwd / data / weights | product fwd / data / "
              "weights | direct / product |\n|---|---|---|---|---|---|\n");
  const int pointwise[][3] = {{56, 64, 64},    {56, 64, 256},   {56, 256, 64},  {28, 128, 512},
                              {28, 512, 128},  {14, 256, 1024}, {14, 1024, 256}, {7, 512, 2048},
                              {7, 2048, 512}};
  for (int batch : batches) {
    for (const auto& layer : pointwise) {
      sg::Conv2dShape s;
      s.N = batch, s.H = s.W = layer[0], s.C = layer[1], s.K = layer[2];
      print_row(std::to_string(batch) + " | " + std::to_string(s.H) + "x" + std::to_string(s.W) +
                    " | " + std::to_string(s.C) + " -> " + std::to_string(s.K),
                time_passes(s, direct), time_passes(s, gemm));
    }
  }
  // The spatial layers left to oneDNN (ResNet-50's and ResNet-18's 3x3 stride-2 layers, the
  // 7x7x512 ones below Winograd's tiles), each call's data from memory.
  using sg::cpu::SpatialLayout;
  const sg::cpu::ConvAlgorithms blocked{false, false, SpatialLayout::blocked},
      nhwc{false, false, SpatialLayout::nhwc}, nhwc_product{false, true, SpatialLayout::nhwc};
  std::printf("\n| batch | HxW | C -> K | stride | blocked fwd / data / weights | NHWC fwd / data / "
              "weights | blocked / NHWC | weights as a product (blocked, NHWC / product) "
              "|\n|---|---|---|---|---|---|---|---|\n");
  const int spatial[][4] = {{56, 128, 128, 2}, {28, 256, 256, 2}, {14, 512, 512, 2},
                            {7, 512, 512, 1},  {56, 64, 128, 2},  {28, 128, 256, 2},
                            {14, 256, 512, 2}};
  for (int batch : batches) {
    for (const auto& layer : spatial) {
      sg::Conv2dShape s;
      s.N = batch, s.H = s.W = layer[0], s.C = layer[1], s.K = layer[2], s.R = s.S = 3, s.pad = 1;
      s.stride = layer[3];
      const Passes b = time_passes(s, blocked, true), n = time_passes(s, nhwc, true);
      print_row(std::to_string(batch) + " | " + std::to_string(s.H) + "x" + std::to_string(s.W) +
                    " | " + std::to_string(s.C) + " -> " + std::to_string(s.K) + " | " +
                    std::to_string(s.stride),
                b, n, false);
      if (sg::cpu::conv2d_im2col_weights_applies(s)) {
        const double p = time_passes(s, nhwc_product, true).weights;
        std::printf(" %.2f (%.2fx, %.2fx) |\n", p, b.weights / p, n.weights / p);
      } else {
        std::printf(" (direct) |\n");
      }
      std::fflush(stdout);
    }
  }
}
