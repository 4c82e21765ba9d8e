#pragma once
// AdamW (Loshchilov & Hutter): decoupled weight decay, bias-corrected moments.
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   p -= lr * ( (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + weight_decay * p )
// Matches torch.optim.AdamW. The caller passes weight_decay = 0 for tensors that are not decayed
// (biases, layernorm, and any 1-D tensor). g is grads[i] * grad_scale, rounded to float as a
// separate pass scaling the gradient would round it: global-norm clipping's factor rides along
// with the update instead of costing a pass over the gradient of its own (1: g = grads[i]).

#include "kernels/cpu/isa.h"
#include "kernels/update_range.h"

namespace sg::cpu::inline SG_CPU_ISA {

void adamw_update(float* params,       // (n)
                  float* m,            // (n) first moment
                  float* v,            // (n) second moment
                  const float* grads,  // (n)
                  long n, float lr, float beta1, float beta2, float eps, float weight_decay,
                  int step,            // 1-based step count t for the bias correction
                  float grad_scale);

// The same update over several ranges of the same arrays, each with its own weight decay, in one
// parallel region (as sgd_update_ranges): the same bits as one adamw_update per range.
void adamw_update_ranges(float* params, float* m, float* v, const float* grads,
                         const UpdateRange* ranges, int count, float lr, float beta1, float beta2,
                         float eps, int step, float grad_scale);

}  // namespace sg::cpu::SG_CPU_ISA
