#pragma once
// Shared helpers for the kernel tests: seeded random inputs, float64 copies, and a central
// finite-difference gradient of a float64 scalar function (used to check the float64 analytic
// references, against which the float32 kernels are then compared).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "tensor/dtype.h"

namespace sg::test {

inline std::vector<float> random_floats(std::size_t n, std::uint64_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> x(n);
  for (float& xi : x) xi = dist(rng);
  return x;
}

inline std::vector<std::int32_t> random_ints(std::size_t n, std::uint64_t seed, int lo, int hi) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int32_t> dist(lo, hi);
  std::vector<std::int32_t> x(n);
  for (std::int32_t& xi : x) xi = dist(rng);
  return x;
}

// Each value rounded to the nearest bf16 (sg::float_to_bf16), kept in fp32.
inline std::vector<float> bf16_rounded(const std::vector<float>& v) {
  std::vector<float> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = sg::bf16_to_float(sg::float_to_bf16(v[i]));
  return r;
}

// Each value as bf16 bits (sg::float_to_bf16), and bf16 bits back to fp32 (exact).
inline std::vector<std::uint16_t> bf16_bits(const std::vector<float>& v) {
  std::vector<std::uint16_t> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = sg::float_to_bf16(v[i]);
  return r;
}
inline std::vector<float> from_bf16_bits(const std::vector<std::uint16_t>& v) {
  std::vector<float> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = sg::bf16_to_float(v[i]);
  return r;
}

inline std::vector<double> to_double(const std::vector<float>& x) {
  return std::vector<double>(x.begin(), x.end());
}

// a + b elementwise: the expected value of an accumulating (+=) backward output.
inline std::vector<double> plus(const std::vector<float>& a, const std::vector<double>& b) {
  std::vector<double> sum(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) sum[i] = a[i] + b[i];
  return sum;
}

// d loss / d x[i] by central differences, x perturbed in place and restored.
inline std::vector<double> finite_difference(const std::function<double()>& loss,
                                             std::vector<double>& x, double h = 1e-6) {
  std::vector<double> grad(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = loss();
    x[i] = saved - h;
    const double down = loss();
    x[i] = saved;
    grad[i] = (up - down) / (2.0 * h);
  }
  return grad;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace sg::test
