#pragma once
// GELU, tanh approximation (GPT-2's "gelu_new"):
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))

#include "kernels/cpu/isa.h"

namespace sg::cpu::inline SG_CPU_ISA {

void gelu_forward(float* out, const float* inp, long n);                  // (n)
// dinp = gelu'(inp) * dout, written (no zeroing first).
void gelu_backward(float* dinp, const float* inp, const float* dout, long n);  // dinp = (n)

}  // namespace sg::cpu::SG_CPU_ISA
