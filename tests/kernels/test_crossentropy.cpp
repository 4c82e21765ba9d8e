// Softmax + cross-entropy over a padded vocabulary, out of place and in place.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "kernels/crossentropy.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/tolerance.h"

using namespace sg::test;

namespace {

struct CrossEntropyRef {
  std::vector<double> losses, probs;  // probs (N,Vp), 0 on padding
};

CrossEntropyRef reference_forward(const std::vector<double>& logits,
                                  const std::vector<std::int32_t>& targets, int N, int V, int Vp) {
  CrossEntropyRef r{std::vector<double>(N), std::vector<double>(N * Vp, 0.0)};
  for (int n = 0; n < N; ++n) {
    double max_logit = -INFINITY;
    for (int v = 0; v < V; ++v) max_logit = std::max(max_logit, logits[n * Vp + v]);
    double sum = 0.0;
    for (int v = 0; v < V; ++v) sum += std::exp(logits[n * Vp + v] - max_logit);
    for (int v = 0; v < V; ++v) r.probs[n * Vp + v] = std::exp(logits[n * Vp + v] - max_logit) / sum;
    r.losses[n] = -std::log(r.probs[n * Vp + targets[n]]);
  }
  return r;
}

// Logits with padding columns set huge: if the kernel let them into the softmax, every
// probability and loss would be wrong.
std::vector<float> padded_logits(int N, int V, int Vp, unsigned seed) {
  auto logits = random_floats(N * Vp, seed, -6.0f, 6.0f);
  for (int n = 0; n < N; ++n)
    for (int v = V; v < Vp; ++v) logits[n * Vp + v] = 80.0f;
  return logits;
}

}  // namespace

TEST_CASE("crossentropy float64 reference gradient agrees with finite differences") {
  constexpr int N = 3, V = 7, Vp = 8;
  auto logits = to_double(padded_logits(N, V, Vp, 81));
  const auto targets = random_ints(N, 82, 0, V - 1);
  const double dloss = 0.25;
  const auto loss = [&] {
    double total = 0.0;
    for (double l : reference_forward(logits, targets, N, V, Vp).losses) total += dloss * l;
    return total;
  };
  const auto fd = finite_difference(loss, logits);
  auto analytic = reference_forward(logits, targets, N, V, Vp).probs;
  for (int n = 0; n < N; ++n) {
    for (int v = 0; v < V; ++v) analytic[n * Vp + v] *= dloss;
    analytic[n * Vp + targets[n]] -= dloss;
  }
  CHECK_CLOSE(analytic.data(), fd.data(), fd.size(), kFiniteDiff64, "dlogits");
}

TEST_CASE("crossentropy forward and backward over a padded vocabulary") {
  // The GPT-2 vocabulary padded to 50304, and a small odd one.
  struct Case { int N, V, Vp; };
  for (const Case c : {Case{5, 37, 48}, Case{3, 50257, 50304}}) {
    CAPTURE(c.V);
    const auto logits = padded_logits(c.N, c.V, c.Vp, 83);
    const auto targets = random_ints(c.N, 84, 0, c.V - 1);
    const auto ref = reference_forward(to_double(logits), targets, c.N, c.V, c.Vp);
    const float dloss = 1.0f / 3.0f;
    std::vector<double> ref_dlogits(ref.probs);
    for (int n = 0; n < c.N; ++n) {
      for (int v = 0; v < c.V; ++v) ref_dlogits[n * c.Vp + v] *= dloss;
      ref_dlogits[n * c.Vp + targets[n]] -= dloss;
    }

    SUBCASE("separate buffers") {
      std::vector<float> losses(c.N), probs(logits.size(), 7.0f);
      sg::cpu::crossentropy_forward(losses.data(), probs.data(), logits.data(), targets.data(),
                                    c.N, c.V, c.Vp);
      CHECK_CLOSE(losses.data(), ref.losses.data(), losses.size(), kFp32, "losses");
      CHECK_CLOSE(probs.data(), ref.probs.data(), probs.size(), kFp32, "probs");
      std::vector<float> dlogits(logits.size(), 7.0f);  // written with =, not +=
      sg::cpu::crossentropy_backward(dlogits.data(), probs.data(), targets.data(), dloss, c.N,
                                     c.V, c.Vp);
      CHECK_CLOSE(dlogits.data(), ref_dlogits.data(), dlogits.size(), kFp32, "dlogits");
      int nonzero_padding = 0;
      for (int n = 0; n < c.N; ++n)
        for (int v = c.V; v < c.Vp; ++v)
          nonzero_padding += (probs[n * c.Vp + v] != 0.0f) + (dlogits[n * c.Vp + v] != 0.0f);
      CHECK(nonzero_padding == 0);
    }
    SUBCASE("in place: probs over logits, dlogits over probs") {
      std::vector<float> losses(c.N), buffer = logits;
      sg::cpu::crossentropy_forward(losses.data(), buffer.data(), buffer.data(), targets.data(),
                                    c.N, c.V, c.Vp);
      CHECK_CLOSE(losses.data(), ref.losses.data(), losses.size(), kFp32, "losses");
      CHECK_CLOSE(buffer.data(), ref.probs.data(), buffer.size(), kFp32, "probs");
      sg::cpu::crossentropy_backward(buffer.data(), buffer.data(), targets.data(), dloss, c.N,
                                     c.V, c.Vp);
      CHECK_CLOSE(buffer.data(), ref_dlogits.data(), buffer.size(), kFp32, "dlogits");
    }
    SUBCASE("fused forward-backward, in place") {
      std::vector<float> losses(c.N), buffer = logits;
      sg::cpu::crossentropy_forward_backward(losses.data(), buffer.data(), buffer.data(),
                                             targets.data(), dloss, c.N, c.V, c.Vp);
      CHECK_CLOSE(losses.data(), ref.losses.data(), losses.size(), kFp32, "losses");
      CHECK_CLOSE(buffer.data(), ref_dlogits.data(), buffer.size(), kFp32, "dlogits");
      int nonzero_padding = 0;
      for (int n = 0; n < c.N; ++n)
        for (int v = c.V; v < c.Vp; ++v) nonzero_padding += buffer[n * c.Vp + v] != 0.0f;
      CHECK(nonzero_padding == 0);
    }
  }
}

TEST_CASE("crossentropy loss stays exact for a confident prediction") {
  // probs[target] rounds to 1 in float32; the loss must still be the tiny true value, not 0.
  constexpr int N = 1, V = 4, Vp = 4;
  const std::vector<float> logits = {30.0f, 0.0f, 1.0f, -2.0f};
  const std::vector<std::int32_t> targets = {0};
  const auto ref = reference_forward(to_double(logits), targets, N, V, Vp);
  std::vector<float> losses(N), probs(Vp);
  sg::cpu::crossentropy_forward(losses.data(), probs.data(), logits.data(), targets.data(), N, V,
                                Vp);
  CHECK_CLOSE(losses.data(), ref.losses.data(), 1, (Tolerance{0.0, 1e-4}), "loss");
}
