#pragma once
// Llama as a model family (model_family.h): a decoder with RMSNorm, rotary positions, a SwiGLU
// MLP and grouped-query attention, no biases (transformers' LlamaForCausalLM). Tensors carry
// transformers' names and (out, in) Linear layout, so `export --format hf` writes them as they
// are. The vocabulary is padded to a multiple of 128 (padded_vocab); padding rows stay zero.
// Flat order: model.embed_tokens.weight, each layer's 9 tensors, model.norm.weight and, untied,
// lm_head.weight.
// Tensor parallelism (Megatron): q_proj, k_proj and v_proj keep the rows of this rank's query and
// key/value heads, gate_proj and up_proj the rows of its hidden units (column-parallel); o_proj
// and down_proj the matching columns (row-parallel); the embedding and the head keep vocabulary
// rows. A layer's q, k and v (and gate and up) rows lie next to each other in the flat buffer,
// so one product computes them together.
#include <cstdint>
#include <string>

#include "backend/backend.h"
#include "kernels/rope.h"
#include "model/model_family.h"

namespace sg {

struct LlamaShape {
  int n_layer = 0;
  int n_head = 0;
  int n_kv_head = 0;
  int n_embd = 0;        // C
  int intermediate = 0;  // I: the MLP's hidden units
  int context = 0;
  int vocab = 0;         // V: real tokens
  int padded_vocab = 0;  // Vp >= V
  double rope_theta = 10000;
  RopeScaling rope_scaling;
  float rms_norm_eps = 1e-5f;
  bool tied = true;  // the LM head is model.embed_tokens.weight
  int head_size() const { return n_embd / n_head; }
};

ModelDescription llama_description(const LlamaShape& shape);
// Parameters at the real vocabulary (padding rows excluded), as users quote them.
int64_t llama_parameter_count(const LlamaShape& shape);
// 6 per parameter (at the real vocabulary) plus the attention core, as GPT-2's count.
double llama_training_flops_per_token(const LlamaShape& shape, int seq_len);

// This shard's local widths: query and key/value heads, MLP width, vocabulary rows from
// vocab_begin.
struct LlamaSplit {
  int heads = 0, kv_heads = 0, mlp_width = 0, vocab_rows = 0, vocab_begin = 0;
};
LlamaSplit llama_split(const LlamaShape& shape, const ModelShard& shard);

// transformers' initialisation: every Linear and the embedding N(0, std), norms 1, vocabulary
// padding rows 0; deterministic in seed, each shard exactly its slice of the one-process values.
void init_llama_parameters(float* params, const LlamaShape& shape, const ParameterLayout& layout,
                           float std, uint64_t seed);

size_t llama_activation_bytes(const LlamaShape& shape, const ParameterLayout& layout, int B,
                              int T, int slots, const AttentionStorage& att, Recompute recompute);

class LlamaFamily final : public ModelFamily {
 public:
  LlamaFamily(const LlamaShape& shape, int seq_len, float init_std);
  const LlamaShape& shape() const { return shape_; }
  std::string name() const override { return "llama"; }
  nlohmann::json shape_record() const override;
  std::string summary() const override;
  const ModelDescription& description() const override { return description_; }
  int64_t parameter_count() const override { return llama_parameter_count(shape_); }
  void check_split(int tensors, int stages) const override;
  void initialize(float* params, float* buffers, const ParameterLayout& layout,
                  uint64_t seed) const override;
  std::vector<BatchField> batch_fields(int micro_batch) const override;
  std::string sample_unit() const override { return "tokens"; }
  int units_per_sample() const override { return seq_len_; }
  double training_flops_per_sample() const override {
    return llama_training_flops_per_token(shape_, seq_len_) * seq_len_;
  }
  size_t activation_bytes(const ParameterLayout& layout, int micro_batch,
                          int slots) const override;
  std::string evaluation_summary(double loss, const std::vector<double>& metrics) const override;
  std::unique_ptr<StageModel> make_stage(const ParameterLayout& layout,
                                         const StageContext& context) const override;
  // transformers' LlamaForCausalLM layout, and the text decoder (llama_weights.cpp).
  std::string export_weights(const std::string& path, const float* params, const float* buffers,
                             const ExportOptions& options) const override;
  std::string import_weights(const std::string& path, bool directory, float* params,
                             float* buffers) const override;
  std::unique_ptr<TextDecoder> make_decoder(const ParameterLayout& layout,
                                            const float* params) const override;

 private:
  LlamaShape shape_;
  int seq_len_;
  float init_std_;
  ModelDescription description_;
};

}  // namespace sg
