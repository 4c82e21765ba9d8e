#pragma once
// Token + position embedding.
//   out[b,t,:] = wte[inp[b,t],:] + wpe[t,:]
// Backward scatters dout into the two tables (+=). Each element is summed over the positions in
// (b,t) order, so the result is deterministic and independent of the thread count.
#include <cstdint>

#include "kernels/cpu/isa.h"

namespace sg::cpu::inline SG_CPU_ISA {

void encoder_forward(float* out,          // (B,T,C)
                     const int32_t* inp,  // (B,T) token ids in [0, V)
                     const float* wte,    // (Vp,C)
                     const float* wpe,    // (maxT,C)
                     int B, int T, int C);

void encoder_backward(float* dwte,         // (Vp,C)   +=
                      float* dwpe,         // (maxT,C) +=
                      const float* dout,   // (B,T,C)
                      const int32_t* inp,  // (B,T)
                      int B, int T, int C);

// Vocabulary-parallel forms (tensor parallelism: this rank holds rows [v0, v0+Vl) of wte).
//
// Vocabulary-parallel token embedding: this rank holds rows [v0, v0+Vl) of wte (wte_local is (Vl,C)).
// out[n,:] = wte_local[inp[n]-v0,:] when v0 <= inp[n] < v0+Vl, else 0. Positions are not added: the
// caller sums out over the tensor-parallel ranks, then calls position_add.
// Exactly one rank contributes a nonzero term per element, so that sum followed by position_add
// is bitwise equal to encoder_forward.
void embedding_forward_vocab_range(float* out,               // (N,C), written with =
                                   const int32_t* inp,       // (N) token ids in [0, V)
                                   const float* wte_local,   // (Vl,C)
                                   int N, int C, int v0, int Vl);

// out[b,t,:] += wpe[t,:]
void position_add(float* out,        // (B,T,C) +=
                  const float* wpe,  // (maxT,C)
                  int B, int T, int C);

// As encoder_backward, but only tokens in [v0, v0+Vl) touch dwte_local (row inp-v0); dwpe gets
// every position, or is null for a model without a position table (Llama). Same deterministic, thread-count-independent summation order as
// encoder_backward, so each rank's rows are bitwise those encoder_backward gives.
// encoder_backward is this with v0 = 0, Vl = INT_MAX.
void encoder_backward_vocab_range(float* dwte_local,   // (Vl,C)   +=
                                  float* dwpe,         // (maxT,C) +=, or null
                                  const float* dout,   // (B,T,C)
                                  const int32_t* inp,  // (B,T)
                                  int B, int T, int C, int v0, int Vl);

}  // namespace sg::cpu::SG_CPU_ISA
