#pragma once
// Batch normalisation over the rows of an (M, C) matrix: NHWC activations with M = N*H*W.
// Training normalises with the batch mean and biased variance; the running statistics follow
// PyTorch: running = (1 - momentum) running + momentum * batch, with the unbiased variance.
// Evaluation is batchnorm_normalize with the running statistics.
//   out = (x - mean) / sqrt(var + eps) * gamma + beta
// The fused pair (batchnorm_forward_train / batchnorm_backward) is what a replica runs alone.
// The split functions compute the same with the per-channel sums exposed, so synchronised batch
// norm can all-reduce them over the replicas between the calls. Sums are in double.
//   dx = gamma / sqrt(var + eps) * (dy - sum(dy)/count - xhat * sum(dy * xhat)/count)

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/isa.h"

// Hand-written loops (kernels/cpu/batchnorm.cpp), one copy per instruction-set variant.
namespace sg::cpu::inline SG_CPU_ISA {

// The fused pair (nothing written for M or C of 0): the split functions' passes below with the
// sums kept inside (the forward reads inp twice, the backward inp and dout twice). With `relu`
// the ReLU that follows is fused in: out = max(0, batch norm of inp), and the backward takes dout
// as the gradient of that output and masks it where the batch norm of inp is not positive,
// recomputed from inp, gamma and beta exactly as the forward computed it (so beta must be the
// forward's; unused without `relu`).
// A non-null `residual` is added before the ReLU: out = max(0, batch norm of inp + residual),
// bit for bit the batch norm then add_relu_inplace; its backward is the pair's without `relu`
// (the ReLU's mask then depends on the residual: add_relu_backward applies it).
// The fused pair with `relu` is bit for bit the unfused pair with ReLU passes around it.
void batchnorm_forward_train(float* out,          // (M,C) =
                             float* mean,         // (C) batch mean, saved for backward
                             float* var,          // (C) batch variance (biased), saved
                             const float* inp,    // (M,C)
                             const float* gamma,  // (C)
                             const float* beta,   // (C)
                             const float* residual,  // (M,C) added before the ReLU, or null
                             long M, int C, float eps, bool relu);
void batchnorm_backward(float* dinp,         // (M,C) =
                        float* dgamma,       // (C) +=
                        float* dbeta,        // (C) +=
                        const float* dout,   // (M,C)
                        const float* inp,    // (M,C)
                        const float* mean,   // (C)
                        const float* var,    // (C)
                        const float* gamma,  // (C)
                        const float* beta,   // (C) the forward's (read with `relu` only)
                        long M, int C, float eps, bool relu);
// A residual block's last batch norm (or its shortcut's) with the gradient of its output still
// to be taken through the ReLU before the next block: dout = dout + g where out > 0, else 0
// (add_relu_backward, kernels/relu.h; `out` the ReLU's output), made inside the backward's
// first pass, then that pass and the second as batchnorm_backward without `relu`. Bit for bit
// the two calls; one pass over the (M,C) gradient less.
void batchnorm_add_relu_backward(float* dinp,         // (M,C) =
                                 float* dgamma,       // (C) +=
                                 float* dbeta,        // (C) +=
                                 float* dout,         // (M,C) in: one gradient; out: the sum's
                                 const float* g,      // (M,C) the other gradient
                                 const float* out,    // (M,C) the ReLU's output
                                 const float* inp,    // (M,C)
                                 const float* mean,   // (C)
                                 const float* var,    // (C)
                                 const float* gamma,  // (C)
                                 long M, int C, float eps);

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


// The same on bf16 storage (train.precision: bf16, docs/bf16.md): the activations (inp, out,
// residual, the ReLU's out, dinp) are bf16, loaded exactly and computed as above in fp32 and
// double, each result rounded to bf16 on the store; dout, g and everything per channel fp32.
// So each is the fp32 kernel's result on the same values, rounded (bit for bit), except the
// forward with a residual: the batch norm is rounded before the sum and the sum again, bit for
// bit the unfused pair in bf16 (batchnorm_forward_train_bf16, then add_relu_inplace_bf16).
void batchnorm_forward_train_bf16(uint16_t* out, float* mean, float* var, const uint16_t* inp,
                                  const float* gamma, const float* beta, const uint16_t* residual,
                                  long M, int C, float eps, bool relu);
void batchnorm_backward_bf16(uint16_t* dinp, float* dgamma, float* dbeta, const float* dout,
                             const uint16_t* inp, const float* mean, const float* var,
                             const float* gamma, const float* beta, long M, int C, float eps,
                             bool relu);
void batchnorm_add_relu_backward_bf16(uint16_t* dinp, float* dgamma, float* dbeta, float* dout,
                                      const float* g, const uint16_t* out, const uint16_t* inp,
                                      const float* mean, const float* var, const float* gamma,
                                      long M, int C, float eps);
void batchnorm_sums_bf16(double* sums, const uint16_t* inp, long M, int C);
void batchnorm_normalize_bf16(uint16_t* out, const uint16_t* inp, const float* mean,
                              const float* var, const float* gamma, const float* beta, long M,
                              int C, float eps);
void batchnorm_backward_sums_bf16(double* sums, float* dgamma, float* dbeta, const float* dout,
                                  const uint16_t* inp, const float* mean, const float* var,
                                  long M, int C, float eps);
void batchnorm_backward_input_bf16(uint16_t* dinp, const double* sums, const float* dout,
                                   const uint16_t* inp, const float* mean, const float* var,
                                   const float* gamma, double count, long M, int C, float eps);

}  // namespace sg::cpu::SG_CPU_ISA
