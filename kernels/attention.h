#pragma once
// Causal multi-head self-attention core (no projections).
// qkv holds q, k, v concatenated along channels: qkv[b,t,0:C]=q, [C:2C]=k, [2C:3C]=v,
// head h uses channels [h*hs, (h+1)*hs) of each, hs = C / NH. Scale 1/sqrt(hs).
// att saves the softmax probabilities (entries above the diagonal are 0).

#include "kernels/cpu/isa.h"

namespace sg::cpu::inline SG_CPU_ISA {

void attention_forward(float* out,        // (B,T,C)
                       float* att,        // (B,NH,T,T) softmax probabilities, saved
                       const float* qkv,  // (B,T,3C)
                       int B, int T, int C, int NH);

// scratch must hold B*NH*T*T floats (gradient of the probabilities); contents on entry ignored.
void attention_backward(float* dqkv,        // (B,T,3C) +=
                        float* scratch,     // (B,NH,T,T) work space
                        const float* dout,  // (B,T,C)
                        const float* qkv,   // (B,T,3C)
                        const float* att,   // (B,NH,T,T)
                        int B, int T, int C, int NH);

}  // namespace sg::cpu::SG_CPU_ISA
