#pragma once
// GPT-2 forward and backward on the CPU kernels, for a fixed micro-batch shape (B, T).
// Parameters and gradients are flat buffers owned by the caller (the trainer owns them so that
// replicas, ZeRO and checkpoints see plain ranges); activations are owned here and sized once.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "model/parameter_layout.h"

namespace sg {

// Floats of activation memory one micro-step of shape (B, T) keeps, including the gradient
// scratch. Used for allocation and by `plan`'s memory estimate, so both agree.
size_t gpt2_activation_floats(const GPT2Shape& shape, int B, int T);

class GPT2 {
 public:
  GPT2(const ParameterLayout& layout, int B, int T);

  int batch() const { return B_; }
  int seq_len() const { return T_; }

  // Runs the forward pass on inputs (B,T). With targets (B,T), also computes the per-position
  // losses and returns their mean; the softmax probabilities then replace the logits. Without
  // targets, returns 0 and logits() holds the (B,T,Vp) logits.
  // With fused_dloss != 0 (training), the logits' gradient for that dloss is computed in the same
  // pass as the loss (one trip through the (B,T,Vp) logits instead of two); backward() must then
  // be called with the same dloss.
  float forward(const float* params, const int32_t* inputs, const int32_t* targets,
                float fused_dloss = 0.0f);

  // Backward of the last forward (which must have had targets). Adds to grads (+=) the gradient
  // of dloss * sum(losses): pass dloss = 1 / (total positions in the optimizer step) so that
  // accumulating micro-steps and replicas gives the gradient of the mean loss.
  // on_ready(begin, end), when given, is called as soon as the gradients of the flat range
  // [begin, end) are final for this backward pass: ln_f first, then each block from the last to
  // the first, then the embeddings. Data parallelism starts reducing each range there.
  void backward(float* grads, const float* params, const int32_t* inputs,
                const int32_t* targets, float dloss,
                const std::function<void(size_t, size_t)>& on_ready = {});

  const float* logits() const { return logits_; }   // (B,T,Vp)
  const float* losses() const { return losses_; }   // (B*T)

 private:
  struct LayerActs {
    float *ln1, *ln1_mean, *ln1_rstd, *qkv, *atty, *att, *attproj, *residual2;
    float *ln2, *ln2_mean, *ln2_rstd, *fch, *fch_gelu, *fcproj, *residual3;
  };
  const ParameterLayout& layout_;
  GPT2Shape shape_;
  int B_, T_;
  std::vector<float> arena_;
  float* encoded_ = nullptr;
  std::vector<LayerActs> layers_;
  float *lnf_ = nullptr, *lnf_mean_ = nullptr, *lnf_rstd_ = nullptr;
  float *logits_ = nullptr, *losses_ = nullptr;
  // gradient scratch, reused by every layer
  float *dresidual_ = nullptr, *dln_ = nullptr, *dqkv_ = nullptr, *datty_ = nullptr,
        *datt_ = nullptr, *dfch_ = nullptr, *dfch_gelu_ = nullptr;
  bool have_probs_ = false;
  float fused_dloss_ = 0.0f;  // != 0: logits_ already holds the logits' gradient
};

}  // namespace sg
