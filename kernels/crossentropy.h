#pragma once
// Softmax + cross-entropy over a padded vocabulary. Columns [V, Vp) of the logits are padding:
// they are ignored by the softmax and receive zero gradient.

#include <cstdint>

#include "kernels/cpu/isa.h"

namespace sg::cpu::inline SG_CPU_ISA {

// losses[n] = -log softmax(logits[n, 0:V])[targets[n]]; probs[n, 0:V] saved, probs[n, V:Vp] = 0.
// probs may alias logits (computed in place).
void crossentropy_forward(float* losses,          // (N)
                          float* probs,           // (N,Vp)
                          const float* logits,    // (N,Vp)
                          const int32_t* targets, // (N) in [0, V)
                          int N, int V, int Vp);

// dlogits = dloss * (probs - onehot(targets)) on columns [0,V), 0 on padding.
// Written with = (not +=): the logits gradient is consumed immediately by the LM head backward.
// dlogits may alias probs.
void crossentropy_backward(float* dlogits,         // (N,Vp)
                           const float* probs,     // (N,Vp)
                           const int32_t* targets, // (N)
                           float dloss,            // d(total loss)/d(losses[n]), e.g. 1/(B*T*accum)
                           int N, int V, int Vp);

// Training's fused form: losses as crossentropy_forward, and dlogits (which may alias logits)
// as crossentropy_backward would give from those probabilities, in one pass over each row.
void crossentropy_forward_backward(float* losses,          // (N)
                                   float* dlogits,         // (N,Vp)
                                   const float* logits,    // (N,Vp)
                                   const int32_t* targets, // (N)
                                   float dloss, int N, int V, int Vp);

// The same three on logits stored in bf16 (docs/bf16.md): read exactly, the softmax and the loss
// in fp32, the probabilities or the gradient rounded to bf16 on the store (in place allowed).
// losses stay fp32.
void crossentropy_forward_bf16(float* losses, uint16_t* probs, const uint16_t* logits,
                               const int32_t* targets, int N, int V, int Vp);
void crossentropy_backward_bf16(uint16_t* dlogits, const uint16_t* probs, const int32_t* targets,
                                float dloss, int N, int V, int Vp);
void crossentropy_forward_backward_bf16(float* losses, uint16_t* dlogits, const uint16_t* logits,
                                        const int32_t* targets, float dloss, int N, int V,
                                        int Vp);

// Vocabulary-parallel cross-entropy ("vp"; Megatron-style tensor parallelism). logits_local is
// (N, Vl): columns [v0, v0+Vl) of the padded vocabulary. Global columns >= V are padding: they
// are ignored and get zero gradient (a rank may hold only padding). The caller combines the
// per-row partial results across ranks between the calls: all-reduce MAX of row_max, then
// all-reduce SUM of sum_exp and of target_logit. Rows are independent; within a row the order
// is fixed, so results do not depend on the thread count.

// row_max[n] = max over the real local columns (global index < V) of logits[n,:]; -INFINITY when
// the rank holds no real column.
void crossentropy_vp_max(float* row_max,        // (N)
                         const float* logits,   // (N,Vl)
                         int N, int Vl, int v0, int V);

// With row_max the global row maxima: sum_exp[n] = sum over real local columns of
// exp(logit - row_max[n]); target_logit[n] = logits[n, targets[n]-v0] if the target is local,
// else 0.
void crossentropy_vp_sums(float* sum_exp,          // (N)
                          float* target_logit,     // (N)
                          const float* logits,     // (N,Vl)
                          const float* row_max,    // (N) global
                          const int32_t* targets,  // (N) global ids in [0, V)
                          int N, int Vl, int v0, int V);

// With the global reductions: losses[n] = log(sum_exp[n]) - (target_logit[n] - row_max[n]).
void crossentropy_vp_losses(float* losses,             // (N)
                            const float* row_max,      // (N) global
                            const float* sum_exp,      // (N) global
                            const float* target_logit, // (N) global
                            int N);

// dlogits (may alias logits) = dloss * (exp(logit - row_max)/sum_exp - onehot(target)) on real
// local columns, 0 on padding columns. Written with = .
void crossentropy_vp_backward(float* dlogits,          // (N,Vl)
                              const float* logits,     // (N,Vl)
                              const float* row_max,    // (N) global
                              const float* sum_exp,    // (N) global
                              const int32_t* targets,  // (N) global ids in [0, V)
                              float dloss, int N, int Vl, int v0, int V);

}  // namespace sg::cpu::SG_CPU_ISA
