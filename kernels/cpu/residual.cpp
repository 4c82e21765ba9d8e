// Residual add on the CPU. See kernels/residual.h for the contract.
#include "kernels/residual.h"

namespace sg::cpu::inline SG_CPU_ISA {

void residual_forward(float* out, const float* a, const float* b, long n) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void residual_backward(float* da, float* db, const float* dout, long n) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
}

void add_inplace(float* out, const float* in, long n) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) out[i] += in[i];
}

void scale_inplace(float* x, float factor, long n) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) x[i] *= factor;
}

void add_bias(float* out, const float* bias, long N, long C) {
#pragma omp parallel for schedule(static)
  for (long n = 0; n < N; ++n) {
    float* row = out + n * C;
#pragma omp simd
    for (long c = 0; c < C; ++c) row[c] += bias[c];
  }
}

}  // namespace sg::cpu::SG_CPU_ISA
