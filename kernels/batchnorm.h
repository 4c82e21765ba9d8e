#pragma once
// Batch normalisation over the rows of an (M, C) matrix: NHWC activations with M = N*H*W.
// Training normalises with the batch mean and biased variance; the running statistics follow
// PyTorch: running = (1 - momentum) running + momentum * batch, with the unbiased variance.
// Evaluation is batchnorm_normalize with the running statistics.
//   out = (x - mean) / sqrt(var + eps) * gamma + beta
// The fused pair (batchnorm_forward_train / batchnorm_backward) is what a replica runs alone
// (oneDNN on the CPU). The split functions compute the same with the per-channel sums exposed,
// so synchronised batch norm can all-reduce them over the replicas between the calls; they are
// also the reference the fused pair is tested against. Sums are in double.
//   dx = gamma / sqrt(var + eps) * (dy - sum(dy)/count - xhat * sum(dy * xhat)/count)

#include <cstddef>

#include "kernels/cpu/isa.h"

// oneDNN's (kernels/cpu/batchnorm_dnnl.cpp), compiled once: oneDNN picks its own instructions.
namespace sg::cpu {

void batchnorm_forward_train(float* out,          // (M,C) =
                             float* mean,         // (C) batch mean, saved for backward
                             float* var,          // (C) batch variance (biased), saved
                             const float* inp,    // (M,C)
                             const float* gamma,  // (C)
                             const float* beta,   // (C)
                             long M, int C, float eps);
void batchnorm_backward(float* dinp,         // (M,C) =
                        float* dgamma,       // (C) +=
                        float* dbeta,        // (C) +=
                        const float* dout,   // (M,C)
                        const float* inp,    // (M,C)
                        const float* mean,   // (C)
                        const float* var,    // (C)
                        const float* gamma,  // (C)
                        long M, int C, float eps);

// The same pair with the ReLU that follows the batch norm fused in (oneDNN's fuse_norm_relu):
// out = max(0, batch norm of inp), and the backward takes dout as the gradient of that output.
// The forward writes a mask for the backward to `relu_mask` (batchnorm_relu_mask_bytes(M, C)
// bytes, oneDNN's workspace: 1 bit per element with its jit kernels); it saves the separate
// ReLU passes (measured on ResNet-50's 33 batch-norm + ReLU pairs, 2 AVX2 threads: 68 ms a step
// separate, 50 ms fused).
size_t batchnorm_relu_mask_bytes(long M, int C);
void batchnorm_relu_forward_train(float* out,                // (M,C) =
                                  float* mean, float* var,   // (C) =, saved for backward
                                  unsigned char* relu_mask,  // = (see above)
                                  const float* inp, const float* gamma, const float* beta,
                                  long M, int C, float eps);
void batchnorm_relu_backward(float* dinp,                     // (M,C) =
                             float* dgamma, float* dbeta,     // (C) +=
                             const float* dout,               // (M,C) gradient of relu(bn)
                             const float* inp,                // (M,C)
                             const unsigned char* relu_mask,  // the forward's
                             const float* mean, const float* var, const float* gamma, long M,
                             int C, float eps);

}  // namespace sg::cpu

// Hand-written loops (kernels/cpu/batchnorm.cpp), one copy per instruction-set variant.
namespace sg::cpu::inline SG_CPU_ISA {

// sums[c] = sum_m inp[m,c], sums[C+c] = sum_m inp[m,c]^2.
void batchnorm_sums(double* sums,  // (2C) =
                    const float* inp, long M, int C);
// mean = sums[:C] / count, var = sums[C:] / count - mean^2 (biased, clamped at 0).
void batchnorm_stats(float* mean, float* var,  // (C) =
                     const double* sums, double count, int C);
void batchnorm_normalize(float* out,  // (M,C) =
                         const float* inp, const float* mean, const float* var,
                         const float* gamma, const float* beta, long M, int C, float eps);
// sums[c] = sum_m dout[m,c], sums[C+c] = sum_m dout[m,c] * xhat[m,c]; this replica's parts of
// the parameter gradients: dbeta += sums[:C], dgamma += sums[C:].
void batchnorm_backward_sums(double* sums,  // (2C) =
                             float* dgamma, float* dbeta,  // (C) +=
                             const float* dout, const float* inp, const float* mean,
                             const float* var, long M, int C, float eps);
// dinp from the (possibly all-reduced) sums over `count` rows in all.
void batchnorm_backward_input(float* dinp,  // (M,C) =
                              const double* sums, const float* dout, const float* inp,
                              const float* mean, const float* var, const float* gamma,
                              double count, long M, int C, float eps);
void batchnorm_update_running(float* running_mean, float* running_var,  // (C) updated
                              const float* mean, const float* var,      // (C) batch, biased
                              double count, int C, float momentum);

}  // namespace sg::cpu::SG_CPU_ISA
