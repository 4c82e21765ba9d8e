#pragma once
// LayerNorm over the last dimension, eps = 1e-5 (GPT-2 / PyTorch default).
// mean and rstd are saved for the backward pass.

#include <cstdint>

#include "kernels/cpu/isa.h"

namespace sg::cpu::inline SG_CPU_ISA {

void layernorm_forward(float* out,          // (N,C)
                       float* mean,         // (N)
                       float* rstd,         // (N)
                       const float* inp,    // (N,C)
                       const float* weight, // (C)
                       const float* bias,   // (C)
                       int N, int C);

// residual = a + b, then out = layernorm(residual): a residual connection and the norm after it
// in one pass, bit for bit residual_forward followed by layernorm_forward.
void residual_layernorm_forward(float* residual,     // (N,C) = a + b
                                float* out,          // (N,C)
                                float* mean,         // (N)
                                float* rstd,         // (N)
                                const float* a,      // (N,C)
                                const float* b,      // (N,C)
                                const float* weight, // (C)
                                const float* bias,   // (C)
                                int N, int C);

// The same with out stored in bf16: each element the fp32 result rounded (docs/bf16.md).
void layernorm_forward_bf16(uint16_t* out, float* mean, float* rstd, const float* inp,
                            const float* weight, const float* bias, int N, int C);
void residual_layernorm_forward_bf16(float* residual, uint16_t* out, float* mean, float* rstd,
                                     const float* a, const float* b, const float* weight,
                                     const float* bias, int N, int C);

void layernorm_backward(float* dinp,          // (N,C) +=
                        float* dweight,       // (C)   +=
                        float* dbias,         // (C)   +=
                        const float* dout,    // (N,C)
                        const float* inp,     // (N,C)
                        const float* weight,  // (C)
                        const float* mean,    // (N)
                        const float* rstd,    // (N)
                        int N, int C);

}  // namespace sg::cpu::SG_CPU_ISA
