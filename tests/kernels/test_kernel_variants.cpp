// The instruction-set variants of the hand-written kernels (kernels/cpu/kernel_table.h) against
// the baseline copy: the same inputs through each table this CPU runs give the same outputs up
// to rounding (the wider variants contract a*b+c into FMAs and sum in a different order).
// The kernels' own tests check the baseline copies against float64 references.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu/kernel_table.h"

namespace sg {
namespace {

using test::random_floats;
using test::random_ints;

// Largest |a - b| / (|b| + 1e-3) over the elements, for a readable failure.
double max_relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(double(a[i]) - b[i]) / (std::abs(double(b[i])) + 1e-3));
  }
  return worst;
}

std::vector<const cpu::KernelTable*> wider_variants() {
  std::vector<const cpu::KernelTable*> out;
  const auto variants = cpu::kernel_variants();
  for (size_t i = 1; i < variants.size(); ++i) {
    if (const cpu::KernelTable* t = cpu::kernel_table_for(variants[i].isa)) out.push_back(t);
  }
  return out;
}

// Runs `run` (which fills its outputs from fixed inputs) through the baseline and each wider
// variant and compares every output.
template <class Run>
void expect_variants_agree(const char* what, Run run, double tolerance = 2e-4) {
  const cpu::KernelTable* base = cpu::kernel_table_for("baseline");
  REQUIRE(base != nullptr);
  const std::vector<std::vector<float>> expected = run(*base);
  for (const cpu::KernelTable* variant : wider_variants()) {
    const std::vector<std::vector<float>> got = run(*variant);
    REQUIRE(got.size() == expected.size());
    for (size_t k = 0; k < got.size(); ++k) {
      INFO(std::string(what) << ", output " << k << ", variant " << std::string(variant->isa));
      CHECK(max_relative_difference(got[k], expected[k]) < tolerance);
    }
  }
}

constexpr int B = 2, T = 17, C = 48, NH = 4, V = 101, Vp = 128;

TEST_CASE("kernel variants: the build's variants, and the widest this CPU runs is chosen") {
  const auto variants = cpu::kernel_variants();
  REQUIRE(!variants.empty());
  CHECK(variants.front().cpu_supports);  // the baseline runs wherever the binary does
  if (std::getenv("SINGULARITY_CPU_KERNELS") == nullptr) {
    std::string widest;
    for (const auto& v : variants) {
      if (v.cpu_supports) widest = v.isa;
    }
    CHECK(cpu::kernels().isa == widest);
  }
  CHECK(cpu::kernel_table_for("no-such-isa") == nullptr);
  if (variants.size() == 1) MESSAGE("this build holds only the " << variants[0].isa << " kernels");
  for (const cpu::KernelTable* t : wider_variants())
    MESSAGE("comparing " << std::string(t->isa) << " with baseline");
}

TEST_CASE("kernel variants: layernorm, GELU, residual, bias") {
  const int N = B * T;
  const auto x = random_floats(size_t(N) * C, 1), w = random_floats(C, 2), b = random_floats(C, 3);
  const auto dy = random_floats(size_t(N) * C, 4);
  expect_variants_agree("layernorm + gelu + residual (+ layernorm)", [&](const cpu::KernelTable& k) {
    std::vector<float> out(size_t(N) * C), mean(N), rstd(N), dx(size_t(N) * C, 0.f), dw(C, 0.f),
        db(C, 0.f), g(size_t(N) * C), dg(size_t(N) * C, 0.f), r(size_t(N) * C);
    k.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    k.layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(),
                         mean.data(), rstd.data(), N, C);
    k.gelu_forward(g.data(), x.data(), long(N) * C);
    k.gelu_backward(dg.data(), x.data(), dy.data(), long(N) * C);
    k.residual_forward(r.data(), x.data(), dy.data(), long(N) * C);
    k.add_bias(r.data(), b.data(), N, C);
    std::vector<float> r2(size_t(N) * C), out2(size_t(N) * C), mean2(N), rstd2(N);
    k.residual_layernorm_forward(r2.data(), out2.data(), mean2.data(), rstd2.data(), x.data(),
                                 dy.data(), w.data(), b.data(), N, C);
    return std::vector<std::vector<float>>{out, mean, rstd, dx, dw, db, g, dg, r, r2, out2, mean2,
                                           rstd2};
  });
}

TEST_CASE("kernel variants: attention forward and backward") {
  const auto qkv = random_floats(size_t(B) * T * 3 * C, 5),
             dout = random_floats(size_t(B) * T * C, 6);
  expect_variants_agree("attention", [&](const cpu::KernelTable& k) {
    std::vector<float> out(size_t(B) * T * C), att(size_t(B) * NH * T),
        dqkv(size_t(B) * T * 3 * C, 0.f);
    k.attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    k.attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH);
    return std::vector<std::vector<float>>{out, att, dqkv};
  });
}

TEST_CASE("kernel variants: embeddings, matmul, cross-entropy, AdamW") {
  const int N = B * T;
  const auto tokens = random_ints(size_t(N), 7, 0, V - 1);
  const auto targets = random_ints(size_t(N), 8, 0, V - 1);
  const auto wte = random_floats(size_t(Vp) * C, 9), wpe = random_floats(size_t(T) * C, 10);
  const auto x = random_floats(size_t(N) * C, 11), weight = random_floats(size_t(Vp) * C, 12);
  const auto bias = random_floats(Vp, 13), grads = random_floats(size_t(Vp) * C, 14);
  expect_variants_agree("encoder + matmul + crossentropy + adamw", [&](const cpu::KernelTable& k) {
    std::vector<float> emb(size_t(N) * C), dwte(size_t(Vp) * C, 0.f), dwpe(size_t(T) * C, 0.f);
    k.encoder_forward(emb.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
    k.encoder_backward(dwte.data(), dwpe.data(), x.data(), tokens.data(), B, T, C);
    std::vector<float> logits(size_t(N) * Vp), dx(size_t(N) * C, 0.f), dw(size_t(Vp) * C, 0.f),
        dbias(Vp, 0.f), losses(N), dlogits(size_t(N) * Vp);
    k.matmul_forward(logits.data(), x.data(), weight.data(), bias.data(), N, C, Vp);
    k.crossentropy_forward_backward(losses.data(), dlogits.data(), logits.data(), targets.data(),
                                    1.0f / N, N, V, Vp);
    k.matmul_backward(dx.data(), dw.data(), dbias.data(), dlogits.data(), x.data(), weight.data(),
                      N, C, Vp);
    std::vector<float> params = weight, m(params.size(), 0.f), v(params.size(), 0.f);
    for (int step = 1; step <= 3; ++step) {
      k.adamw_update(params.data(), m.data(), v.data(), grads.data(), long(params.size()), 1e-3f,
                     0.9f, 0.95f, 1e-8f, 0.1f, step, step == 2 ? 0.5f : 1.0f);
    }
    const std::vector<float> norm{
        static_cast<float>(k.sum_of_squares(grads.data(), long(grads.size())))};
    return std::vector<std::vector<float>>{emb, dwte,  dwpe,   logits, losses, dlogits, dx,
                                           dw,  dbias, params, m,      v,      norm};
  });
}

TEST_CASE("kernel variants: batch norm with and without the ReLU fused in") {
  // Two bands, the last ragged, with a group of 32 channels, a vector of 8 and 5 in scalars; and
  // 4 MiB, written with streaming stores.
  for (const auto& [M, Cb] : {std::pair<long, int>{300, 45}, {16384, 64}}) {
    const size_t n = size_t(M) * Cb;
    const auto x = random_floats(n, 15), dy = random_floats(n, 16);
    const auto gamma = random_floats(Cb, 17), beta = random_floats(Cb, 18);
    const auto g = random_floats(n, 19);  // the other gradient of a pending add + ReLU
    expect_variants_agree("batch norm (+ ReLU)", [&](const cpu::KernelTable& k) {
      std::vector<std::vector<float>> outs;
      for (const bool relu : {false, true}) {
        std::vector<float> y(n), mean(Cb), var(Cb), dx(n), dg(Cb, 0.f), db(Cb, 0.f);
        k.batchnorm_forward_train(y.data(), mean.data(), var.data(), x.data(), gamma.data(),
                                  beta.data(), nullptr, M, Cb, 1e-5f, relu);
        k.batchnorm_backward(dx.data(), dg.data(), db.data(), dy.data(), x.data(), mean.data(),
                             var.data(), gamma.data(), beta.data(), M, Cb, 1e-5f, relu);
        // Within each variant the fused ReLU's backward masks exactly where its forward zeroed.
        if (relu) {
          std::vector<float> masked(n), dx2(n), dg2(Cb, 0.f), db2(Cb, 0.f);
          for (size_t i = 0; i < n; ++i) masked[i] = y[i] > 0.0f ? dy[i] : 0.0f;
          k.batchnorm_backward(dx2.data(), dg2.data(), db2.data(), masked.data(), x.data(),
                               mean.data(), var.data(), gamma.data(), nullptr, M, Cb, 1e-5f, false);
          INFO("variant " << std::string(k.isa));
          CHECK(dx2 == dx);
          CHECK(dg2 == dg);
        }
        for (auto* v : {&y, &mean, &var, &dx, &dg, &db}) outs.push_back(*v);
      }
      // The backward with a residual block's add + ReLU taken into its first pass.
      std::vector<float> y(n), mean(Cb), var(Cb), dx(n), dg(Cb, 0.f), db(Cb, 0.f), sum = dy;
      k.batchnorm_forward_train(y.data(), mean.data(), var.data(), x.data(), gamma.data(),
                                beta.data(), nullptr, M, Cb, 1e-5f, false);
      k.batchnorm_add_relu_backward(dx.data(), dg.data(), db.data(), sum.data(), g.data(),
                                    y.data(), x.data(), mean.data(), var.data(), gamma.data(), M,
                                    Cb, 1e-5f);
      for (auto* v : {&sum, &dx, &dg, &db}) outs.push_back(*v);
      return outs;
    });
  }
}

// n floats whose first is `offset` bytes past a 64-byte boundary (the model's arena gives 64,
// glibc's large blocks 16): the writing passes' streaming stores take both.
struct Placed {
  std::vector<float> storage;
  float* p;
  Placed(size_t n, size_t offset) : storage(n + 32) {
    const auto at = reinterpret_cast<uintptr_t>(storage.data());
    p = reinterpret_cast<float*>((at + 63) / 64 * 64 + offset);
  }
  std::vector<float> values(size_t n) const { return std::vector<float>(p, p + n); }
};

TEST_CASE("kernel variants: batch norm's 16-channel vectors give the 8-channel copy's bits") {
  // The AVX-512 copy runs 16 channels a vector where they fit, the AVX2 copy 8; both contract
  // the same multiply-adds, so every output must be bitwise equal. 80 channels: a group of 64
  // walked down the rows in 16s, then 8s; 4 MiB outputs, 64-byte aligned (one streaming store
  // a vector) and 16 past (four).
  const cpu::KernelTable* v3 = cpu::kernel_table_for("x86-64-v3");
  const cpu::KernelTable* v4 = cpu::kernel_table_for("x86-64-v4");
  if (v3 == nullptr || v4 == nullptr) {
    MESSAGE("skipped: this CPU does not run both the x86-64-v3 and -v4 kernels");
    return;
  }
  struct Case {
    long M;
    int C;
    size_t offset;
  };
  for (const Case& c : {Case{300, 80, 0}, Case{16384, 64, 0}, Case{16384, 64, 16}}) {
    CAPTURE(c.M);
    CAPTURE(c.C);
    CAPTURE(c.offset);
    const size_t n = size_t(c.M) * c.C;
    const auto x = random_floats(n, 25), dy = random_floats(n, 26), res = random_floats(n, 27);
    const auto gamma = random_floats(c.C, 28), beta = random_floats(c.C, 29);
    auto run = [&](const cpu::KernelTable& k, bool relu, const float* residual) {
      Placed y(n, c.offset), dx(n, c.offset);
      std::vector<float> mean(c.C), var(c.C), dg(c.C, 0.f), db(c.C, 0.f);
      k.batchnorm_forward_train(y.p, mean.data(), var.data(), x.data(), gamma.data(), beta.data(),
                                residual, c.M, c.C, 1e-5f, relu);
      k.batchnorm_backward(dx.p, dg.data(), db.data(), dy.data(), x.data(), mean.data(), var.data(),
                           gamma.data(), beta.data(), c.M, c.C, 1e-5f, relu);
      return std::vector<std::vector<float>>{y.values(n), mean, var, dx.values(n), dg, db};
    };
    for (const bool relu : {false, true}) {
      for (const float* residual : {static_cast<const float*>(nullptr), res.data()}) {
        CAPTURE(relu);
        CAPTURE(residual != nullptr);
        CHECK(run(*v4, relu, residual) == run(*v3, relu, residual));
      }
    }
  }
}

}  // namespace
}  // namespace sg
