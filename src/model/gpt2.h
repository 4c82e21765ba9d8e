#pragma once
// GPT-2 forward and backward on a backend's ops, for a fixed micro-batch shape (B, T): one
// pipeline stage of the model (StageModel, model_family.h). Parameters and gradients are flat
// buffers owned by the caller (the trainer owns them so that replicas, ZeRO and checkpoints see
// plain ranges); activations are owned here, allocated once from the backend.
//
// The layout may be a shard (parameter_layout.h): then this object runs one pipeline stage's
// blocks with this tensor rank's heads, MLP columns and vocabulary rows, and the tensor-parallel
// collectives go over `tp`. A stage keeps `slots` activation sets, one per micro-batch in flight
// in the pipeline schedule. Its batch is (tokens, targets), both (B,T) int32.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/gpt2_family.h"
#include "model/lm_loss.h"
#include "model/model_family.h"
#include "parallel/tensor_group.h"

namespace sg {

class GPT2 final : public StageModel {
 public:
  // tp may be nullptr when the layout is not tensor-split. recompute: what the backward
  // recomputes instead of keeping (model_family.h); the gradients are bitwise the same.
  GPT2(const GPT2Shape& shape, const ParameterLayout& layout, int B, int T, int slots = 1,
       TensorGroup* tp = nullptr, Backend& backend = cpu_backend(),
       Recompute recompute = Recompute::None);

  int batch() const { return B_; }
  int seq_len() const { return T_; }
  // Floats of one residual stream (B,T,C): what pipeline stages send each other.
  size_t stream_floats() const { return static_cast<size_t>(B_) * T_ * shape_.n_embd; }

  // Runs the forward pass on inputs (B,T). With targets (B,T), also computes the per-position
  // losses and returns their mean; the softmax probabilities then replace the logits (unsplit
  // vocabulary; a vocabulary-split model keeps its logits and the row statistics). Without
  // targets, returns 0 and logits() holds the (B,T,Vp) logits.
  // With fused_dloss != 0 (training), the logits' gradient for that dloss is computed in the same
  // pass as the loss (one trip through the (B,T,Vp) logits instead of two); backward() must then
  // be called with the same dloss.
  float forward(const float* params, const int32_t* inputs, const int32_t* targets,
                float fused_dloss = 0.0f) {
    return forward_stage(0, params, inputs, targets, fused_dloss);
  }

  // Backward of the last forward (which must have had targets). Adds to grads (+=) the gradient
  // of dloss * sum(losses): pass dloss = 1 / (total positions in the optimizer step) so that
  // accumulating micro-steps and replicas gives the gradient of the mean loss.
  // on_ready(begin, end), when given, is called as soon as the gradients of the flat range
  // [begin, end) are final for this backward pass: ln_f first, then each block from the last to
  // the first, then the embeddings. Data parallelism starts reducing each range there.
  void backward(float* grads, const float* params, const int32_t* inputs,
                const int32_t* targets, float dloss, const OnReady& on_ready = {}) {
    backward_stage(0, grads, params, inputs, targets, dloss, on_ready);
  }

  // Pipeline stages. A stage other than the first reads its input residual stream (B,T,C) from
  // stage_input(slot), which the caller fills; inputs (token ids) are used by the first stage
  // only, targets by the last. Returns the mean loss on the last stage, 0 elsewhere.
  float forward_stage(int slot, const float* params, const int32_t* inputs,
                      const int32_t* targets, float fused_dloss);
  // Backward of the micro-batch in `slot`. A stage other than the last first needs the gradient
  // of its output in residual_grad(); afterwards residual_grad() holds the gradient of its input.
  void backward_stage(int slot, float* grads, const float* params, const int32_t* inputs,
                      const int32_t* targets, float dloss, const OnReady& on_ready = {});
  float* residual_grad() { return dresidual_; }

  // StageModel: the batch is (tokens, targets).
  float forward(int slot, const float* params, float* buffers, const MicroBatch& batch,
                const ForwardOptions& options) override;
  void backward(int slot, float* grads, const float* params, const MicroBatch& batch, float dloss,
                const OnReady& on_ready) override;
  // Under bf16 storage, casts params into the bf16 working copy the products multiply (once per
  // step); forward refuses params it was not called for.
  void prepare_weights(const float* params) override;
  size_t input_floats() const override { return stream_floats(); }
  size_t output_floats() const override { return stream_floats(); }
  float* stage_input(int slot) override { return slots_[static_cast<size_t>(slot)].input; }
  const float* stage_output(int slot) const override;
  float* output_grad() override { return dresidual_; }
  const float* input_grad() const override { return dresidual_; }

  // Backend memory, of slot 0.
  ConstAct logits() const { return slots_[0].logits; }  // (B,T,Vp/T), fp32 or bf16 (docs/bf16.md)
  const float* losses() const { return slots_[0].losses; }  // (B*T)

  // The activations of one layer and of one micro-batch in flight (pointers into the arena).
  // Under recompute some pointers are shared by every layer and slot. The Act ones are stored in
  // the backend's activation_dtype() (bf16 under train.precision: bf16 where the backend has
  // it, docs/bf16.md): the inputs of the products, attention and GELU. The residual stream, the
  // products that are summed into it (and over tensor ranks) and the statistics stay fp32.
  struct LayerActs {
    Act ln1, qkv, atty, ln2, fch, fch_gelu;
    float *ln1_mean = nullptr, *ln1_rstd = nullptr, *att = nullptr, *attproj = nullptr,
          *residual2 = nullptr;
    float *ln2_mean = nullptr, *ln2_rstd = nullptr, *fcproj = nullptr, *residual3 = nullptr;
  };
  struct Slot {
    float* input = nullptr;  // embedding output on the first stage, else the received stream
    std::vector<LayerActs> layers;
    Act lnf;
    float *lnf_mean = nullptr, *lnf_rstd = nullptr;
    Act logits;  // in the storage type, fp32 when the vocabulary is split over tensor ranks
    float* losses = nullptr;
    float* ce_stats = nullptr;  // vocabulary-parallel: row max, exp-sum, target logit (3N)
    bool have_probs = false;
    float fused_dloss = 0.0f;  // != 0: logits already holds the logits' gradient
  };
  // The activations' gradients: the same types as the activations (dqkv, summed into by
  // attention, and dln, summed over tensor ranks, stay fp32).
  struct Scratch {
    float *dresidual = nullptr, *dln = nullptr, *dqkv = nullptr, *datt = nullptr;
    Act datty, dfch, dfch_gelu;
  };
  // Places the activations of `slots` micro-batches and the gradient scratch from `base` on
  // (null: only counts), the Act ones in `storage`; returns the bytes used. The one layout both
  // the model and gpt2_activation_bytes (`plan`) use.
  static size_t lay_out(void* base, const GPT2Shape& shape, const ParameterLayout& layout, int B,
                        int T, int slots, const AttentionStorage& att, Recompute recompute,
                        DType storage, std::vector<Slot>* slots_out, Scratch* scratch_out);

 private:
  void tp_sum(float* data, size_t n);
  void zero(float* data, size_t n) { backend_.zero(data, n); }
  // What a product multiplies for the parameter at w (in params): w itself, or its bf16 copy.
  ConstAct product_weight(const float* params, const float* w) const;
  void block_forward(Slot& s, int l, const float* params, const float* x);
  void block_backward(Slot& s, int l, float* grads, const float* params, const float* x);
  void logits_backward(Slot& s, const int32_t* targets, float dloss);

  const ParameterLayout& layout_;
  GPT2Shape shape_;
  GPT2Split split_;
  int B_, T_;
  TensorGroup* tp_;
  Backend& backend_;
  Recompute recompute_;
  int tensors_;  // tensor-parallel degree
  size_t wte_ = 0, wpe_ = 0, lnfw_ = 0, lnfb_ = 0;  // offsets in the flat buffer
  size_t lnf_index_ = 0;                             // index of ln_f.weight in tensors()
  Buffer arena_;
  Buffer weights16_;                     // the bf16 working copy (bf16 storage), else empty
  const float* weights_of_ = nullptr;    // the params weights16_ was cast from
  std::vector<Slot> slots_;
  // gradient scratch, reused by every layer and slot
  float *dresidual_ = nullptr, *dln_ = nullptr, *dqkv_ = nullptr, *datt_ = nullptr;
  Act datty_, dfch_, dfch_gelu_;
  LmLoss loss_;
  std::vector<float> losses_host_;  // the per-position losses, summed on the host
};

}  // namespace sg
