#pragma once
// The language-model loss of the text decoders (GPT-2, Llama): cross-entropy over logits whose
// vocabulary may be split over the tensor ranks (Megatron's vocabulary-parallel loss: only
// per-row statistics cross the tensor group, never the logits), and its gradient, fused into
// the forward pass or not.
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "parallel/tensor_group.h"

namespace sg {

struct LmLoss {
  Backend* backend = nullptr;
  TensorGroup* tp = nullptr;  // the tensor group when the vocabulary is split, else nullptr
  int N = 0;                  // rows (positions)
  int V = 0;                  // real vocabulary
  int Vl = 0;                 // this rank's logit columns (the padded vocabulary / T)
  int v0 = 0;                 // this rank's first vocabulary row

  // Per-row losses from the logits; with fused_dloss != 0, the logits become their gradient for
  // that dloss. Unsplit: the logits become the probabilities. stats: 3N floats (split only).
  void forward(float* losses, Act logits, float* stats, const int32_t* targets,
               float fused_dloss) const;
  // The logits' gradient in place of what forward left there (unfused forwards only).
  void backward(Act logits, const float* stats, const int32_t* targets, float dloss) const;
  // The mean of the N per-row losses, summed on the host in a fixed order (deterministic).
  float mean(const float* losses, std::vector<float>& host) const;
};

}  // namespace sg
