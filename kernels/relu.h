#pragma once
// ReLU: out = max(inp, 0). Backward from the output: dinp = dout where out > 0, else 0.
// Written with = and safe in place (dinp may be dout, out may be inp): the networks that use
// it keep one tensor per activation.

#include "kernels/cpu/isa.h"

namespace sg::cpu::inline SG_CPU_ISA {

void relu_forward(float* out, const float* inp, long n);                     // (n)
void relu_backward(float* dinp, const float* out, const float* dout, long n);  // (n) =

}  // namespace sg::cpu::SG_CPU_ISA
