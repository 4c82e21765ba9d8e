// ReLU on the CPU. See kernels/relu.h for the contract.
#include "kernels/relu.h"

namespace sg::cpu::inline SG_CPU_ISA {

void relu_forward(float* out, const float* inp, long n) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
}

void relu_backward(float* dinp, const float* out, const float* dout, long n) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) dinp[i] = out[i] > 0.0f ? dout[i] : 0.0f;
}

void add_relu_inplace(float* out, const float* in, long n) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) {
    const float sum = out[i] + in[i];
    out[i] = sum > 0.0f ? sum : 0.0f;
  }
}

void add_relu_backward(float* acc, const float* g, const float* out, long n) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) acc[i] = out[i] > 0.0f ? acc[i] + g[i] : 0.0f;
}

}  // namespace sg::cpu::SG_CPU_ISA
