#pragma once
// LayerNorm over the last dimension, eps = 1e-5 (GPT-2 / PyTorch default).
// mean and rstd are saved for the backward pass.

#include "kernels/cpu/isa.h"

namespace sg::cpu::inline SG_CPU_ISA {

void layernorm_forward(float* out,          // (N,C)
                       float* mean,         // (N)
                       float* rstd,         // (N)
                       const float* inp,    // (N,C)
                       const float* weight, // (C)
                       const float* bias,   // (C)
                       int N, int C);

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
