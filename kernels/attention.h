#pragma once
// Causal multi-head self-attention core (no projections).
// qkv holds q, k, v concatenated along channels: qkv[b,t,0:C]=q, [C:2C]=k, [2C:3C]=v,
// head h uses channels [h*hs, (h+1)*hs) of each, hs = C / NH. Scale 1/sqrt(hs).
// Blocked and fused (kernels/cpu/attention.cpp): the T x T probabilities are never stored; the
// forward saves each row's log-sum-exp of the scaled scores, from which the backward recomputes
// them (the same state as the CUDA flash kernels keep).

#include <cstdint>

#include "kernels/cpu/isa.h"

namespace sg::cpu::inline SG_CPU_ISA {

void attention_forward(float* out,        // (B,T,C)
                       float* lse,        // (B,NH,T) log sum_j<=t exp(q_t k_j / sqrt(hs)), saved
                       const float* qkv,  // (B,T,3C)
                       int B, int T, int C, int NH);

// Needs no scratch: the band buffers are per thread.
void attention_backward(float* dqkv,        // (B,T,3C) +=
                        const float* dout,  // (B,T,C)
                        const float* qkv,   // (B,T,3C)
                        const float* lse,   // (B,NH,T) from attention_forward
                        int B, int T, int C, int NH);

// The same on bf16 storage (docs/bf16.md): qkv, out and dout bf16 (each head widened to fp32,
// the fp32 kernels above, out rounded); lse and dqkv fp32.
void attention_forward_bf16(uint16_t* out, float* lse, const uint16_t* qkv, int B, int T, int C,
                            int NH);
void attention_backward_bf16(float* dqkv, const uint16_t* dout, const uint16_t* qkv,
                             const float* lse, int B, int T, int C, int NH);

}  // namespace sg::cpu::SG_CPU_ISA
