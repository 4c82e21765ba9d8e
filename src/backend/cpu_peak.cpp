#include "backend/cpu_peak.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "kernels/matmul_bf16.h"

namespace sg {
namespace {

// 1536 is large enough for OpenBLAS to reach its asymptotic rate on every core and small enough
// (7 GFLOP a call, ~0.2 s on one AVX2 core) for a few repetitions in the budget.
constexpr int kN = 1536;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Square operands with values in [-1, 1): denormals or zeros would make the timing
// unrepresentative. Times one call at a time: OpenBLAS's sgemm, or (bf16) the CPU backend's bf16
// product, operand rounding included (kernels/matmul_bf16.h).
class SgemmProbe {
 public:
  SgemmProbe(int threads, bool bf16 = false)
      : a_(size_t(kN) * kN), b_(a_.size()), c_(a_.size()), bf16_(bf16) {
    if (threads > 0) openblas_set_num_threads(threads);
    if (threads > 0 && bf16) omp_set_num_threads(threads);
    uint32_t state = 12345;
    auto next = [&state] {
      state = state * 1664525u + 1013904223u;
      return float(state >> 8) / float(1u << 23) - 1.0f;
    };
    for (auto& x : a_) x = next();
    for (auto& x : b_) x = next();
  }
  // One call's rate in FLOP/s.
  double call() {
    const auto t0 = std::chrono::steady_clock::now();
    if (bf16_) {
      cpu::matmul_forward_bf16(c_.data(), a_.data(), b_.data(), nullptr, kN, kN, kN);
      return 2.0 * double(kN) * kN * kN / seconds_since(t0);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kN, kN, kN, 1.0f, a_.data(), kN,
                b_.data(), kN, 0.0f, c_.data(), kN);
    return 2.0 * double(kN) * kN * kN / seconds_since(t0);
  }

 private:
  std::vector<float> a_, b_, c_;
  bool bf16_;
};

double best_rate(SgemmProbe& probe) {
  constexpr double time_budget_s = 0.5;
  constexpr int min_repetitions = 2;  // the first call also pays for page faults and thread start
  constexpr int max_repetitions = 20;
  const auto start = std::chrono::steady_clock::now();
  double best = 0;
  for (int rep = 0; rep < max_repetitions; ++rep) {
    best = std::max(best, probe.call());
    if (rep + 1 >= min_repetitions && seconds_since(start) >= time_budget_s) break;
  }
  return best;
}

}  // namespace

double measure_sgemm_peak_flops(int threads) {
  SgemmProbe probe(threads);
  return best_rate(probe);
}

double measure_bf16_peak_flops(int threads) {
  SgemmProbe probe(threads, true);
  return best_rate(probe);
}

double measure_sgemm_sustained_flops(int threads, double seconds) {
  SgemmProbe probe(threads);
  probe.call();  // page faults and thread start
  std::vector<double> rates;
  const auto start = std::chrono::steady_clock::now();
  do {
    rates.push_back(probe.call());
  } while (seconds_since(start) < seconds || rates.size() < 3);
  std::nth_element(rates.begin(), rates.begin() + long(rates.size() / 2), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace sg
