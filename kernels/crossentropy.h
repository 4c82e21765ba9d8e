#pragma once
// Softmax + cross-entropy over a padded vocabulary. Columns [V, Vp) of the logits are padding:
// they are ignored by the softmax and receive zero gradient.

#include <cstdint>

namespace sg::cpu {

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

}  // namespace sg::cpu
