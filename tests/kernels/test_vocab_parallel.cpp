// Vocabulary-parallel (tensor-parallel) embedding and cross-entropy against the full-vocabulary
// kernels, with the ranks and their all-reduces simulated in rank order.
#include <doctest/doctest.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/crossentropy.h"
#include "kernels/encoder.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/tolerance.h"

using namespace sg::test;

namespace {

bool bitwise_equal(const float* a, const float* b, std::size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

// Columns [c0, c0+width) of a (rows, cols) matrix.
std::vector<float> columns(const std::vector<float>& x, int rows, int cols, int c0, int width) {
  std::vector<float> out(static_cast<std::size_t>(rows) * width);
  for (int r = 0; r < rows; ++r)
    std::copy_n(x.begin() + static_cast<long>(r) * cols + c0, width, out.begin() + r * width);
  return out;
}

// ---- cross-entropy ----

// Logits with padding columns set huge: letting them into the softmax would change every loss.
std::vector<float> padded_logits(int N, int V, int Vp, unsigned seed) {
  auto logits = random_floats(static_cast<std::size_t>(N) * Vp, seed, -6.0f, 6.0f);
  for (int n = 0; n < N; ++n)
    for (int v = V; v < Vp; ++v) logits[n * Vp + v] = 80.0f;
  return logits;
}

// Random targets in [0, V), the first few on the rank boundaries of 2 and 4 ranks of Vp = 256.
std::vector<std::int32_t> boundary_targets(int N, int V, unsigned seed) {
  auto targets = random_ints(N, seed, 0, V - 1);
  const int boundaries[] = {0, V - 1, 63, 64, 127, 128, 191};
  for (int i = 0; i < N && i < 7; ++i) targets[i] = std::min(boundaries[i], V - 1);
  return targets;
}

struct VocabParallelRun {
  std::vector<float> losses;                             // (N)
  std::vector<float> dlogits;                            // (N,Vp), assembled from the ranks
  std::vector<float> dlogits_in_place;                   // (N,Vp), backward over the logits
  std::vector<std::vector<float>> rank_max, rank_sum, rank_target;  // per rank, (N) each
};

// Every rank runs the vp kernels on its columns; the all-reduces (MAX, then SUM) are loops over
// the ranks in rank order.
VocabParallelRun run_vocab_parallel(const std::vector<float>& logits,
                                    const std::vector<std::int32_t>& targets, float dloss, int N,
                                    int V, int Vp, int ranks) {
  const int Vl = Vp / ranks;
  std::vector<std::vector<float>> local(ranks);
  for (int r = 0; r < ranks; ++r) local[r] = columns(logits, N, Vp, r * Vl, Vl);
  VocabParallelRun run;
  std::vector<float> row_max(N, -INFINITY), sum_exp(N, 0.0f), target_logit(N, 0.0f);
  for (int r = 0; r < ranks; ++r) {
    std::vector<float> m(N, 7.0f);
    sg::cpu::crossentropy_vp_max(m.data(), local[r].data(), N, Vl, r * Vl, V);
    for (int n = 0; n < N; ++n) row_max[n] = std::max(row_max[n], m[n]);
    run.rank_max.push_back(m);
  }
  for (int r = 0; r < ranks; ++r) {
    std::vector<float> s(N, 7.0f), t(N, 7.0f);
    sg::cpu::crossentropy_vp_sums(s.data(), t.data(), local[r].data(), row_max.data(),
                                  targets.data(), N, Vl, r * Vl, V);
    for (int n = 0; n < N; ++n) {
      sum_exp[n] += s[n];
      target_logit[n] += t[n];
    }
    run.rank_sum.push_back(s);
    run.rank_target.push_back(t);
  }
  run.losses.assign(N, 7.0f);
  sg::cpu::crossentropy_vp_losses(run.losses.data(), row_max.data(), sum_exp.data(),
                                  target_logit.data(), N);
  run.dlogits.assign(logits.size(), 7.0f);
  run.dlogits_in_place.assign(logits.size(), 7.0f);
  for (int r = 0; r < ranks; ++r) {
    std::vector<float> d(local[r].size(), 7.0f);  // written with =, not +=
    sg::cpu::crossentropy_vp_backward(d.data(), local[r].data(), row_max.data(), sum_exp.data(),
                                      targets.data(), dloss, N, Vl, r * Vl, V);
    sg::cpu::crossentropy_vp_backward(local[r].data(), local[r].data(), row_max.data(),
                                      sum_exp.data(), targets.data(), dloss, N, Vl, r * Vl, V);
    for (int n = 0; n < N; ++n) {
      std::copy_n(d.begin() + n * Vl, Vl, run.dlogits.begin() + n * Vp + r * Vl);
      std::copy_n(local[r].begin() + n * Vl, Vl, run.dlogits_in_place.begin() + n * Vp + r * Vl);
    }
  }
  return run;
}

std::vector<double> reference_losses(const std::vector<float>& logits,
                                     const std::vector<std::int32_t>& targets, int N, int V,
                                     int Vp) {
  std::vector<double> losses(N);
  for (int n = 0; n < N; ++n) {
    const float* x = logits.data() + static_cast<long>(n) * Vp;
    double max_logit = -INFINITY;
    for (int v = 0; v < V; ++v) max_logit = std::max(max_logit, double{x[v]});
    double sum = 0.0;
    for (int v = 0; v < V; ++v) sum += std::exp(double{x[v]} - max_logit);
    losses[n] = std::log(sum) - (double{x[targets[n]]} - max_logit);
  }
  return losses;
}

// ---- embedding ----

constexpr int kB = 3, kT = 8, kMaxT = 10, kC = 24, kV = 250, kVp = 256;

// Tokens with repeats (so the backward's summation order matters) and the rank boundaries.
std::vector<std::int32_t> embedding_tokens() {
  auto inp = random_ints(kB * kT, 91, 0, kV - 1);
  const int fixed[] = {0, 63, 64, 127, 128, 191, 192, kV - 1, 64, 64, 128, 0, 63, kV - 1};
  std::copy(std::begin(fixed), std::end(fixed), inp.begin());
  for (int i = 16; i < kB * kT; i += 3) inp[i] = inp[i - 16];  // more repeats
  return inp;
}

}  // namespace

TEST_CASE("vocab-parallel crossentropy matches the full-vocabulary kernels for 1, 2, 4 ranks") {
  constexpr int N = 7;
  struct Case { int V, Vp, ranks; };
  // V=250 of 256 over 4 ranks: the last rank holds 58 real columns and 6 of padding.
  // V=100 of 256 over 4 ranks: ranks 2 and 3 hold only padding.
  for (const Case c : {Case{250, 256, 1}, Case{250, 256, 2}, Case{250, 256, 4},
                       Case{100, 256, 4}}) {
    CAPTURE(c.V);
    CAPTURE(c.ranks);
    const auto logits = padded_logits(N, c.V, c.Vp, 111);
    const auto targets = boundary_targets(N, c.V, 112);
    const float dloss = 1.0f / 3.0f;

    std::vector<float> losses(N), probs(logits.size()), dlogits(logits.size());
    sg::cpu::crossentropy_forward(losses.data(), probs.data(), logits.data(), targets.data(), N,
                                  c.V, c.Vp);
    sg::cpu::crossentropy_backward(dlogits.data(), probs.data(), targets.data(), dloss, N, c.V,
                                   c.Vp);
    const auto run = run_vocab_parallel(logits, targets, dloss, N, c.V, c.Vp, c.ranks);

    CHECK_CLOSE(run.losses.data(), losses.data(), N, (Tolerance{0.0, 1e-5}), "losses vs full");
    const auto ref = reference_losses(logits, targets, N, c.V, c.Vp);
    CHECK_CLOSE(run.losses.data(), ref.data(), N, kFp32, "losses vs float64");
    // Gradients are dloss * (p - onehot), p in [0, 1]: 1e-6 absolute before the dloss scale.
    CHECK_CLOSE(run.dlogits.data(), dlogits.data(), dlogits.size(),
                (Tolerance{1e-6 * dloss, 0.0}), "dlogits vs full");
    CHECK(bitwise_equal(run.dlogits_in_place.data(), run.dlogits.data(), dlogits.size()));
    int nonzero_padding = 0;
    for (int n = 0; n < N; ++n)
      for (int v = c.V; v < c.Vp; ++v) nonzero_padding += run.dlogits[n * c.Vp + v] != 0.0f;
    CHECK(nonzero_padding == 0);
    // Each target is on exactly one rank.
    for (int n = 0; n < N; ++n) {
      int holders = 0;
      for (int r = 0; r < c.ranks; ++r) holders += run.rank_target[r][n] != 0.0f;
      CHECK(holders == 1);
    }
  }
}

TEST_CASE("vocab-parallel crossentropy: a rank holding only padding contributes nothing") {
  constexpr int N = 7, V = 100, Vp = 256, ranks = 4, Vl = Vp / ranks;
  const auto logits = padded_logits(N, V, Vp, 113);
  const auto targets = boundary_targets(N, V, 114);
  const auto run = run_vocab_parallel(logits, targets, 0.5f, N, V, Vp, ranks);
  for (int r = 0; r < ranks; ++r) {
    CAPTURE(r);
    const bool only_padding = r * Vl >= V;
    for (int n = 0; n < N; ++n) {
      CAPTURE(n);
      // Ranks with real columns hold the max of those (the local padding is 80).
      float real_max = -INFINITY;
      for (int v = r * Vl; v < std::min(V, (r + 1) * Vl); ++v)
        real_max = std::max(real_max, logits[n * Vp + v]);
      CHECK(run.rank_max[r][n] == real_max);
      CHECK((run.rank_sum[r][n] == 0.0f) == only_padding);
      const bool holds_target = targets[n] >= r * Vl && targets[n] < (r + 1) * Vl;
      CHECK(run.rank_target[r][n] == (holds_target ? logits[n * Vp + targets[n]] : 0.0f));
    }
    if (only_padding) {
      int nonzero = 0;
      for (int n = 0; n < N; ++n)
        for (int v = r * Vl; v < (r + 1) * Vl; ++v) nonzero += run.dlogits[n * Vp + v] != 0.0f;
      CHECK(nonzero == 0);
    }
  }
  CHECK(std::isinf(run.rank_max[3][0]));
  CHECK(run.rank_max[3][0] < 0.0f);
}

TEST_CASE("vocab-parallel crossentropy is identical for every thread count") {
  constexpr int N = 7, V = 250, Vp = 256, ranks = 4;
  const auto logits = padded_logits(N, V, Vp, 115);
  const auto targets = boundary_targets(N, V, 116);
  const int saved_threads = omp_get_max_threads();
  std::vector<VocabParallelRun> runs;
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    runs.push_back(run_vocab_parallel(logits, targets, 0.25f, N, V, Vp, ranks));
  }
  omp_set_num_threads(saved_threads);
  for (const auto& run : runs) {
    CHECK(bitwise_equal(run.losses.data(), runs[0].losses.data(), N));
    CHECK(bitwise_equal(run.dlogits.data(), runs[0].dlogits.data(), run.dlogits.size()));
  }
}

TEST_CASE("vocab-parallel embedding summed over ranks, then position_add, is encoder_forward") {
  const auto inp = embedding_tokens();
  const auto wte = random_floats(kVp * kC, 92);
  const auto wpe = random_floats(kMaxT * kC, 93);
  std::vector<float> expected(kB * kT * kC);
  sg::cpu::encoder_forward(expected.data(), inp.data(), wte.data(), wpe.data(), kB, kT, kC);
  for (int ranks : {1, 2, 4}) {
    CAPTURE(ranks);
    const int Vl = kVp / ranks;
    std::vector<float> sum(kB * kT * kC, 0.0f);  // the all-reduce SUM, in rank order
    for (int r = 0; r < ranks; ++r) {
      CAPTURE(r);
      const int v0 = r * Vl;
      const auto wte_local = std::vector<float>(wte.begin() + v0 * kC, wte.begin() + (v0 + Vl) * kC);
      std::vector<float> part(kB * kT * kC, 7.0f);  // written with =
      sg::cpu::embedding_forward_vocab_range(part.data(), inp.data(), wte_local.data(), kB * kT,
                                             kC, v0, Vl);
      for (int n = 0; n < kB * kT; ++n) {
        const bool local = inp[n] >= v0 && inp[n] < v0 + Vl;
        const std::vector<float> zeros(kC, 0.0f);
        const float* want = local ? wte.data() + inp[n] * kC : zeros.data();
        CHECK(bitwise_equal(part.data() + n * kC, want, kC));
      }
      for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
    }
    sg::cpu::position_add(sum.data(), wpe.data(), kB, kT, kC);
    CHECK(bitwise_equal(sum.data(), expected.data(), expected.size()));
  }
}

TEST_CASE("vocab-parallel encoder backward gives each rank its rows of encoder_backward") {
  const auto inp = embedding_tokens();
  const auto dout = random_floats(kB * kT * kC, 94);
  const auto dwte0 = random_floats(kVp * kC, 95);  // += into existing gradients
  const auto dwpe0 = random_floats(kMaxT * kC, 96);
  auto dwte = dwte0, dwpe = dwpe0;
  sg::cpu::encoder_backward(dwte.data(), dwpe.data(), dout.data(), inp.data(), kB, kT, kC);
  const int saved_threads = omp_get_max_threads();
  for (int ranks : {1, 2, 4}) {
    const int Vl = kVp / ranks;
    for (int r = 0; r < ranks; ++r) {
      const int v0 = r * Vl;
      for (int threads : {1, 2, 3}) {
        CAPTURE(ranks);
        CAPTURE(r);
        CAPTURE(threads);
        omp_set_num_threads(threads);
        std::vector<float> dwte_local(dwte0.begin() + v0 * kC, dwte0.begin() + (v0 + Vl) * kC);
        auto dwpe_r = dwpe0;
        sg::cpu::encoder_backward_vocab_range(dwte_local.data(), dwpe_r.data(), dout.data(),
                                              inp.data(), kB, kT, kC, v0, Vl);
        CHECK(bitwise_equal(dwte_local.data(), dwte.data() + v0 * kC, dwte_local.size()));
        CHECK(bitwise_equal(dwpe_r.data(), dwpe.data(), dwpe.size()));
        // Without a position table (Llama): the same embedding rows.
        std::vector<float> dwte_only(dwte0.begin() + v0 * kC, dwte0.begin() + (v0 + Vl) * kC);
        sg::cpu::encoder_backward_vocab_range(dwte_only.data(), nullptr, dout.data(), inp.data(),
                                              kB, kT, kC, v0, Vl);
        CHECK(bitwise_equal(dwte_only.data(), dwte.data() + v0 * kC, dwte_only.size()));
      }
    }
  }
  omp_set_num_threads(saved_threads);
}
