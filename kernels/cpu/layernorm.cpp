// LayerNorm on the CPU. See kernels/layernorm.h for the contract.
#include "kernels/layernorm.h"

#include <cmath>
#include <cstddef>
#include <vector>

#include <omp.h>

namespace sg::cpu {

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                       const float* weight, const float* bias, int N, int C) {
  constexpr float eps = 1e-5f;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* x = inp + static_cast<long>(n) * C;  // (C)
    float* y = out + static_cast<long>(n) * C;        // (C)
    // Two passes (mean, then centred squares), accumulated in double: a row whose mean is large
    // against its spread (outlier channels of the residual stream) would otherwise lose digits
    // of the mean in a float sum. The row is in L1 by the second pass; the cost is small.
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < C; ++c) sum += x[c];
    // The mean as a float pair m + m_low: x - m is exact for x near m, so (x - m) - m_low keeps
    // the digits that rounding the mean to float would lose.
    const double mean_exact = sum / C;
    const float m = static_cast<float>(mean_exact);
    const float m_low = static_cast<float>(mean_exact - m);
    double sum_sq = 0.0;
#pragma omp simd reduction(+ : sum_sq)
    for (int c = 0; c < C; ++c) {
      const double d = static_cast<double>(x[c]) - mean_exact;
      sum_sq += d * d;
    }
    const float s = static_cast<float>(1.0 / std::sqrt(sum_sq / C + eps));
#pragma omp simd
    for (int c = 0; c < C; ++c) y[c] = ((x[c] - m) - m_low) * s * weight[c] + bias[c];
    mean[n] = m;
    rstd[n] = s;
  }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean,
                        const float* rstd, int N, int C) {
  // dweight and dbias are sums over rows: each thread sums its own static block of rows into a
  // private buffer, and the buffers are added in thread order afterwards. Deterministic for a
  // fixed thread count, no atomics.
  const int max_threads = omp_get_max_threads();
  std::vector<float> partial(static_cast<std::size_t>(max_threads) * 2 * C, 0.0f);
  int used_threads = 1;
#pragma omp parallel
  {
    const int tid = omp_get_thread_num();
#pragma omp single
    used_threads = omp_get_num_threads();
    float* dweight_t = partial.data() + static_cast<std::size_t>(tid) * 2 * C;  // (C)
    float* dbias_t = dweight_t + C;                                         // (C)
#pragma omp for schedule(static)
    for (int n = 0; n < N; ++n) {
      const float* dy = dout + static_cast<long>(n) * C;  // (C)
      const float* x = inp + static_cast<long>(n) * C;    // (C)
      float* dx = dinp + static_cast<long>(n) * C;        // (C)
      const float m = mean[n];
      const float s = rstd[n];
      // dx = s * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)), dnorm = dy * weight.
      float sum_dnorm = 0.0f;
      float sum_dnorm_norm = 0.0f;
#pragma omp simd reduction(+ : sum_dnorm, sum_dnorm_norm)
      for (int c = 0; c < C; ++c) {
        const float norm = (x[c] - m) * s;
        const float dnorm = dy[c] * weight[c];
        sum_dnorm += dnorm;
        sum_dnorm_norm += dnorm * norm;
      }
      const float mean_dnorm = sum_dnorm / static_cast<float>(C);
      const float mean_dnorm_norm = sum_dnorm_norm / static_cast<float>(C);
#pragma omp simd
      for (int c = 0; c < C; ++c) {
        const float norm = (x[c] - m) * s;
        const float dnorm = dy[c] * weight[c];
        dx[c] += s * (dnorm - mean_dnorm - norm * mean_dnorm_norm);
        dbias_t[c] += dy[c];
        dweight_t[c] += norm * dy[c];
      }
    }
  }
  for (int t = 0; t < used_threads; ++t) {
    const float* dweight_t = partial.data() + static_cast<std::size_t>(t) * 2 * C;
    const float* dbias_t = dweight_t + C;
#pragma omp simd
    for (int c = 0; c < C; ++c) {
      dweight[c] += dweight_t[c];
      dbias[c] += dbias_t[c];
    }
  }
}

}  // namespace sg::cpu
