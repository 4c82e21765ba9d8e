// Times every CPU kernel at the GPT-2 benchmark shape (B=4, T=256, C=384, NH=6, padded vocab
// 50304), forward and backward, and the machine's best SGEMM as its fp32 peak.
//   kernels_bench [--threads N] [--reps R]
// Reports GFLOP/s for matmul / attention and GB/s (bytes each op must move) for the rest, then
// an estimate of one 6-layer training step built from the per-op times.
#include "backend/blas_core.h"
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/adamw.h"
#include "kernels/attention.h"
#include "kernels/crossentropy.h"
#include "kernels/encoder.h"
#include "kernels/gelu.h"
#include "kernels/grad_norm.h"
#include "kernels/layernorm.h"
#include "kernels/matmul.h"
#include "kernels/residual.h"
#include "kernels/cpu/kernel_table.h"

namespace {

int reps = 5;

// Best (minimum) wall time of reps runs after one warm-up, in seconds.
double time_best(const std::function<void()>& op) {
  op();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    op();
    const auto stop = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double>(stop - start).count());
  }
  return best;
}

std::vector<float> filled(std::size_t n, float scale = 1.0f) {
  std::vector<float> x(n);
  std::uint32_t state = 12345;
  for (float& xi : x) {
    state = state * 1664525u + 1013904223u;
    xi = scale * (static_cast<float>(state >> 8) / 16777216.0f - 0.5f);
  }
  return x;
}

void report_flops(const char* name, double seconds, double flops) {
  std::printf("%-28s %9.3f ms %9.1f GFLOP/s\n", name, seconds * 1e3, flops / seconds * 1e-9);
}

void report_bytes(const char* name, double seconds, double bytes) {
  std::printf("%-28s %9.3f ms %9.1f GB/s\n", name, seconds * 1e3, bytes / seconds * 1e-9);
}

}  // namespace

int main(int argc, char** argv) {
  sg::reexec_with_best_blas_core(argv);  // the binary's BLAS kernels and OpenMP waiting
  int threads = 2;
  int blas_threads = -1;  // default: as many as OpenMP threads
  std::string only;       // run only the ops whose name contains this
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--blas-threads") == 0) blas_threads = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--reps") == 0) reps = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--only") == 0) only = argv[i + 1];
  }
  if (blas_threads < 0) blas_threads = threads;
  omp_set_num_threads(threads);
  openblas_set_num_threads(blas_threads);
  std::printf("threads %d, BLAS threads %d (OpenBLAS: %s), kernels %s (SINGULARITY_CPU_KERNELS)\n",
              threads, blas_threads, openblas_get_config(), sg::cpu::kernels().isa);

  const auto want = [&](const char* name) {
    return only.empty() || std::string(name).find(only) != std::string::npos;
  };

  // Peak: the best of several large square SGEMMs.
  if (want("peak sgemm")) {
    const int n = 2048;
    auto a = filled(std::size_t(n) * n), b = filled(std::size_t(n) * n), c = filled(std::size_t(n) * n);
    const double t = time_best([&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(),
                  n, 0.0f, c.data(), n);
    });
    report_flops("peak sgemm 2048^3", t, 2.0 * n * n * n);
  }

  constexpr int B = 4, T = 256, C = 384, NH = 6, V = 50257, Vp = 50304, L = 6;
  constexpr int N = B * T;
  constexpr double kF = 4.0;  // bytes per float

  // Per-op times, accumulated into a whole-step estimate (forward + backward + update).
  double step_seconds = 0.0;
  double step_flops = 0.0;

  auto matmul_case = [&](const char* name, int in, int out, bool bias, int per_step) {
    if (!want(name)) return;
    auto inp = filled(std::size_t(N) * in), w = filled(std::size_t(out) * in, 0.1f);
    auto b = filled(out), y = filled(std::size_t(N) * out), dy = filled(std::size_t(N) * out);
    auto dinp = filled(std::size_t(N) * in), dw = filled(std::size_t(out) * in), db = filled(out);
    const double flops = 2.0 * N * in * out;
    const double tf = time_best([&] {
      sg::cpu::kernels().matmul_forward(y.data(), inp.data(), w.data(), bias ? b.data() : nullptr, N, in, out);
    });
    const double tb = time_best([&] {
      sg::cpu::kernels().matmul_backward(dinp.data(), dw.data(), bias ? db.data() : nullptr, dy.data(),
                               inp.data(), w.data(), N, in, out);
    });
    report_flops((std::string(name) + " fwd").c_str(), tf, flops);
    report_flops((std::string(name) + " bwd").c_str(), tb, 2 * flops);
    step_seconds += per_step * (tf + tb);
    step_flops += per_step * 3 * flops;
  };
  matmul_case("matmul qkv 384->1152", C, 3 * C, true, L);
  matmul_case("matmul attproj 384->384", C, C, true, L);
  matmul_case("matmul fc 384->1536", C, 4 * C, true, L);
  matmul_case("matmul proj 1536->384", 4 * C, C, true, L);
  matmul_case("matmul lm head 384->50304", C, Vp, false, 1);

  if (want("attention")) {
    auto qkv = filled(std::size_t(N) * 3 * C), out = filled(std::size_t(N) * C);
    auto att = filled(std::size_t(B) * NH * T);  // the log-sum-exp the backward reads
    auto dout = filled(out.size()), dqkv = filled(qkv.size());
    const double hs = C / NH;
    const double flops = 4.0 * B * NH * T * T * hs;  // dense-equivalent, as MFU counts it
    const double tf = time_best([&] {
      sg::cpu::kernels().attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    });
    const double tb = time_best([&] {
      sg::cpu::kernels().attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), B, T,
                                            C, NH);
    });
    report_flops("attention fwd", tf, flops);
    report_flops("attention bwd", tb, 2 * flops);
    step_seconds += L * (tf + tb);
    step_flops += L * 3 * flops;
  }
  if (want("layernorm")) {
    auto inp = filled(std::size_t(N) * C), out = filled(inp.size()), w = filled(C), b = filled(C);
    std::vector<float> mean(N), rstd(N);
    auto dout = filled(inp.size()), dinp = filled(inp.size()), dw = filled(C), db = filled(C);
    const double tf = time_best([&] {
      sg::cpu::kernels().layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(),
                                 b.data(), N, C);
    });
    const double tb = time_best([&] {
      sg::cpu::kernels().layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(),
                                  w.data(), mean.data(), rstd.data(), N, C);
    });
    report_bytes("layernorm fwd", tf, 2.0 * N * C * kF);
    report_bytes("layernorm bwd", tb, 4.0 * N * C * kF);
    step_seconds += (2 * L + 1) * (tf + tb);
  }
  if (want("gelu")) {
    const long n = long(N) * 4 * C;
    auto inp = filled(n, 6.0f), out = filled(n), dout = filled(n), dinp = filled(n);
    const double tf = time_best([&] { sg::cpu::kernels().gelu_forward(out.data(), inp.data(), n); });
    const double tb = time_best([&] {
      sg::cpu::kernels().gelu_backward(dinp.data(), inp.data(), dout.data(), n);
    });
    report_bytes("gelu fwd", tf, 2.0 * n * kF);
    report_bytes("gelu bwd", tb, 4.0 * n * kF);
    step_seconds += L * (tf + tb);
  }
  if (want("residual")) {
    const long n = long(N) * C;
    auto a = filled(n), b = filled(n), out = filled(n);
    const double tf = time_best([&] { sg::cpu::kernels().residual_forward(out.data(), a.data(), b.data(), n); });
    const double tb = time_best([&] { sg::cpu::kernels().residual_backward(a.data(), b.data(), out.data(), n); });
    report_bytes("residual fwd", tf, 3.0 * n * kF);
    report_bytes("residual bwd", tb, 5.0 * n * kF);
    step_seconds += 2 * L * (tf + tb);
    // The MLP's residual and norm in one pass (the model's, once a layer), against the two ops.
    auto w = filled(C), bias = filled(C), ln = filled(n);
    std::vector<float> mean(N), rstd(N);
    const double t2 = time_best([&] {
      sg::cpu::kernels().residual_forward(out.data(), a.data(), b.data(), n);
      sg::cpu::kernels().layernorm_forward(ln.data(), mean.data(), rstd.data(), out.data(),
                                           w.data(), bias.data(), N, C);
    });
    const double t1 = time_best([&] {
      sg::cpu::kernels().residual_layernorm_forward(out.data(), ln.data(), mean.data(),
                                                    rstd.data(), a.data(), b.data(), w.data(),
                                                    bias.data(), N, C);
    });
    report_bytes("residual, then layernorm fwd", t2, 5.0 * n * kF);
    report_bytes("residual+layernorm fwd", t1, 4.0 * n * kF);
  }
  if (want("encoder")) {
    auto wte = filled(std::size_t(Vp) * C), wpe = filled(std::size_t(1024) * C);
    auto out = filled(std::size_t(N) * C), dwte = filled(wte.size()), dwpe = filled(wpe.size());
    std::vector<std::int32_t> tokens(N);
    for (int i = 0; i < N; ++i) tokens[i] = (i * 7919) % V;
    const double tf = time_best([&] {
      sg::cpu::kernels().encoder_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
    });
    const double tb = time_best([&] {
      sg::cpu::kernels().encoder_backward(dwte.data(), dwpe.data(), out.data(), tokens.data(), B, T, C);
    });
    report_bytes("encoder fwd", tf, 3.0 * N * C * kF);
    report_bytes("encoder bwd", tb, 5.0 * N * C * kF);
    step_seconds += tf + tb;
  }
  if (want("crossentropy")) {
    auto logits = filled(std::size_t(N) * Vp, 8.0f), probs = filled(logits.size());
    std::vector<float> losses(N);
    std::vector<std::int32_t> targets(N);
    for (int i = 0; i < N; ++i) targets[i] = (i * 104729) % V;
    const double tf = time_best([&] {
      sg::cpu::kernels().crossentropy_forward(losses.data(), probs.data(), logits.data(), targets.data(), N,
                                    V, Vp);
    });
    const double tb = time_best([&] {
      sg::cpu::kernels().crossentropy_backward(logits.data(), probs.data(), targets.data(), 1.0f / N, N, V,
                                     Vp);
    });
    report_bytes("crossentropy fwd", tf, 2.0 * N * Vp * kF);
    report_bytes("crossentropy bwd", tb, 2.0 * N * Vp * kF);
    step_seconds += tf + tb;
  }
  if (want("adamw")) {
    // GPT-2 with 6 layers, width 384, context 1024, padded vocab: the flat parameter count.
    const long n = long(Vp) * C + 1024L * C + L * (12L * C * C + 13L * C) + 2L * C;
    auto p = filled(n), m = filled(n), v = filled(n, 0.0f), g = filled(n);
    for (float& vi : v) vi = 1e-4f;
    const double ta = time_best([&] {
      sg::cpu::kernels().adamw_update(p.data(), m.data(), v.data(), g.data(), n, 1e-4f, 0.9f, 0.95f, 1e-8f,
                            0.1f, 10, 1.0f);
    });
    const double tn = time_best([&] { (void)sg::cpu::kernels().sum_of_squares(g.data(), n); });
    std::printf("(parameters: %ld)\n", n);
    report_bytes("adamw", ta, 7.0 * n * kF);
    report_bytes("sum_of_squares", tn, 1.0 * n * kF);
    step_seconds += ta + tn;
  }
  std::printf("step estimate (sum of ops)   %9.3f ms %9.1f GFLOP/s (matmul+attention FLOPs)\n",
              step_seconds * 1e3, step_flops / step_seconds * 1e-9);
  return 0;
}
