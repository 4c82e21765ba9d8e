#pragma once
// Residual add: out = a + b. Backward: da += dout, db += dout.
// add_inplace: out += in. add_bias: out[n,:] += bias (a row-parallel layer's bias, added after
// the tensor-parallel sum). scale_inplace: x *= factor.

#include "kernels/cpu/isa.h"

namespace sg::cpu::inline SG_CPU_ISA {

void residual_forward(float* out, const float* a, const float* b, long n);    // (n)
void residual_backward(float* da, float* db, const float* dout, long n);      // (n) +=
void add_inplace(float* out, const float* in, long n);                        // (n) +=
void scale_inplace(float* x, float factor, long n);                           // (n) *=
void add_bias(float* out,          // (N,C) +=
              const float* bias,   // (C)
              long N, long C);

}  // namespace sg::cpu::SG_CPU_ISA
