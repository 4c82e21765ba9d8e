#pragma once
// RMSNorm over the last dimension (Llama's, as transformers' LlamaRMSNorm):
//   rstd = 1 / sqrt(mean(x^2) + eps),  out = weight * (x * rstd)
// rstd is saved for the backward pass.

#include "kernels/cpu/isa.h"

namespace sg::cpu::inline SG_CPU_ISA {

void rmsnorm_forward(float* out,           // (N,C)
                     float* rstd,          // (N)
                     const float* inp,     // (N,C)
                     const float* weight,  // (C)
                     int N, int C, float eps);

// With xhat = inp * rstd and g = dout * weight:
//   dinp += rstd * (g - xhat * mean(g * xhat)),  dweight += sum over rows of dout * xhat
// (dweight summed column by column in row order: the same bits at any thread count).
void rmsnorm_backward(float* dinp,          // (N,C) +=
                      float* dweight,       // (C)   +=
                      const float* dout,    // (N,C)
                      const float* inp,     // (N,C)
                      const float* weight,  // (C)
                      const float* rstd,    // (N)
                      int N, int C);

}  // namespace sg::cpu::SG_CPU_ISA
