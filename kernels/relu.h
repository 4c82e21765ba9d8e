#pragma once
// ReLU: out = max(inp, 0). Backward from the output: dinp = dout where out > 0, else 0.
// Written with = and safe in place (dinp may be dout, out may be inp): the networks that use
// it keep one tensor per activation. add_relu_inplace: out = max(out + in, 0), a residual sum
// and its ReLU in one pass (bit for bit add_inplace then relu_forward). add_relu_backward:
// acc = acc + g where out > 0, else 0: two gradients of a ReLU's output summed and taken
// through the ReLU in one pass (bit for bit add_inplace then relu_backward).

#include <cstdint>

#include "kernels/cpu/isa.h"

namespace sg::cpu::inline SG_CPU_ISA {

void relu_forward(float* out, const float* inp, long n);                     // (n)
void relu_backward(float* dinp, const float* out, const float* dout, long n);  // (n) =
void add_relu_inplace(float* out, const float* in, long n);                    // (n)
void add_relu_backward(float* acc, const float* g, const float* out, long n);  // (n)
// bf16 storage (docs/bf16.md): the activations (out, inp, in) bf16, the gradients fp32; the
// results are the fp32 kernels' on the same values, rounded where stored in bf16.
void relu_forward_bf16(uint16_t* out, const uint16_t* inp, long n);
void relu_backward_bf16(float* dinp, const uint16_t* out, const float* dout, long n);
void add_relu_inplace_bf16(uint16_t* out, const uint16_t* in, long n);
void add_relu_backward_bf16(float* acc, const float* g, const uint16_t* out, long n);

}  // namespace sg::cpu::SG_CPU_ISA
