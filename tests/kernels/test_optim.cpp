// AdamW against a hand-written float64 AdamW over three steps; the update kernels' gradient scale
// (global-norm clipping); and the thread-count independence of sum_of_squares.
#include <doctest/doctest.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/adamw.h"
#include "kernels/grad_norm.h"
#include "kernels/sgd.h"
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
                            float(beta1), float(beta2), float(eps), float(weight_decay), step,
                            1.0f);
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
                        1e-8f, 0.01f, 1, 1.0f);
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

TEST_CASE("the update kernels read each gradient times grad_scale (global-norm clipping)") {
  constexpr long n = 5000;
  const float scale = 0.3f;  // not a power of two: the product rounds
  auto scaled = random_floats(n, 102, -0.1f, 0.1f);
  const auto grads = scaled;
  for (float& g : scaled) g *= scale;  // what a separate clipping pass would leave
  SUBCASE("AdamW: the bits of the update on the scaled gradient") {
    auto p1 = random_floats(n, 103), p2 = p1;
    std::vector<float> m1(n, 0.0f), v1(n, 0.0f), m2(n, 0.0f), v2(n, 0.0f);
    for (int step = 1; step <= 3; ++step) {
      sg::cpu::adamw_update(p1.data(), m1.data(), v1.data(), grads.data(), n, 1e-2f, 0.9f, 0.95f,
                            1e-8f, 0.1f, step, scale);
      sg::cpu::adamw_update(p2.data(), m2.data(), v2.data(), scaled.data(), n, 1e-2f, 0.9f, 0.95f,
                            1e-8f, 0.1f, step, 1.0f);
    }
    CHECK(p1 == p2);
    CHECK(m1 == m2);
    CHECK(v1 == v2);
  }
  SUBCASE("SGD: the update on the scaled gradient (a fused multiply-add may round once less)") {
    auto p1 = random_floats(n, 104), p2 = p1;
    std::vector<float> b1(n, 0.0f), b2(n, 0.0f);
    for (int step = 1; step <= 3; ++step) {
      sg::cpu::sgd_update(p1.data(), b1.data(), grads.data(), n, 0.1f, 0.9f, 1e-2f, true, scale);
      sg::cpu::sgd_update(p2.data(), b2.data(), scaled.data(), n, 0.1f, 0.9f, 1e-2f, true, 1.0f);
    }
    const auto p2_64 = to_double(p2), b2_64 = to_double(b2);
    CHECK_CLOSE(p1.data(), p2_64.data(), n, kFp32, "params");
    CHECK_CLOSE(b1.data(), b2_64.data(), n, kFp32, "momentum");
  }
}

TEST_CASE("the update kernels over several ranges: one call per range's bits, at any thread count") {
  // Ragged ranges with gaps between them (left alone), empty ones, and alternating decays; the
  // threads' shares end inside ranges as well as between them.
  const std::vector<sg::UpdateRange> ranges = {{0, 17, 0.1f},     {17, 18, 0.0f},   {18, 18, 0.1f},
                                               {20, 1043, 0.1f},  {1043, 1060, 0.0f},
                                               {1100, 5199, 0.05f}, {5199, 5203, 0.0f}};
  constexpr long n = 5210;
  const auto grads = random_floats(n, 105, -0.1f, 0.1f);
  const auto start = random_floats(n, 106);
  const int saved_threads = omp_get_max_threads();
  for (const float scale : {1.0f, 0.3f}) {
    // The reference: one call per range on one thread.
    omp_set_num_threads(1);
    auto p_ref = start, m_ref = std::vector<float>(n, 0.5f), v_ref = std::vector<float>(n, 0.25f);
    auto q_ref = start, b_ref = std::vector<float>(n, 0.5f);
    for (int step = 1; step <= 2; ++step) {
      for (const auto& r : ranges) {
        const long k = r.end - r.begin;
        sg::cpu::adamw_update(p_ref.data() + r.begin, m_ref.data() + r.begin,
                              v_ref.data() + r.begin, grads.data() + r.begin, k, 1e-2f, 0.9f,
                              0.95f, 1e-8f, r.weight_decay, step, scale);
        sg::cpu::sgd_update(q_ref.data() + r.begin, b_ref.data() + r.begin,
                            grads.data() + r.begin, k, 0.1f, 0.9f, r.weight_decay, true, scale);
      }
    }
    for (const int threads : {1, 2, 3, 7}) {
      CAPTURE(threads);
      CAPTURE(scale);
      omp_set_num_threads(threads);
      auto p = start, m = std::vector<float>(n, 0.5f), v = std::vector<float>(n, 0.25f);
      auto q = start, b = std::vector<float>(n, 0.5f);
      for (int step = 1; step <= 2; ++step) {
        sg::cpu::adamw_update_ranges(p.data(), m.data(), v.data(), grads.data(), ranges.data(),
                                     static_cast<int>(ranges.size()), 1e-2f, 0.9f, 0.95f, 1e-8f,
                                     step, scale);
        sg::cpu::sgd_update_ranges(q.data(), b.data(), grads.data(), ranges.data(),
                                   static_cast<int>(ranges.size()), 0.1f, 0.9f, true, scale);
      }
      CHECK(p == p_ref);
      CHECK(m == m_ref);
      CHECK(v == v_ref);
      CHECK(q == q_ref);
      CHECK(b == b_ref);
      // The gaps between the ranges are untouched (and differ from the updated elements).
      for (const long i : {18L, 19L, 1060L, 1099L, 5203L, 5209L}) {
        CHECK(p[i] == start[i]);
        CHECK(q[i] == start[i]);
        CHECK(m[i] == 0.5f);
      }
      CHECK(p[17] != start[17]);
    }
  }
  omp_set_num_threads(saved_threads);
}
