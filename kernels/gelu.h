#pragma once
// GELU, tanh approximation (GPT-2's "gelu_new"):
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))

#include <cstdint>

#include "kernels/cpu/isa.h"

namespace sg::cpu::inline SG_CPU_ISA {

void gelu_forward(float* out, const float* inp, long n);                  // (n)
// dinp = gelu'(inp) * dout, written (no zeroing first).
void gelu_backward(float* dinp, const float* inp, const float* dout, long n);  // dinp = (n)

// The same on bf16 storage: inputs read exactly, computed in fp32, outputs rounded to bf16
// (docs/bf16.md).
void gelu_forward_bf16(uint16_t* out, const uint16_t* inp, long n);
void gelu_backward_bf16(uint16_t* dinp, const uint16_t* inp, const uint16_t* dout, long n);

}  // namespace sg::cpu::SG_CPU_ISA
