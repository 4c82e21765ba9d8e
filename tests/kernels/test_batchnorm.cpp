// Batch norm: the split functions against float64 formulas and finite differences, the fused
// pair (with and without the ReLU fused in) against float64 and bit for bit against the split
// functions and separate ReLU passes, the backward with a residual block's add + ReLU taken
// into its first pass against the two ops, and PyTorch's running-statistics update.
#include <doctest/doctest.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "kernels/batchnorm.h"
#include "kernels/relu.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/tolerance.h"

using namespace sg::test;

namespace {

constexpr float kEps = 1e-5f;

// float64 forward: y = (x - mean) / sqrt(var + eps) * gamma + beta with batch statistics.
std::vector<double> forward64(const std::vector<double>& x, const std::vector<double>& gamma,
                              const std::vector<double>& beta, long M, int C) {
  std::vector<double> y(x.size());
  for (int c = 0; c < C; ++c) {
    double mean = 0, var = 0;
    for (long m = 0; m < M; ++m) mean += x[m * C + c];
    mean /= M;
    for (long m = 0; m < M; ++m) var += (x[m * C + c] - mean) * (x[m * C + c] - mean);
    var /= M;
    for (long m = 0; m < M; ++m) {
      y[m * C + c] = (x[m * C + c] - mean) / std::sqrt(var + kEps) * gamma[c] + beta[c];
    }
  }
  return y;
}

// float64 batch statistics (mean, biased variance) per channel.
void stats64(const std::vector<double>& x, long M, int C, std::vector<double>& mean,
             std::vector<double>& var) {
  for (int c = 0; c < C; ++c) {
    double mu = 0, v = 0;
    for (long m = 0; m < M; ++m) mu += x[m * C + c];
    mu /= M;
    for (long m = 0; m < M; ++m) v += (x[m * C + c] - mu) * (x[m * C + c] - mu);
    mean[c] = mu;
    var[c] = v / M;
  }
}

// float64 gradients of the training forward: dx = gamma rstd (dy - mean(dy) - xhat mean(dy
// xhat)), dgamma = sum dy xhat, dbeta = sum dy.
void backward64(const std::vector<double>& x, const std::vector<double>& gamma,
                const std::vector<double>& dy, long M, int C, std::vector<double>& dx,
                std::vector<double>& dgamma, std::vector<double>& dbeta) {
  std::vector<double> mean(C), var(C);
  stats64(x, M, C, mean, var);
  dx.assign(x.size(), 0.0);
  dgamma.assign(C, 0.0);
  dbeta.assign(C, 0.0);
  for (int c = 0; c < C; ++c) {
    const double rstd = 1.0 / std::sqrt(var[c] + kEps);
    for (long m = 0; m < M; ++m) {
      dbeta[c] += dy[m * C + c];
      dgamma[c] += dy[m * C + c] * (x[m * C + c] - mean[c]) * rstd;
    }
    for (long m = 0; m < M; ++m) {
      const double xhat = (x[m * C + c] - mean[c]) * rstd;
      dx[m * C + c] = gamma[c] * rstd * (dy[m * C + c] - dbeta[c] / M - xhat * dgamma[c] / M);
    }
  }
}

}  // namespace

TEST_CASE("batch norm split functions: forward and every gradient against float64") {
  const long M = 37;
  const int C = 5;
  const auto x = random_floats(M * C, 1, -2.0f, 3.0f);
  const auto gamma = random_floats(C, 2, 0.5f, 1.5f);
  const auto beta = random_floats(C, 3);
  const auto dy = random_floats(M * C, 4);
  std::vector<double> sums(2 * C);
  std::vector<float> mean(C), var(C), y(M * C);
  sg::cpu::batchnorm_sums(sums.data(), x.data(), M, C);
  sg::cpu::batchnorm_stats(mean.data(), var.data(), sums.data(), static_cast<double>(M), C);
  sg::cpu::batchnorm_normalize(y.data(), x.data(), mean.data(), var.data(), gamma.data(),
                               beta.data(), M, C, kEps);
  auto x64 = to_double(x), g64 = to_double(gamma), b64 = to_double(beta);
  const auto y64 = forward64(x64, g64, b64, M, C);
  CHECK_CLOSE(y.data(), y64.data(), y.size(), kFp32, "out");

  std::vector<double> bsums(2 * C);
  std::vector<float> dgamma(C, 0.5f), dbeta(C, -0.5f), dx(M * C);
  sg::cpu::batchnorm_backward_sums(bsums.data(), dgamma.data(), dbeta.data(), dy.data(), x.data(),
                                   mean.data(), var.data(), M, C, kEps);
  sg::cpu::batchnorm_backward_input(dx.data(), bsums.data(), dy.data(), x.data(), mean.data(),
                                    var.data(), gamma.data(), static_cast<double>(M), M, C, kEps);
  const auto dy64 = to_double(dy);
  auto loss = [&] { return dot(forward64(x64, g64, b64, M, C), dy64); };
  const auto dx_fd = finite_difference(loss, x64);
  const auto dg_fd = finite_difference(loss, g64);
  const auto db_fd = finite_difference(loss, b64);
  CHECK_CLOSE(dx.data(), dx_fd.data(), dx.size(), kFiniteDiff32, "dinp");
  const auto dg_ref = plus(std::vector<float>(C, 0.5f), dg_fd);
  const auto db_ref = plus(std::vector<float>(C, -0.5f), db_fd);
  CHECK_CLOSE(dgamma.data(), dg_ref.data(), C, kFiniteDiff32, "dgamma (+=)");
  CHECK_CLOSE(dbeta.data(), db_ref.data(), C, kFiniteDiff32, "dbeta (+=)");
}

// The shapes the fused pair is checked on: channels in scalars only, in vectors of 8, in groups of
// 32 with vectors and scalars after them; one band of rows and several, the last one ragged; and
// 4 MiB, from which the writing passes stream their stores (to 16-byte aligned outputs, which
// std::vector's are: checked where it is used).
const std::pair<long, int> kShapes[] = {{64, 16},  {2 * 7 * 7, 24}, {13, 3},   {5, 7},
                                        {300, 45}, {700, 72},       {16384, 64}};

TEST_CASE("fused batch norm pair against float64, and the split functions bit for bit") {
  for (const auto& [M, C] : kShapes) {
    CAPTURE(M);
    CAPTURE(C);
    const size_t n = static_cast<size_t>(M) * C;
    const auto x = random_floats(n, 11, -1.0f, 2.0f);
    const auto gamma = random_floats(C, 12, 0.5f, 1.5f);
    const auto beta = random_floats(C, 13);
    const auto dy = random_floats(n, 14);
    std::vector<float> y(n, 99.0f), mean(C), var(C);
    REQUIRE(reinterpret_cast<uintptr_t>(y.data()) % 16 == 0);  // the streaming stores' need
    sg::cpu::batchnorm_forward_train(y.data(), mean.data(), var.data(), x.data(), gamma.data(),
                                     beta.data(), nullptr, M, C, kEps, false);
    const auto x64 = to_double(x), g64 = to_double(gamma);
    const auto y64 = forward64(x64, g64, to_double(beta), M, C);
    CHECK_CLOSE(y.data(), y64.data(), n, kFp32, "out");
    std::vector<double> mean64(C), var64(C);
    stats64(x64, M, C, mean64, var64);
    CHECK_CLOSE(mean.data(), mean64.data(), C, kFp32, "mean");
    CHECK_CLOSE(var.data(), var64.data(), C, kFp32, "var");

    std::vector<float> dx(n, 99.0f), dgamma(C, 1.0f), dbeta(C, 2.0f);
    sg::cpu::batchnorm_backward(dx.data(), dgamma.data(), dbeta.data(), dy.data(), x.data(),
                                mean.data(), var.data(), gamma.data(), nullptr, M, C, kEps, false);
    std::vector<double> dx64, dg64, db64;
    backward64(x64, g64, to_double(dy), M, C, dx64, dg64, db64);
    // dx is a difference of terms of the size of dy: compared at fp32 tolerance plus the
    // cancellation of those terms.
    CHECK_CLOSE(dx.data(), dx64.data(), n, (Tolerance{1e-4, 1e-3}), "dinp");
    const auto dg_ref = plus(std::vector<float>(C, 1.0f), dg64);
    const auto db_ref = plus(std::vector<float>(C, 2.0f), db64);
    CHECK_CLOSE(dgamma.data(), dg_ref.data(), C, kFp32, "dgamma (+=)");
    CHECK_CLOSE(dbeta.data(), db_ref.data(), C, kFp32, "dbeta (+=)");

    // The split functions (what synchronised batch norm runs) give the same bits on one replica.
    std::vector<double> sums(2 * C);
    std::vector<float> ref_mean(C), ref_var(C), ref_y(n);
    sg::cpu::batchnorm_sums(sums.data(), x.data(), M, C);
    sg::cpu::batchnorm_stats(ref_mean.data(), ref_var.data(), sums.data(), double(M), C);
    sg::cpu::batchnorm_normalize(ref_y.data(), x.data(), ref_mean.data(), ref_var.data(),
                                 gamma.data(), beta.data(), M, C, kEps);
    CHECK(ref_mean == mean);
    CHECK(ref_var == var);
    CHECK(ref_y == y);
    std::vector<float> ref_dx(n), ref_dgamma(C, 1.0f), ref_dbeta(C, 2.0f);
    std::vector<double> bsums(2 * C);
    sg::cpu::batchnorm_backward_sums(bsums.data(), ref_dgamma.data(), ref_dbeta.data(), dy.data(),
                                     x.data(), mean.data(), var.data(), M, C, kEps);
    sg::cpu::batchnorm_backward_input(ref_dx.data(), bsums.data(), dy.data(), x.data(),
                                      mean.data(), var.data(), gamma.data(), double(M), M, C,
                                      kEps);
    CHECK(ref_dx == dx);
    CHECK(ref_dgamma == dgamma);
    CHECK(ref_dbeta == dbeta);
  }
}

TEST_CASE("batch norm + ReLU fused: the unfused pair with ReLU passes around it, bit for bit") {
  for (const auto& [M, C] : kShapes) {
    CAPTURE(M);
    CAPTURE(C);
    const size_t n = static_cast<size_t>(M) * C;
    const auto x = random_floats(n, 31, -2.0f, 2.0f);
    const auto gamma = random_floats(C, 32, 0.5f, 1.5f);
    const auto beta = random_floats(C, 33);
    const auto dy = random_floats(n, 34);
    std::vector<float> y(n, 99.0f), mean(C), var(C);
    sg::cpu::batchnorm_forward_train(y.data(), mean.data(), var.data(), x.data(), gamma.data(),
                                     beta.data(), nullptr, M, C, kEps, true);
    std::vector<float> y2(n), mean2(C), var2(C);
    sg::cpu::batchnorm_forward_train(y2.data(), mean2.data(), var2.data(), x.data(), gamma.data(),
                                     beta.data(), nullptr, M, C, kEps, false);
    int zeros = 0;
    for (float& v : y2) {
      v = v > 0.0f ? v : 0.0f;
      zeros += v == 0.0f;
    }
    CHECK(zeros > 0);
    CHECK(zeros < static_cast<int>(n));  // both sides of the ReLU are exercised
    CHECK(y2 == y);
    CHECK(mean2 == mean);
    CHECK(var2 == var);

    // Backward: the ReLU's mask from the output, then the batch norm's gradient. The fused
    // backward recomputes the mask from x and beta; a wrong beta or scale would flip some.
    std::vector<float> dx(n, 99.0f), dgamma(C, 1.0f), dbeta(C, 2.0f);
    sg::cpu::batchnorm_backward(dx.data(), dgamma.data(), dbeta.data(), dy.data(), x.data(),
                                mean.data(), var.data(), gamma.data(), beta.data(), M, C, kEps,
                                true);
    std::vector<float> masked(n);
    for (size_t i = 0; i < n; ++i) masked[i] = y[i] > 0.0f ? dy[i] : 0.0f;
    std::vector<float> dx2(n), dgamma2(C, 1.0f), dbeta2(C, 2.0f);
    sg::cpu::batchnorm_backward(dx2.data(), dgamma2.data(), dbeta2.data(), masked.data(), x.data(),
                                mean.data(), var.data(), gamma.data(), nullptr, M, C, kEps, false);
    CHECK(dx2 == dx);
    CHECK(dgamma2 == dgamma);
    CHECK(dbeta2 == dbeta);
  }
}

TEST_CASE("batch norm + residual + ReLU: the batch norm then add_relu_inplace, bit for bit") {
  for (const auto& [M, C] : kShapes) {
    CAPTURE(M);
    CAPTURE(C);
    const size_t n = static_cast<size_t>(M) * C;
    const auto x = random_floats(n, 51, -2.0f, 2.0f), residual = random_floats(n, 52);
    const auto gamma = random_floats(C, 53, 0.5f, 1.5f), beta = random_floats(C, 54);
    std::vector<float> y(n, 99.0f), mean(C), var(C), y2(n), mean2(C), var2(C);
    sg::cpu::batchnorm_forward_train(y.data(), mean.data(), var.data(), x.data(), gamma.data(),
                                     beta.data(), residual.data(), M, C, kEps, true);
    sg::cpu::batchnorm_forward_train(y2.data(), mean2.data(), var2.data(), x.data(),
                                     gamma.data(), beta.data(), nullptr, M, C, kEps, false);
    sg::cpu::add_relu_inplace(y2.data(), residual.data(), M * C);
    CHECK(std::count(y.begin(), y.end(), 0.0f) > 0);
    CHECK(y == y2);
    CHECK(mean == mean2);
    CHECK(var == var2);
  }
}

TEST_CASE("batch norm backward with a pending add + ReLU: add_relu_backward then the backward") {
  for (const auto& [M, C] : kShapes) {
    CAPTURE(M);
    CAPTURE(C);
    const size_t n = static_cast<size_t>(M) * C;
    const auto x = random_floats(n, 71, -2.0f, 2.0f), g = random_floats(n, 72);
    const auto out = random_floats(n, 73);  // the ReLU's output: about half of it masked
    const auto gamma = random_floats(C, 74, 0.5f, 1.5f), beta = random_floats(C, 75);
    std::vector<float> y(n), mean(C), var(C);
    sg::cpu::batchnorm_forward_train(y.data(), mean.data(), var.data(), x.data(), gamma.data(),
                                     beta.data(), nullptr, M, C, kEps, false);
    auto acc = random_floats(n, 76), acc2 = acc;
    std::vector<float> dx(n, 99.0f), dgamma(C, 1.0f), dbeta(C, 2.0f);
    sg::cpu::batchnorm_add_relu_backward(dx.data(), dgamma.data(), dbeta.data(), acc.data(),
                                         g.data(), out.data(), x.data(), mean.data(), var.data(),
                                         gamma.data(), M, C, kEps);
    std::vector<float> dx2(n), dgamma2(C, 1.0f), dbeta2(C, 2.0f);
    sg::cpu::add_relu_backward(acc2.data(), g.data(), out.data(), static_cast<long>(n));
    sg::cpu::batchnorm_backward(dx2.data(), dgamma2.data(), dbeta2.data(), acc2.data(), x.data(),
                                mean.data(), var.data(), gamma.data(), nullptr, M, C, kEps, false);
    CHECK(std::count(acc2.begin(), acc2.end(), 0.0f) > 0);
    CHECK(acc == acc2);  // the sum left in place, as the shortcut's path reads it next
    CHECK(dx == dx2);
    CHECK(dgamma == dgamma2);
    CHECK(dbeta == dbeta2);
  }
}

TEST_CASE("CPU backend: the fused residual ops are Backend's compositions, bit for bit") {
  sg::Backend& be = sg::cpu_backend();
  const long M = 300;
  const int C = 45;
  const size_t n = static_cast<size_t>(M) * C;
  const auto x = random_floats(n, 61, -2.0f, 2.0f), r = random_floats(n, 62);
  const auto gamma = random_floats(C, 63, 0.5f, 1.5f), beta = random_floats(C, 64);
  std::vector<float> y(n), mean(C), var(C), y2(n), mean2(C), var2(C);
  be.batchnorm_add_relu_forward_train(y.data(), mean.data(), var.data(), x.data(), gamma.data(),
                                      beta.data(), r.data(), M, C, kEps);
  be.Backend::batchnorm_add_relu_forward_train(y2.data(), mean2.data(), var2.data(), x.data(),
                                               gamma.data(), beta.data(), r.data(), M, C, kEps);
  CHECK(y == y2);
  CHECK(mean == mean2);
  CHECK(var == var2);
  auto acc = random_floats(n, 65), acc2 = acc;
  be.add_relu_backward(acc.data(), r.data(), y.data(), static_cast<long>(n));
  be.Backend::add_relu_backward(acc2.data(), r.data(), y.data(), static_cast<long>(n));
  CHECK(acc == acc2);
  CHECK(std::count(acc.begin(), acc.end(), 0.0f) > 0);
  const auto dy = random_floats(n, 66);
  auto sum = dy, sum2 = dy;
  std::vector<float> dx(n), dg(C, 0.0f), db(C, 0.0f), dx2(n), dg2(C, 0.0f), db2(C, 0.0f);
  be.batchnorm_add_relu_backward(dx.data(), dg.data(), db.data(), sum.data(), r.data(), y.data(),
                                 x.data(), mean.data(), var.data(), gamma.data(), M, C, kEps);
  be.Backend::batchnorm_add_relu_backward(dx2.data(), dg2.data(), db2.data(), sum2.data(),
                                          r.data(), y.data(), x.data(), mean.data(), var.data(),
                                          gamma.data(), M, C, kEps);
  CHECK(sum == sum2);
  CHECK(dx == dx2);
  CHECK(dg == dg2);
  CHECK(db == db2);
}

TEST_CASE("fused batch norm pair: no rows or no channels write nothing") {
  std::vector<float> x(8, 1.0f), y(8, 7.0f), mean(4, 7.0f), var(4, 7.0f), g(4, 1.0f), b(4, 0.0f);
  sg::cpu::batchnorm_forward_train(y.data(), mean.data(), var.data(), x.data(), g.data(), b.data(),
                                   nullptr, 0, 4, kEps, true);
  sg::cpu::batchnorm_backward(y.data(), g.data(), b.data(), x.data(), x.data(), mean.data(),
                              var.data(), g.data(), b.data(), 0, 4, kEps, true);
  CHECK(mean == std::vector<float>(4, 7.0f));  // not 0/0
  CHECK(y == std::vector<float>(8, 7.0f));
  CHECK(g == std::vector<float>(4, 1.0f));
}

TEST_CASE("fused batch norm pair: the same bits on any thread count, sums exact far from zero") {
  const long M = 900;  // several bands
  const int C = 45;    // groups of 32, vectors of 8, scalars
  const size_t n = static_cast<size_t>(M) * C;
  auto x = random_floats(n, 41, -1.0f, 1.0f);
  for (float& v : x) v += 1000.0f;  // var / mean^2 ~ 3e-7: float sums of squares would not do
  const auto gamma = random_floats(C, 42, 0.5f, 1.5f);
  const auto beta = random_floats(C, 43);
  const auto dy = random_floats(n, 44);
  auto run = [&](std::vector<float>& y, std::vector<float>& dx, std::vector<float>& dg) {
    std::vector<float> mean(C), var(C), db(C, 0.0f);
    sg::cpu::batchnorm_forward_train(y.data(), mean.data(), var.data(), x.data(), gamma.data(),
                                     beta.data(), nullptr, M, C, kEps, true);
    sg::cpu::batchnorm_backward(dx.data(), dg.data(), db.data(), dy.data(), x.data(), mean.data(),
                                var.data(), gamma.data(), beta.data(), M, C, kEps, true);
    std::vector<double> mean64(C), var64(C);
    stats64(to_double(x), M, C, mean64, var64);
    CHECK_CLOSE(var.data(), var64.data(), C, kFp32, "var of values near 1000");
  };
  std::vector<float> y1(n), dx1(n), dg1(C, 0.0f), y2(n), dx2(n), dg2(C, 0.0f);
  run(y1, dx1, dg1);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(saved == 1 ? 3 : 1);
  run(y2, dx2, dg2);
  omp_set_num_threads(saved);
  CHECK(y1 == y2);
  CHECK(dx1 == dx2);
  CHECK(dg1 == dg2);
}

TEST_CASE("running statistics: momentum average with the unbiased batch variance") {
  std::vector<float> running_mean{1.0f, -1.0f}, running_var{2.0f, 0.5f};
  const std::vector<float> mean{3.0f, 0.0f}, var{4.0f, 1.0f};
  sg::cpu::batchnorm_update_running(running_mean.data(), running_var.data(), mean.data(),
                                    var.data(), 5.0, 2, 0.1f);
  const double want_mean[] = {0.9 * 1 + 0.1 * 3, 0.9 * -1 + 0.0};
  const double want_var[] = {0.9 * 2 + 0.1 * 4 * 5 / 4.0, 0.9 * 0.5 + 0.1 * 1 * 5 / 4.0};
  CHECK_CLOSE(running_mean.data(), want_mean, 2, kFp32, "running_mean");
  CHECK_CLOSE(running_var.data(), want_var, 2, kFp32, "running_var");
}

TEST_CASE("batch norm sums do not depend on the thread count") {
  const long M = 3000;
  const int C = 7;
  const auto x = random_floats(M * C, 21);
  std::vector<double> a(2 * C), b(2 * C);
  sg::cpu::batchnorm_sums(a.data(), x.data(), M, C);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  sg::cpu::batchnorm_sums(b.data(), x.data(), M, C);
  omp_set_num_threads(saved);
  CHECK(a == b);
}
