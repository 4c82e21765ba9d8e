#pragma once
// SGD with momentum and (L2) weight decay, as torch.optim.SGD with dampening 0:
//   g = grad * grad_scale + weight_decay * p   (grad_scale: global-norm clipping, as adamw.h;
//                                               grad_scale 1 gives the unscaled update's bits)
//   buf = momentum * buf + g            (buf starts at 0, so the first step sets buf = g)
//   p -= lr * (nesterov ? g + momentum * buf : buf)
// The caller passes weight_decay = 0 for tensors that are not decayed (batch norm, biases).

#include "kernels/cpu/isa.h"
#include "kernels/update_range.h"

namespace sg::cpu::inline SG_CPU_ISA {

void sgd_update(float* params,           // (n)
                float* momentum_buffer,  // (n)
                const float* grads,      // (n)
                long n, float lr, float momentum, float weight_decay, bool nesterov,
                float grad_scale);

// The same update over several ranges of the same arrays, each with its own weight decay, in one
// parallel region (the threads split the ranges' elements evenly): the same bits as one
// sgd_update per range, which is elementwise.
void sgd_update_ranges(float* params, float* momentum_buffer, const float* grads,
                       const UpdateRange* ranges, int count, float lr, float momentum,
                       bool nesterov, float grad_scale);

}  // namespace sg::cpu::SG_CPU_ISA
