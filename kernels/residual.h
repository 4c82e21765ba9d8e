#pragma once
// Residual add: out = a + b. Backward: da += dout, db += dout.

namespace sg::cpu {

void residual_forward(float* out, const float* a, const float* b, long n);    // (n)
void residual_backward(float* da, float* db, const float* dout, long n);      // (n) +=

}  // namespace sg::cpu
