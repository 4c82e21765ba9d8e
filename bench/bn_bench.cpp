// Batch norm on ResNet-50's 53 shapes at one batch (default 8): ms a step of the fused training
// pair (forward, backward; with the ReLU where ResNet fuses it) against one read pass and one
// read + write pass over the same activations, the bandwidth bound of its 3 + 5 passes, with
// the data in memory as in a training step; and on the batch norms without a ReLU (those a
// residual block's input gradient reaches first), the backward with the block's add + ReLU
// taken into its first pass against add_relu_backward then the backward. Not a test (timings
// are machine-dependent). Medians of 7 sweeps after one warm-up, on the threads OpenMP gives.
//
//   bn_bench [BATCH]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench/batch_arg.h"
#include "kernels/cpu/kernel_table.h"

namespace {

constexpr int kReps = 7;

struct Shape {
  int hw, c;
  bool relu;
};

// ResNet-50 (torchvision's v1.5: the stride on the 3x3 convolution): the stem's batch norm, then
// per bottleneck block two with a ReLU after them and one without, and the downsampling
// shortcut's (without) in each stage's first block.
std::vector<Shape> resnet50_batchnorms() {
  std::vector<Shape> shapes{{112, 64, true}};
  const int blocks[4] = {3, 4, 6, 3}, width[4] = {64, 128, 256, 512}, in_hw[4] = {56, 56, 28, 14};
  for (int s = 0; s < 4; ++s) {
    const int out_hw = s == 0 ? 56 : in_hw[s] / 2;
    for (int b = 0; b < blocks[s]; ++b) {
      shapes.push_back({b == 0 ? in_hw[s] : out_hw, width[s], true});
      shapes.push_back({out_hw, width[s], true});
      shapes.push_back({out_hw, 4 * width[s], false});
      if (b == 0) shapes.push_back({out_hw, 4 * width[s], false});
    }
  }
  return shapes;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && (std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0)) {
    std::printf("usage: bn_bench [BATCH]   (default 8)\n");
    return 0;
  }
  int N = 8;
  if (argc > 2 || (argc > 1 && !sg::bench::parse_batch(argv[1], &N))) {
    std::fprintf(stderr, "bn_bench: the batch must be one positive integer (usage: bn_bench "
                         "[BATCH])\n");
    return 2;
  }
  const sg::cpu::KernelTable& k = sg::cpu::kernels();
  // Every shape's tensors at once (1.4 GB at batch 8), each pass run over all of them in turn as
  // a step does, so each call finds its data in memory, not in cache.
  struct Tensors {
    long M;
    int C;
    bool relu;
    std::vector<float> x, y, dy, dx, gamma, beta, mean, var, dgamma, dbeta;
    std::vector<float> g, out;  // without a ReLU: a pending add + ReLU's other gradient, output
  };
  std::vector<Tensors> ts;
  double bytes = 0;
  for (const Shape& sh : resnet50_batchnorms()) {
    Tensors t;
    t.M = static_cast<long>(N) * sh.hw * sh.hw;
    t.C = sh.c;
    t.relu = sh.relu;
    const size_t n = static_cast<size_t>(t.M) * t.C;
    t.x.resize(n);
    t.dy.resize(n);
    for (size_t i = 0; i < n; ++i) {
      t.x[i] = static_cast<float>((i * 2654435761u) % 1000) * 1e-3f - 0.4f;
      t.dy[i] = static_cast<float>((i * 40503u) % 997) * 1e-3f - 0.5f;
    }
    t.y.assign(n, 0.0f);
    t.dx.assign(n, 0.0f);
    t.gamma.assign(static_cast<size_t>(t.C), 1.0f);
    t.beta.assign(static_cast<size_t>(t.C), 0.1f);
    t.mean.resize(static_cast<size_t>(t.C));
    t.var.resize(static_cast<size_t>(t.C));
    t.dgamma.assign(static_cast<size_t>(t.C), 0.0f);
    t.dbeta.assign(static_cast<size_t>(t.C), 0.0f);
    if (!t.relu) {
      t.g.resize(n);
      t.out.resize(n);
      for (size_t i = 0; i < n; ++i) {
        t.g[i] = static_cast<float>((i * 69069u) % 991) * 1e-3f - 0.5f;
        t.out[i] = static_cast<float>((i * 1103515245u) % 983) * 1e-3f - 0.5f;
      }
    }
    bytes += 4.0 * static_cast<double>(n);
    ts.push_back(std::move(t));
  }
  // ms a step of one pass: the median over kReps sweeps of the sum over the shapes.
  auto sweep = [&](auto pass) {
    std::vector<double> ms;
    for (int rep = 0; rep <= kReps; ++rep) {
      double total = 0;
      for (Tensors& t : ts) {
        const auto t0 = std::chrono::steady_clock::now();
        pass(t);
        total += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                     .count();
      }
      if (rep > 0) ms.push_back(total);  // the first sweep warms up
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  const double fwd = sweep([&](Tensors& t) {
    k.batchnorm_forward_train(t.y.data(), t.mean.data(), t.var.data(), t.x.data(), t.gamma.data(),
                              t.beta.data(), nullptr, t.M, t.C, 1e-5f, t.relu);
  });
  const double bwd = sweep([&](Tensors& t) {
    k.batchnorm_backward(t.dx.data(), t.dgamma.data(), t.dbeta.data(), t.dy.data(), t.x.data(),
                         t.mean.data(), t.var.data(), t.gamma.data(), t.beta.data(), t.M, t.C,
                         1e-5f, t.relu);
  });
  const double read = sweep([&](Tensors& t) {  // column sums: one read pass
    std::vector<double> sums(2 * static_cast<size_t>(t.C));
    k.batchnorm_sums(sums.data(), t.x.data(), t.M, t.C);
  });
  const double copy = sweep([&](Tensors& t) {
    const float* __restrict in = t.x.data();
    float* __restrict out = t.y.data();
    const long n = t.M * t.C;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i) out[i] = in[i];
  });
  // The batch norms without a ReLU: add + ReLU, then the backward; or both in one op.
  const double separate = sweep([&](Tensors& t) {
    if (t.relu) return;
    k.add_relu_backward(t.dy.data(), t.g.data(), t.out.data(), t.M * t.C);
    k.batchnorm_backward(t.dx.data(), t.dgamma.data(), t.dbeta.data(), t.dy.data(), t.x.data(),
                         t.mean.data(), t.var.data(), t.gamma.data(), nullptr, t.M, t.C, 1e-5f,
                         false);
  });
  const double fused = sweep([&](Tensors& t) {
    if (t.relu) return;
    k.batchnorm_add_relu_backward(t.dx.data(), t.dgamma.data(), t.dbeta.data(), t.dy.data(),
                                  t.g.data(), t.out.data(), t.x.data(), t.mean.data(),
                                  t.var.data(), t.gamma.data(), t.M, t.C, 1e-5f);
  });
  std::printf("ResNet-50 at batch %d: %zu batch norms over %.0f MB of activations (%s kernels)\n",
              N, ts.size(), bytes / 1e6, k.isa);
  std::printf("| pass | ms a step | GB/s of the tensors it must move |\n|---|---|---|\n");
  std::printf("| forward (3 passes) | %.1f | %.1f |\n", fwd, 3 * bytes / fwd / 1e6);
  std::printf("| backward (5 passes) | %.1f | %.1f |\n", bwd, 5 * bytes / bwd / 1e6);
  std::printf("| column sums alone (1 pass) | %.1f | %.1f |\n", read, bytes / read / 1e6);
  std::printf("| copy (2 passes) | %.1f | %.1f |\n", copy, 2 * bytes / copy / 1e6);
  std::printf("| batch norms without a ReLU: add_relu_backward, then the backward | %.1f | |\n",
              separate);
  std::printf("| the same in one op (batchnorm_add_relu_backward) | %.1f | |\n", fused);
}
