#pragma once
// ReLU: out = max(inp, 0). Backward from the output: dinp = dout where out > 0, else 0.
// Written with = and safe in place (dinp may be dout, out may be inp): the networks that use
// it keep one tensor per activation. add_relu_inplace: out = max(out + in, 0), a residual sum
// and its ReLU in one pass (bit for bit add_inplace then relu_forward).

#include "kernels/cpu/isa.h"

namespace sg::cpu::inline SG_CPU_ISA {

void relu_forward(float* out, const float* inp, long n);                     // (n)
void relu_backward(float* dinp, const float* out, const float* dout, long n);  // (n) =
void add_relu_inplace(float* out, const float* in, long n);                    // (n)

}  // namespace sg::cpu::SG_CPU_ISA
