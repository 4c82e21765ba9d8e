#pragma once
// Llama forward and backward on a backend's ops, for a fixed micro-batch shape (B, T): one
// pipeline stage of the model (StageModel, model_family.h), built like GPT-2's (gpt2.h): flat
// parameters and gradients owned by the caller, activations in one arena, `slots` micro-batches
// in flight, tensor-parallel sums over `tp`. Its batch is (tokens, targets), both (B,T) int32.
//
// A layer, with this rank's NH query and NKV key/value heads (HS channels each) and I hidden
// units (the products' weights are adjacent tensors, llama_family.h):
//   h = rmsnorm(x);  qkv = h [q_proj|k_proj|v_proj]^T;  packed = rope_qkv(qkv)  (q|k|v, NH each)
//   x2 = x + attention(packed) o_proj^T                   (summed over tensor ranks)
//   h2 = rmsnorm(x2); out = x2 + swiglu(h2 [gate|up]^T) down_proj^T
// Activations are fp32 (Llama's kernels take fp32).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/llama_family.h"
#include "model/lm_loss.h"
#include "model/model_family.h"
#include "parallel/tensor_group.h"

namespace sg {

class Llama final : public StageModel {
 public:
  Llama(const LlamaShape& shape, const ParameterLayout& layout, int B, int T, int slots = 1,
        TensorGroup* tp = nullptr, Backend& backend = cpu_backend(),
        Recompute recompute = Recompute::None);

  size_t stream_floats() const { return static_cast<size_t>(B_) * T_ * shape_.n_embd; }
  ConstAct logits() const { return slots_[0].logits; }  // (B,T,Vp/T) of slot 0's last forward

  float forward(int slot, const float* params, float* buffers, const MicroBatch& batch,
                const ForwardOptions& options) override;
  void backward(int slot, float* grads, const float* params, const MicroBatch& batch, float dloss,
                const OnReady& on_ready) override;
  // The token-level entry points (tests, the decoder): inputs on the first stage, targets on
  // the last (nullptr: logits only).
  float forward_stage(int slot, const float* params, const int32_t* inputs,
                      const int32_t* targets, float fused_dloss);
  void backward_stage(int slot, float* grads, const float* params, const int32_t* inputs,
                      const int32_t* targets, float dloss, const OnReady& on_ready = {});

  size_t input_floats() const override { return stream_floats(); }
  size_t output_floats() const override { return stream_floats(); }
  float* stage_input(int slot) override { return slots_[static_cast<size_t>(slot)].input; }
  const float* stage_output(int slot) const override;
  float* output_grad() override { return scratch_.dresidual; }
  const float* input_grad() const override { return scratch_.dresidual; }

  struct LayerActs {
    float *ln1 = nullptr, *rstd1 = nullptr, *qkv = nullptr, *atty = nullptr, *att = nullptr;
    float *residual2 = nullptr, *ln2 = nullptr, *rstd2 = nullptr, *gate_up = nullptr,
          *hidden = nullptr, *residual3 = nullptr;
  };
  struct Slot {
    float* input = nullptr;  // the embedding on the first stage, else the received stream
    std::vector<LayerActs> layers;
    float *lnf = nullptr, *rstdf = nullptr, *logits = nullptr, *losses = nullptr,
          *ce_stats = nullptr;
    bool have_probs = false;
    float fused_dloss = 0.0f;
  };
  // Working memory shared by every layer and slot: the forward's products that are consumed at
  // once, and the gradients.
  struct Scratch {
    float *fused = nullptr, *proj = nullptr;  // qkv before rope; o_proj's and down_proj's output
    float *dresidual = nullptr, *dln = nullptr, *dqkv = nullptr, *dfused = nullptr,
          *datty = nullptr, *datt = nullptr, *dhidden = nullptr, *dgate_up = nullptr;
    float *rope_cos = nullptr, *rope_sin = nullptr;
  };
  // Places the activations and scratch from `base` (null: only counts); returns the bytes. The
  // one layout both the model and llama_activation_bytes (`plan`) use.
  static size_t lay_out(void* base, const LlamaShape& shape, const ParameterLayout& layout, int B,
                        int T, int slots, const AttentionStorage& att, Recompute recompute,
                        std::vector<Slot>* slots_out, Scratch* scratch_out);

 private:
  void tp_sum(float* data, size_t n);
  void block_forward(Slot& s, int l, const float* params, const float* x);
  void block_backward(Slot& s, int l, float* grads, const float* params, const float* x);
  void head_backward(Slot& s, float* grads, const float* params, const int32_t* targets,
                     float dloss);

  const ParameterLayout& layout_;
  LlamaShape shape_;
  LlamaSplit split_;
  int B_, T_;
  TensorGroup* tp_;
  Backend& backend_;
  Recompute recompute_;
  int tensors_;
  size_t embed_ = 0, norm_ = 0, head_ = 0;  // offsets in the flat buffer
  size_t norm_index_ = 0;                   // index of model.norm.weight in tensors()
  Buffer arena_;
  std::vector<Slot> slots_;
  Scratch scratch_;
  LmLoss loss_;
  std::vector<float> losses_host_;
};

}  // namespace sg
