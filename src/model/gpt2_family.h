#pragma once
// GPT-2 as a model family (model_family.h): its tensors, initialisation, FLOPs and memory.
// Names follow the Hugging Face GPT-2 layout; Linear weights are stored (out, in) like
// nn.Linear (HF's Conv1D is the transpose). The LM head is tied to wte. The vocabulary is padded
// to a multiple of 128 (padded_vocab); padding rows of wte stay zero.
// Flat order: wte, wpe, then each block's 12 tensors, then ln_f.
// Tensor parallelism (Megatron): attn.c_attn and mlp.c_fc keep the rows of this rank's heads /
// hidden units (column-parallel), attn.c_proj and mlp.c_proj the matching columns
// (row-parallel); wte keeps vocabulary rows [t*Vp/T, (t+1)*Vp/T); the rest is replicated.
#include <cstdint>
#include <string>

#include "backend/backend.h"
#include "model/model_family.h"

namespace sg {

struct GPT2Shape {
  int n_layer = 0;
  int n_head = 0;
  int n_embd = 0;        // C
  int context = 0;       // maximum sequence length (rows of wpe)
  int vocab = 0;         // V: real tokens
  int padded_vocab = 0;  // Vp >= V: rows of wte; padding rows stay zero
};

// The whole GPT-2 as a layout's description: blocks cost one each, the LM head's cost on the
// last stage.
ModelDescription gpt2_description(const GPT2Shape& shape);
// The LM head's training compute in units of one block's: C*Vp against 12*C^2 + context*C
// multiply-adds per token (the attention core counted at half for causality).
double head_cost_in_blocks(const GPT2Shape& shape);
// Blocks of stage `stage` of `stages` for this model: [first, first + count).
std::pair<int, int> stage_layers(const GPT2Shape& shape, int stage, int stages);
// Parameters at the real vocabulary (padding rows excluded), as users quote them.
int64_t gpt2_parameter_count(const GPT2Shape& shape);
// Model FLOPs per token, counted as PaLM / nanoGPT do: 6 per parameter (matmuls, embeddings
// included, at the real vocabulary) plus the attention core (QK^T and PV: 4*T*C per layer
// forward, x3 for forward + backward, halved for causality).
double training_flops_per_token(const GPT2Shape& shape, int seq_len);

// This shard's local widths: heads, attention width C/T, MLP width 4C/T, and vocabulary rows
// Vp/T starting at vocab_begin.
struct GPT2Split {
  int local_heads = 0, attn_width = 0, mlp_width = 0, vocab_rows = 0, vocab_begin = 0;
};
GPT2Split gpt2_split(const GPT2Shape& shape, const ModelShard& shard);

// GPT-2 initialisation (nanoGPT/llm.c): Linear and embedding weights N(0, std), the residual
// projections (attn.c_proj, mlp.c_proj) N(0, std/sqrt(2*n_layer)), biases 0, layernorm weight 1,
// bias 0, vocabulary padding rows 0. Deterministic in seed, and a shard gets exactly its slice
// of the whole model's values.
void init_gpt2_parameters(float* params, const GPT2Shape& shape, const ParameterLayout& layout,
                          float std, uint64_t seed);

// Bytes of activation memory of a (possibly sharded) model with `slots` micro-batches of shape
// (B, T) in flight, including the gradient scratch; att: what one layer's attention keeps and
// uses as scratch on the backend (Backend::attention_storage for this shard's heads); recompute:
// what the backward rebuilds instead of keeping; storage: the type activations are kept in
// (Backend::activation_dtype).
size_t gpt2_activation_bytes(const GPT2Shape& shape, const ParameterLayout& layout, int B, int T,
                             int slots, const AttentionStorage& att,
                             Recompute recompute = Recompute::None,
                             DType storage = DType::F32);

// Bytes of a stage's bf16 working copy of its weights where activations are stored in bf16 (the
// products multiply it; docs/bf16.md), else 0. The one count GPT2 and `plan` use.
size_t gpt2_weight_copy_bytes(const ParameterLayout& layout, DType storage);

class GPT2Family final : public ModelFamily {
 public:
  GPT2Family(const GPT2Shape& shape, int seq_len, float init_std);
  const GPT2Shape& shape() const { return shape_; }
  std::string name() const override { return "gpt2"; }
  nlohmann::json shape_record() const override;
  std::string summary() const override;
  const ModelDescription& description() const override { return description_; }
  int64_t parameter_count() const override { return gpt2_parameter_count(shape_); }
  void check_split(int tensors, int stages) const override;
  void initialize(float* params, float* buffers, const ParameterLayout& layout,
                  uint64_t seed) const override;
  std::vector<BatchField> batch_fields(int micro_batch) const override;
  std::string sample_unit() const override { return "tokens"; }
  int units_per_sample() const override { return seq_len_; }
  double training_flops_per_sample() const override {
    return training_flops_per_token(shape_, seq_len_) * seq_len_;
  }
  size_t activation_bytes(const ParameterLayout& layout, int micro_batch,
                          int slots) const override {
    const int heads = gpt2_split(shape_, layout.shard()).local_heads;
    return gpt2_activation_bytes(
        shape_, layout, micro_batch, seq_len_, slots,
        attention_storage_for(policy().backend, micro_batch, seq_len_, heads),
        policy().recompute, policy().storage);
  }
  size_t weight_copy_bytes(const ParameterLayout& layout) const override {
    return gpt2_weight_copy_bytes(layout, policy().storage);
  }
  DType activation_storage() const override { return policy().storage; }
  std::string evaluation_summary(double loss, const std::vector<double>& metrics) const override;
  std::unique_ptr<StageModel> make_stage(const ParameterLayout& layout,
                                         const StageContext& context) const override;
  // Hugging Face's layout, and the text decoder (gpt2_weights.cpp).
  std::string export_weights(const std::string& path, const float* params, const float* buffers,
                             const ExportOptions& options) const override;
  std::string import_weights(const std::string& path, bool directory, float* params,
                             float* buffers) const override;
  std::unique_ptr<TextDecoder> make_decoder(const ParameterLayout& layout,
                                            const float* params) const override;

 private:
  GPT2Shape shape_;
  int seq_len_;
  float init_std_;
  ModelDescription description_;
};

}  // namespace sg
