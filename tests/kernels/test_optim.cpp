// AdamW against a hand-written float64 AdamW over three steps; global-norm clipping; and the
// thread-count independence of sum_of_squares.
#include <doctest/doctest.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/adamw.h"
#include "kernels/grad_norm.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/tolerance.h"

using namespace sg::test;

TEST_CASE("adamw_update matches float64 AdamW over three steps") {
  constexpr long n = 1029;
  const double lr = 1e-2, beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  for (const double weight_decay : {0.1, 0.0}) {
    CAPTURE(weight_decay);
    auto params = random_floats(n, 91);
    std::vector<float> m(n, 0.0f), v(n, 0.0f);
    auto ref_p = to_double(params);
    std::vector<double> ref_m(n, 0.0), ref_v(n, 0.0);
    for (int step = 1; step <= 3; ++step) {
      const auto grads = random_floats(n, 92 + step, -0.1f, 0.1f);
      sg::cpu::adamw_update(params.data(), m.data(), v.data(), grads.data(), n, float(lr),
                            float(beta1), float(beta2), float(eps), float(weight_decay), step);
      for (long i = 0; i < n; ++i) {
        const double g = grads[i];
        ref_m[i] = beta1 * ref_m[i] + (1 - beta1) * g;
        ref_v[i] = beta2 * ref_v[i] + (1 - beta2) * g * g;
        const double m_hat = ref_m[i] / (1 - std::pow(beta1, step));
        const double v_hat = ref_v[i] / (1 - std::pow(beta2, step));
        ref_p[i] -= lr * (m_hat / (std::sqrt(v_hat) + eps) + weight_decay * ref_p[i]);
      }
    }
    CHECK_CLOSE(params.data(), ref_p.data(), n, kFp32, "params");
    CHECK_CLOSE(m.data(), ref_m.data(), n, kFp32, "m");
    CHECK_CLOSE(v.data(), ref_v.data(), n, kFp32, "v");
  }
}

TEST_CASE("adamw first step moves each parameter by lr * sign(g) plus decay") {
  // At t = 1 the bias-corrected update is g / (|g| + eps): a wrong correction shows directly.
  std::vector<float> params = {1.0f, -2.0f}, m(2, 0.0f), v(2, 0.0f);
  const std::vector<float> grads = {0.5f, -1e-3f};
  sg::cpu::adamw_update(params.data(), m.data(), v.data(), grads.data(), 2, 0.1f, 0.9f, 0.999f,
                        1e-8f, 0.01f, 1);
  const double expected[] = {1.0 - 0.1 * (1.0 + 0.01 * 1.0), -2.0 - 0.1 * (-1.0 + 0.01 * -2.0)};
  CHECK_CLOSE(params.data(), expected, 2, kFp32, "params");
}

TEST_CASE("sum_of_squares is exact to float64 rounding and identical for every thread count") {
  constexpr long n = 100003;  // several summation blocks and a ragged tail
  const auto x = random_floats(n, 101, -3.0f, 3.0f);
  double ref = 0.0;
  for (float xi : x) ref += double{xi} * xi;
  const int saved_threads = omp_get_max_threads();
  std::vector<double> sums;
  for (int threads : {1, 2, 3, 4}) {
    omp_set_num_threads(threads);
    sums.push_back(sg::cpu::sum_of_squares(x.data(), n));
  }
  omp_set_num_threads(saved_threads);
  CHECK_CLOSE(&sums[0], &ref, 1, (Tolerance{0.0, 1e-12}), "sum of squares");
  for (double s : sums) CHECK(s == sums[0]);  // bitwise
  // The order is the documented one whatever the kernel interleaves: blocks of 2^14 floats,
  // each in 8 lanes (element i to lane i % 8, the lanes then added in order), the blocks' sums
  // added in order. (This TU and the baseline kernel copy both compile without FMA.)
  double ordered = 0.0;
  for (long b = 0; b < n; b += 1 << 14) {
    double lanes[8] = {};
    const long end = std::min(n, b + (1 << 14));
    long i = b;
    for (; i + 8 <= end; i += 8) {
      for (int l = 0; l < 8; ++l) lanes[l] += double{x[i + l]} * x[i + l];
    }
    for (; i < end; ++i) lanes[0] += double{x[i]} * x[i];
    double block = 0.0;
    for (double lane : lanes) block += lane;
    ordered += block;
  }
  CHECK(sums[0] == ordered);
}

TEST_CASE("clip_by_global_norm scales to max_norm above it and leaves x alone below") {
  const auto x0 = random_floats(5000, 102);
  const double norm = std::sqrt(sg::cpu::sum_of_squares(x0.data(), 5000));
  SUBCASE("above") {
    auto x = x0;
    const float max_norm = 1.0f;
    REQUIRE(norm > max_norm);
    const float scale = sg::cpu::clip_by_global_norm(x.data(), 5000, norm, max_norm);
    const double expected_scale = max_norm / (norm + 1e-6);
    CHECK_CLOSE(&scale, &expected_scale, 1, kFp32, "scale");
    std::vector<double> expected(5000);
    for (int i = 0; i < 5000; ++i) expected[i] = x0[i] * expected_scale;
    CHECK_CLOSE(x.data(), expected.data(), x.size(), kFp32, "x");
    const double clipped_norm = std::sqrt(sg::cpu::sum_of_squares(x.data(), 5000));
    CHECK(std::fabs(clipped_norm - max_norm) < 1e-5);
  }
  SUBCASE("above, with a norm small enough that the 1e-6 in the denominator shows") {
    auto x = x0;
    for (float& xi : x) xi *= 1e-4f;
    const double small_norm = std::sqrt(sg::cpu::sum_of_squares(x.data(), 5000));
    const float max_norm = float(small_norm / 4);
    const float scale = sg::cpu::clip_by_global_norm(x.data(), 5000, small_norm, max_norm);
    const double expected_scale = max_norm / (small_norm + 1e-6);  // torch's clip_grad_norm_
    CHECK_CLOSE(&scale, &expected_scale, 1, kFp32, "scale");
  }
  SUBCASE("below") {
    auto x = x0;
    const float scale = sg::cpu::clip_by_global_norm(x.data(), 5000, norm, float(norm * 2));
    CHECK(scale == 1.0f);
    CHECK(x == x0);
  }
}
