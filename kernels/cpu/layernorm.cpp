// LayerNorm on the CPU. See kernels/layernorm.h for the contract.
#include "kernels/layernorm.h"

#include <algorithm>

#include <cmath>
#include <cstddef>
#include <vector>

#include <omp.h>

#include "kernels/cpu/bf16.h"

namespace sg::cpu::inline SG_CPU_ISA {

namespace {

// One row: y = (x - mean) * rstd * weight + bias, returning mean and rstd. Out is float, or
// uint16_t for bf16 storage (the fp32 result rounded).
template <class Out>
inline void layernorm_row(Out* y, float* mean, float* rstd, const float* x, const float* weight,
                          const float* bias, int C) {
  constexpr float eps = 1e-5f;
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
  for (int c = 0; c < C; ++c) detail::store(y + c, ((x[c] - m) - m_low) * s * weight[c] + bias[c]);
  *mean = m;
  *rstd = s;
}

template <class Out>
void layernorm_forward_as(Out* out, float* mean, float* rstd, const float* inp,
                          const float* weight, const float* bias, int N, int C) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const long row = static_cast<long>(n) * C;
    layernorm_row(out + row, mean + n, rstd + n, inp + row, weight, bias, C);
  }
}

template <class Out>
void residual_layernorm_forward_as(float* residual, Out* out, float* mean, float* rstd,
                                   const float* a, const float* b, const float* weight,
                                   const float* bias, int N, int C) {
  // Each row's sum is written and normalised while it is in L1: one pass over the residual
  // stream instead of two. The sum is rounded to float before the norm reads it, as the two
  // ops' would be, so the bits are theirs.
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const long row = static_cast<long>(n) * C;
    float* r = residual + row;
#pragma omp simd
    for (int c = 0; c < C; ++c) r[c] = a[row + c] + b[row + c];
    layernorm_row(out + row, mean + n, rstd + n, r, weight, bias, C);
  }
}

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                       const float* weight, const float* bias, int N, int C) {
  layernorm_forward_as(out, mean, rstd, inp, weight, bias, N, C);
}
void layernorm_forward_bf16(uint16_t* out, float* mean, float* rstd, const float* inp,
                            const float* weight, const float* bias, int N, int C) {
  layernorm_forward_as(out, mean, rstd, inp, weight, bias, N, C);
}
void residual_layernorm_forward(float* residual, float* out, float* mean, float* rstd,
                                const float* a, const float* b, const float* weight,
                                const float* bias, int N, int C) {
  residual_layernorm_forward_as(residual, out, mean, rstd, a, b, weight, bias, N, C);
}
void residual_layernorm_forward_bf16(float* residual, uint16_t* out, float* mean, float* rstd,
                                     const float* a, const float* b, const float* weight,
                                     const float* bias, int N, int C) {
  residual_layernorm_forward_as(residual, out, mean, rstd, a, b, weight, bias, N, C);
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean,
                        const float* rstd, int N, int C) {
  // dweight and dbias are sums over rows: rows are cut into fixed blocks of kRowsPerBlock, each
  // block summed into its own buffer, and the buffers added in block order afterwards. The
  // blocks do not depend on the thread count, so neither do the bits (deterministic mode runs
  // the same replica on different thread counts); no atomics.
  constexpr int kRowsPerBlock = 32;
  const int blocks = (N + kRowsPerBlock - 1) / kRowsPerBlock;
  std::vector<float> partial(static_cast<std::size_t>(blocks) * 2 * C, 0.0f);
#pragma omp parallel for schedule(static)
  for (int block = 0; block < blocks; ++block) {
    float* dweight_b = partial.data() + static_cast<std::size_t>(block) * 2 * C;  // (C)
    float* dbias_b = dweight_b + C;                                             // (C)
    const int n_end = std::min(N, (block + 1) * kRowsPerBlock);
    for (int n = block * kRowsPerBlock; n < n_end; ++n) {
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
        dbias_b[c] += dy[c];
        dweight_b[c] += norm * dy[c];
      }
    }
  }
  for (int block = 0; block < blocks; ++block) {
    const float* dweight_b = partial.data() + static_cast<std::size_t>(block) * 2 * C;
    const float* dbias_b = dweight_b + C;
#pragma omp simd
    for (int c = 0; c < C; ++c) {
      dweight[c] += dweight_b[c];
      dbias[c] += dbias_b[c];
    }
  }
}

}  // namespace sg::cpu::SG_CPU_ISA
