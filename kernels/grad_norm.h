#pragma once
// The global gradient norm (clipping as torch.nn.utils.clip_grad_norm_ scales the gradient by
// max_norm / (norm + 1e-6) when norm > max_norm: src/optim/optimizer.cpp passes that factor to
// the update kernels, kernels/adamw.h and sgd.h, which apply it as they read the gradient).

#include "kernels/cpu/isa.h"

namespace sg::cpu::inline SG_CPU_ISA {

// Sum of squares in double precision, with a fixed blocked summation order so the result is
// identical for every thread count.
double sum_of_squares(const float* x, long n);

}  // namespace sg::cpu::SG_CPU_ISA
