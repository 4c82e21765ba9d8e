#pragma once
// SwiGLU, Llama's MLP activation: each row of inp holds the gate and up projections side by side,
// [gate (I) | up (I)], from one matmul; out = silu(gate) * up, silu(g) = g / (1 + exp(-g)).

#include "kernels/cpu/isa.h"

namespace sg::cpu::inline SG_CPU_ISA {

void swiglu_forward(float* out,        // (N,I)
                    const float* inp,  // (N,2I)
                    long N, int I);

// dinp = [dout * up * silu'(gate) | dout * silu(gate)], written (no zeroing first);
// silu'(g) = s (1 + g (1 - s)), s = sigmoid(g).
void swiglu_backward(float* dinp,        // (N,2I)
                     const float* inp,   // (N,2I)
                     const float* dout,  // (N,I)
                     long N, int I);

}  // namespace sg::cpu::SG_CPU_ISA
