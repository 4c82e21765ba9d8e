// Batch normalisation on the CPU: the split functions (the reference, and what synchronised
// batch norm runs) in plain loops over an (M, C) matrix. See kernels/batchnorm.h. The fused
// forward/backward go through oneDNN (batchnorm_dnnl.cpp).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/batchnorm.h"

namespace sg::cpu::inline SG_CPU_ISA {
namespace {

// Column sums of f(m, c) over the rows, in double. Each thread sums a fixed band of rows in
// order; the bands' partial sums are then added in band order, so the result is the same for
// every thread count (the bands are fixed by M, not by the threads).
template <class F>
void column_sums(double* out, long M, int C, F f) {
  constexpr long kBand = 256;
  const long bands = (M + kBand - 1) / kBand;
  std::vector<double> partial(static_cast<size_t>(bands) * 2 * C, 0.0);
#pragma omp parallel for schedule(static)
  for (long b = 0; b < bands; ++b) {
    double* acc = partial.data() + b * 2 * C;
    const long m1 = std::min(M, (b + 1) * kBand);
    for (long m = b * kBand; m < m1; ++m) f(acc, m);
  }
  std::fill(out, out + 2 * C, 0.0);
  for (long b = 0; b < bands; ++b) {
    const double* acc = partial.data() + b * 2 * C;
    for (int c = 0; c < 2 * C; ++c) out[c] += acc[c];
  }
}

}  // namespace

void batchnorm_sums(double* sums, const float* inp, long M, int C) {
  column_sums(sums, M, C, [&](double* acc, long m) {
    const float* x = inp + m * C;
    for (int c = 0; c < C; ++c) {
      const double v = x[c];
      acc[c] += v;
      acc[C + c] += v * v;
    }
  });
}

void batchnorm_stats(float* mean, float* var, const double* sums, double count, int C) {
  for (int c = 0; c < C; ++c) {
    const double mu = sums[c] / count;
    mean[c] = static_cast<float>(mu);
    var[c] = static_cast<float>(std::max(0.0, sums[C + c] / count - mu * mu));
  }
}

void batchnorm_normalize(float* out, const float* inp, const float* mean, const float* var,
                         const float* gamma, const float* beta, long M, int C, float eps) {
  std::vector<float> scale(static_cast<size_t>(C)), shift(static_cast<size_t>(C));
  for (int c = 0; c < C; ++c) {
    const float rstd = 1.0f / std::sqrt(var[c] + eps);
    scale[static_cast<size_t>(c)] = gamma[c] * rstd;
    shift[static_cast<size_t>(c)] = beta[c] - mean[c] * gamma[c] * rstd;
  }
  const float *sc = scale.data(), *sh = shift.data();
#pragma omp parallel for schedule(static)
  for (long m = 0; m < M; ++m) {
    const float* x = inp + m * C;
    float* y = out + m * C;
#pragma omp simd
    for (int c = 0; c < C; ++c) y[c] = x[c] * sc[c] + sh[c];
  }
}

void batchnorm_backward_sums(double* sums, float* dgamma, float* dbeta, const float* dout,
                             const float* inp, const float* mean, const float* var, long M,
                             int C, float eps) {
  std::vector<double> rstd(static_cast<size_t>(C));
  for (int c = 0; c < C; ++c) rstd[static_cast<size_t>(c)] = 1.0 / std::sqrt(double{var[c]} + eps);
  column_sums(sums, M, C, [&](double* acc, long m) {
    const float* x = inp + m * C;
    const float* dy = dout + m * C;
    for (int c = 0; c < C; ++c) {
      acc[c] += dy[c];
      acc[C + c] += dy[c] * (x[c] - double{mean[c]}) * rstd[static_cast<size_t>(c)];
    }
  });
  for (int c = 0; c < C; ++c) {
    dbeta[c] += static_cast<float>(sums[c]);
    dgamma[c] += static_cast<float>(sums[C + c]);
  }
}

void batchnorm_backward_input(float* dinp, const double* sums, const float* dout,
                              const float* inp, const float* mean, const float* var,
                              const float* gamma, double count, long M, int C, float eps) {
  // dx = gamma rstd (dy - mean_dy - xhat mean_dy_xhat) = a dy + b x + d per channel.
  std::vector<float> a(static_cast<size_t>(C)), b(static_cast<size_t>(C)), d(static_cast<size_t>(C));
  for (int c = 0; c < C; ++c) {
    const double rstd = 1.0 / std::sqrt(double{var[c]} + eps);
    const double g = double{gamma[c]} * rstd;
    const double mean_dy = sums[c] / count, mean_dy_xhat = sums[C + c] / count;
    a[static_cast<size_t>(c)] = static_cast<float>(g);
    b[static_cast<size_t>(c)] = static_cast<float>(-g * mean_dy_xhat * rstd);
    d[static_cast<size_t>(c)] =
        static_cast<float>(-g * mean_dy + g * mean_dy_xhat * rstd * double{mean[c]});
  }
  const float *pa = a.data(), *pb = b.data(), *pd = d.data();
#pragma omp parallel for schedule(static)
  for (long m = 0; m < M; ++m) {
    const float* x = inp + m * C;
    const float* dy = dout + m * C;
    float* dx = dinp + m * C;
#pragma omp simd
    for (int c = 0; c < C; ++c) dx[c] = pa[c] * dy[c] + pb[c] * x[c] + pd[c];
  }
}

void batchnorm_update_running(float* running_mean, float* running_var, const float* mean,
                              const float* var, double count, int C, float momentum) {
  const double unbias = count > 1 ? count / (count - 1) : 1.0;
  for (int c = 0; c < C; ++c) {
    running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * mean[c];
    running_var[c] = (1.0f - momentum) * running_var[c] +
                     momentum * static_cast<float>(double{var[c]} * unbias);
  }
}

}  // namespace sg::cpu::SG_CPU_ISA
