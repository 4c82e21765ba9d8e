// Batch norm: the split functions against float64 formulas and finite differences, the fused
// oneDNN pair (with and without the ReLU fused in) against the split functions, and PyTorch's
// running-statistics update.
#include <doctest/doctest.h>

#include <omp.h>

#include <cmath>
#include <vector>

#include "kernels/batchnorm.h"
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

TEST_CASE("batch norm through oneDNN matches the split functions") {
  for (const auto& [M, C] : {std::pair<long, int>{64, 16}, {2 * 7 * 7, 24}, {13, 3}}) {
    CAPTURE(M);
    CAPTURE(C);
    const auto x = random_floats(static_cast<size_t>(M) * C, 11, -1.0f, 2.0f);
    const auto gamma = random_floats(C, 12, 0.5f, 1.5f);
    const auto beta = random_floats(C, 13);
    const auto dy = random_floats(static_cast<size_t>(M) * C, 14);
    std::vector<float> y(x.size()), mean(C), var(C);
    sg::cpu::batchnorm_forward_train(y.data(), mean.data(), var.data(), x.data(), gamma.data(),
                                     beta.data(), M, C, kEps);
    std::vector<double> sums(2 * C);
    std::vector<float> ref_mean(C), ref_var(C), ref_y(x.size());
    sg::cpu::batchnorm_sums(sums.data(), x.data(), M, C);
    sg::cpu::batchnorm_stats(ref_mean.data(), ref_var.data(), sums.data(), double(M), C);
    sg::cpu::batchnorm_normalize(ref_y.data(), x.data(), ref_mean.data(), ref_var.data(),
                                 gamma.data(), beta.data(), M, C, kEps);
    CHECK_CLOSE(mean.data(), ref_mean.data(), C, kFp32, "mean");
    CHECK_CLOSE(var.data(), ref_var.data(), C, kFp32, "var");
    CHECK_CLOSE(y.data(), ref_y.data(), y.size(), kFp32, "out");

    std::vector<float> dx(x.size()), dgamma(C, 1.0f), dbeta(C, 2.0f);
    sg::cpu::batchnorm_backward(dx.data(), dgamma.data(), dbeta.data(), dy.data(), x.data(),
                                mean.data(), var.data(), gamma.data(), M, C, kEps);
    std::vector<float> ref_dx(x.size()), ref_dgamma(C, 1.0f), ref_dbeta(C, 2.0f);
    std::vector<double> bsums(2 * C);
    sg::cpu::batchnorm_backward_sums(bsums.data(), ref_dgamma.data(), ref_dbeta.data(), dy.data(),
                                     x.data(), ref_mean.data(), ref_var.data(), M, C, kEps);
    sg::cpu::batchnorm_backward_input(ref_dx.data(), bsums.data(), dy.data(), x.data(),
                                      ref_mean.data(), ref_var.data(), gamma.data(), double(M),
                                      M, C, kEps);
    // dx is a difference of terms of the size of dy: compared at fp32 tolerance plus the
    // cancellation of those terms.
    CHECK_CLOSE(dx.data(), ref_dx.data(), dx.size(), (Tolerance{1e-4, 1e-3}), "dinp");
    CHECK_CLOSE(dgamma.data(), ref_dgamma.data(), C, kFp32, "dgamma (+=)");
    CHECK_CLOSE(dbeta.data(), ref_dbeta.data(), C, kFp32, "dbeta (+=)");
  }
}

TEST_CASE("batch norm + ReLU through oneDNN matches the split functions and a separate ReLU") {
  for (const auto& [M, C] : {std::pair<long, int>{64, 16}, {2 * 7 * 7, 24}, {13, 3}, {5, 7}}) {
    CAPTURE(M);
    CAPTURE(C);
    const size_t n = static_cast<size_t>(M) * C;
    const auto x = random_floats(n, 31, -2.0f, 2.0f);
    const auto gamma = random_floats(C, 32, 0.5f, 1.5f);
    const auto beta = random_floats(C, 33);
    const auto dy = random_floats(n, 34);
    const size_t mask_bytes = sg::cpu::batchnorm_relu_mask_bytes(M, C);
    CHECK(mask_bytes > 0);
    CHECK(mask_bytes <= n);  // at most a byte per element
    // Guard bytes after the mask: the forward writes no more than it said.
    std::vector<unsigned char> mask(mask_bytes + 64, 0xA5);
    std::vector<float> y(n, 99.0f), mean(C), var(C);
    sg::cpu::batchnorm_relu_forward_train(y.data(), mean.data(), var.data(), mask.data(), x.data(),
                                          gamma.data(), beta.data(), M, C, kEps);
    for (size_t i = mask_bytes; i < mask.size(); ++i) REQUIRE(mask[i] == 0xA5);

    std::vector<double> sums(2 * C);
    std::vector<float> ref_mean(C), ref_var(C), ref_y(n);
    sg::cpu::batchnorm_sums(sums.data(), x.data(), M, C);
    sg::cpu::batchnorm_stats(ref_mean.data(), ref_var.data(), sums.data(), double(M), C);
    sg::cpu::batchnorm_normalize(ref_y.data(), x.data(), ref_mean.data(), ref_var.data(),
                                 gamma.data(), beta.data(), M, C, kEps);
    int zeros = 0;
    for (float& v : ref_y) {
      v = v > 0.0f ? v : 0.0f;
      zeros += v == 0.0f;
    }
    CHECK(zeros > 0);
    CHECK(zeros < static_cast<int>(n));  // both sides of the ReLU are exercised
    CHECK_CLOSE(mean.data(), ref_mean.data(), C, kFp32, "mean");
    CHECK_CLOSE(var.data(), ref_var.data(), C, kFp32, "var");
    CHECK_CLOSE(y.data(), ref_y.data(), n, kFp32, "out = relu(bn)");

    // Backward: the ReLU's mask from the output, then the batch norm's gradient.
    std::vector<float> dx(n), dgamma(C, 1.0f), dbeta(C, 2.0f);
    sg::cpu::batchnorm_relu_backward(dx.data(), dgamma.data(), dbeta.data(), dy.data(), x.data(),
                                     mask.data(), mean.data(), var.data(), gamma.data(), M, C,
                                     kEps);
    std::vector<float> masked(n);
    for (size_t i = 0; i < n; ++i) masked[i] = y[i] > 0.0f ? dy[i] : 0.0f;
    std::vector<float> ref_dx(n), ref_dgamma(C, 1.0f), ref_dbeta(C, 2.0f);
    std::vector<double> bsums(2 * C);
    sg::cpu::batchnorm_backward_sums(bsums.data(), ref_dgamma.data(), ref_dbeta.data(),
                                     masked.data(), x.data(), ref_mean.data(), ref_var.data(), M,
                                     C, kEps);
    sg::cpu::batchnorm_backward_input(ref_dx.data(), bsums.data(), masked.data(), x.data(),
                                      ref_mean.data(), ref_var.data(), gamma.data(), double(M),
                                      M, C, kEps);
    CHECK_CLOSE(dx.data(), ref_dx.data(), n, (Tolerance{1e-4, 1e-3}), "dinp");
    CHECK_CLOSE(dgamma.data(), ref_dgamma.data(), C, kFp32, "dgamma (+=)");
    CHECK_CLOSE(dbeta.data(), ref_dbeta.data(), C, kFp32, "dbeta (+=)");

    // The fused pair is the unfused pair with ReLU passes around it, bit for bit.
    std::vector<float> y2(n), mean2(C), var2(C);
    sg::cpu::batchnorm_forward_train(y2.data(), mean2.data(), var2.data(), x.data(), gamma.data(),
                                     beta.data(), M, C, kEps);
    for (float& v : y2) v = v > 0.0f ? v : 0.0f;
    CHECK(y2 == y);
    std::vector<float> dx2(n), dgamma2(C, 1.0f), dbeta2(C, 2.0f);
    sg::cpu::batchnorm_backward(dx2.data(), dgamma2.data(), dbeta2.data(), masked.data(), x.data(),
                                mean.data(), var.data(), gamma.data(), M, C, kEps);
    CHECK(dx2 == dx);
    CHECK(dgamma2 == dgamma);
    CHECK(dbeta2 == dbeta);
  }
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
