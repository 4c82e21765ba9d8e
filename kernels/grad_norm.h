#pragma once
// Global-norm gradient clipping (as torch.nn.utils.clip_grad_norm_).

#include "kernels/cpu/isa.h"

namespace sg::cpu::inline SG_CPU_ISA {

// Sum of squares in double precision, with a fixed blocked summation order so the result is
// identical for every thread count.
double sum_of_squares(const float* x, long n);

// If norm > max_norm, scales x by max_norm / (norm + 1e-6) and returns that factor; else 1.
float clip_by_global_norm(float* x, long n, double norm, float max_norm);

}  // namespace sg::cpu::SG_CPU_ISA
