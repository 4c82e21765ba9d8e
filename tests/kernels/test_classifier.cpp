// The classifier loss (softmax cross-entropy with label smoothing) against float64 and finite
// differences, top-1/top-5 counting, ReLU (and the residual add + ReLU), and SGD with momentum
// against float64 torch.optim.SGD.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/classifier_loss.h"
#include "kernels/relu.h"
#include "kernels/residual.h"
#include "kernels/sgd.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/tolerance.h"

using namespace sg::test;

namespace {

double smoothed_loss(const std::vector<double>& x, const std::vector<int32_t>& labels, int N,
                     int K, double s) {
  double total = 0;
  for (int n = 0; n < N; ++n) {
    double top = x[n * K];
    for (int k = 1; k < K; ++k) top = std::max(top, x[n * K + k]);
    double sum = 0;
    for (int k = 0; k < K; ++k) sum += std::exp(x[n * K + k] - top);
    const double lse = std::log(sum) + top;
    for (int k = 0; k < K; ++k) {
      const double target = (k == labels[n] ? 1.0 - s : 0.0) + s / K;
      total += -target * (x[n * K + k] - lse);
    }
  }
  return total;
}

}  // namespace

TEST_CASE("classifier loss with label smoothing: losses and logits gradient") {
  const int N = 6, K = 11;
  const auto logits = random_floats(N * K, 1, -3.0f, 3.0f);
  const auto labels = random_ints(N, 2, 0, K - 1);
  for (const float smoothing : {0.0f, 0.1f}) {
    CAPTURE(smoothing);
    const float dloss = 0.25f;
    std::vector<float> losses(N), dlogits(logits.size());
    sg::cpu::classifier_loss_forward_backward(losses.data(), dlogits.data(), logits.data(),
                                              labels.data(), smoothing, dloss, N, K);
    auto x64 = to_double(logits);
    double total = 0;
    for (float l : losses) total += l;
    CHECK(total == doctest::Approx(smoothed_loss(x64, labels, N, K, smoothing)).epsilon(1e-6));
    const auto grad = finite_difference([&] { return dloss * smoothed_loss(x64, labels, N, K, smoothing); }, x64);
    CHECK_CLOSE(dlogits.data(), grad.data(), grad.size(), kFiniteDiff32, "dlogits");
    // In place (dlogits aliasing the logits), and losses only.
    std::vector<float> in_place = logits, losses_only(N);
    sg::cpu::classifier_loss_forward_backward(losses.data(), in_place.data(), in_place.data(),
                                              labels.data(), smoothing, dloss, N, K);
    CHECK(in_place == dlogits);
    sg::cpu::classifier_loss_forward_backward(losses_only.data(), nullptr, logits.data(),
                                              labels.data(), smoothing, dloss, N, K);
    CHECK(losses_only == losses);
  }
}

TEST_CASE("top-1 and top-5 counts follow the label's rank") {
  const int K = 8;
  // Row 0: label is the max. Row 1: label 5th largest. Row 2: label 6th largest.
  std::vector<float> logits = {9, 1, 2, 3, 4, 5, 6, 7,   //
                               0, 1, 2, 3, 4, 5, 6, 7,   //
                               0, 1, 2, 3, 4, 5, 6, 7};
  const std::vector<int32_t> labels = {0, 3, 2};
  int64_t top1 = 0, top5 = 0;
  sg::cpu::classifier_correct(&top1, &top5, logits.data(), labels.data(), 3, K);
  CHECK(top1 == 1);
  CHECK(top5 == 2);
}

TEST_CASE("relu forward and backward, in place") {
  std::vector<float> x = {-1.0f, 0.0f, 2.0f, -0.5f, 3.0f};
  std::vector<float> dy = {1, 2, 3, 4, 5};
  sg::cpu::relu_forward(x.data(), x.data(), 5);
  CHECK(x == std::vector<float>{0, 0, 2, 0, 3});
  sg::cpu::relu_backward(dy.data(), x.data(), dy.data(), 5);
  CHECK(dy == std::vector<float>{0, 0, 3, 0, 5});
}

TEST_CASE("add_relu_inplace is add_inplace then relu_forward, bit for bit") {
  std::vector<float> out = {-1.0f, 0.5f, 2.0f, -0.5f, 3.0f, 1e-8f};
  const std::vector<float> in = {0.5f, -0.5f, -3.0f, 0.25f, 0.1f, -1e-8f};
  sg::cpu::add_relu_inplace(out.data(), in.data(), 6);
  CHECK(out == std::vector<float>{0, 0, 0, 0, 3.0f + 0.1f, 0});
  const long n = 10007;  // ragged against any vector width and thread split
  auto a = random_floats(n, 41), b = a;
  const auto c = random_floats(n, 42);
  sg::cpu::add_relu_inplace(a.data(), c.data(), n);
  sg::cpu::add_inplace(b.data(), c.data(), n);
  sg::cpu::relu_forward(b.data(), b.data(), n);
  CHECK(a == b);
}

TEST_CASE("add_relu_backward is add_inplace then relu_backward, bit for bit") {
  std::vector<float> acc = {1.0f, 2.0f, -3.0f, 4.0f, 5.0f};
  const std::vector<float> g = {0.5f, 0.25f, 1.0f, -4.0f, 0.125f};
  const std::vector<float> out = {1.0f, 0.0f, 2.0f, -1.0f, 1e-30f};  // the ReLU's output
  sg::cpu::add_relu_backward(acc.data(), g.data(), out.data(), 5);
  CHECK(acc == std::vector<float>{1.5f, 0.0f, -2.0f, 0.0f, 5.125f});
  const long n = 10007;  // ragged against any vector width and thread split
  auto a = random_floats(n, 43), b = a;
  const auto c = random_floats(n, 44), y = random_floats(n, 45);
  sg::cpu::add_relu_backward(a.data(), c.data(), y.data(), n);
  sg::cpu::add_inplace(b.data(), c.data(), n);
  sg::cpu::relu_backward(b.data(), y.data(), b.data(), n);
  CHECK(a == b);
}

TEST_CASE("sgd_update matches float64 torch.optim.SGD (momentum, weight decay, Nesterov)") {
  constexpr long n = 517;
  const double lr = 0.1, momentum = 0.9;
  for (const bool nesterov : {false, true}) {
    for (const double wd : {0.0, 1e-4}) {
      CAPTURE(nesterov);
      CAPTURE(wd);
      auto params = random_floats(n, 31);
      std::vector<float> buf(n, 0.0f);
      auto p64 = to_double(params);
      std::vector<double> b64(n, 0.0);
      for (int step = 1; step <= 3; ++step) {
        const auto grads = random_floats(n, 40 + step, -0.5f, 0.5f);
        sg::cpu::sgd_update(params.data(), buf.data(), grads.data(), n, float(lr),
                            float(momentum), float(wd), nesterov, 1.0f);
        for (long i = 0; i < n; ++i) {
          const double g = grads[i] + wd * p64[i];
          b64[i] = step == 1 ? g : momentum * b64[i] + g;  // torch: buf = g on the first step
          p64[i] -= lr * (nesterov ? g + momentum * b64[i] : b64[i]);
        }
      }
      CHECK_CLOSE(params.data(), p64.data(), n, kFp32, "params");
      CHECK_CLOSE(buf.data(), b64.data(), n, kFp32, "momentum");
    }
  }
}
