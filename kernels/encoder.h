#pragma once
// Token + position embedding.
//   out[b,t,:] = wte[inp[b,t],:] + wpe[t,:]
// Backward scatters dout into the two tables (+=). Rows of dwte are touched in a fixed order,
// so the result is deterministic for a given thread count.
#include <cstdint>

namespace sg::cpu {

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

}  // namespace sg::cpu
