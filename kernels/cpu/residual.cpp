// Residual add on the CPU. See kernels/residual.h for the contract.
#include "kernels/residual.h"

namespace sg::cpu {

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

}  // namespace sg::cpu
