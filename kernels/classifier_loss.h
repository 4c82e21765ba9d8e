#pragma once
// Softmax cross-entropy over K classes with label smoothing s (as torch's
// cross_entropy(label_smoothing=s)): the target distribution is (1 - s) onehot(label) + s / K.
//   loss[n] = -sum_k target[n,k] log softmax(logits[n])[k]
//   dlogits[n] = dloss * (softmax(logits[n]) - target[n])
// Rows are independent; each row is computed in a fixed order (thread-count independent).
#include <cstdint>

#include "kernels/cpu/isa.h"

namespace sg::cpu::inline SG_CPU_ISA {

// dlogits may alias logits, or be null (evaluation: losses only).
void classifier_loss_forward_backward(float* losses,          // (N) =
                                      float* dlogits,         // (N,K) = or nullptr
                                      const float* logits,    // (N,K)
                                      const int32_t* labels,  // (N) in [0, K)
                                      float smoothing, float dloss, int N, int K);

// Rows whose label is the arg max (top-1) or among the 5 largest logits (top-5; ties counted
// against: a label ties with another logit only if it is strictly above the fifth largest
// other). Counts are added to *top1 and *top5.
void classifier_correct(int64_t* top1, int64_t* top5,  // += counts
                        const float* logits,           // (N,K)
                        const int32_t* labels,         // (N)
                        int N, int K);

}  // namespace sg::cpu::SG_CPU_ISA
