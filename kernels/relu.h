#pragma once
// ReLU: out = max(inp, 0). Backward from the output: dinp = dout where out > 0, else 0.
// Written with = and safe in place (dinp may be dout, out may be inp): the networks that use
// it keep one tensor per activation.

namespace sg::cpu {

void relu_forward(float* out, const float* inp, long n);                     // (n)
void relu_backward(float* dinp, const float* out, const float* dout, long n);  // (n) =

}  // namespace sg::cpu
