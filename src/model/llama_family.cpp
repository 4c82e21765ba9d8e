#include "model/llama_family.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "config/job_spec.h"
#include "model/decoder_rules.h"
#include "model/llama.h"
#include "model/llama_config.h"
#include "util/error.h"
#include "util/rng.h"

namespace sg {
namespace {

// A block's multiply-adds per token: the four projections, the MLP's three, the attention core
// (counted at half for causality, as GPT-2's).
double block_macs(const LlamaShape& s) {
  const double C = s.n_embd, kv = static_cast<double>(s.n_kv_head) * s.head_size();
  return C * (C + 2 * kv) + C * C + 3.0 * C * s.intermediate + static_cast<double>(s.context) * C;
}

}  // namespace

ModelDescription llama_description(const LlamaShape& s) {
  const int64_t C = s.n_embd, hs = s.head_size();
  const int64_t q = s.n_head * hs, kv = s.n_kv_head * hs, I = s.intermediate;
  using S = TensorSplit;
  ModelDescription d;
  d.blocks = s.n_layer;
  d.last_cost = C * static_cast<double>(s.padded_vocab) / block_macs(s);
  auto add = [&](std::string name, std::vector<int64_t> shape, S split, int block) {
    const bool decay = shape.size() >= 2;  // 2-D weights only
    d.tensors.push_back({std::move(name), std::move(shape), split, decay, true, block, false});
  };
  add("model.embed_tokens.weight", {s.padded_vocab, C}, S::kRows, -1);
  d.tensors.back().tied_to_last = s.tied;
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {C}, S::kWhole, l);
    add(p + "self_attn.q_proj.weight", {q, C}, S::kRows, l);  // q, k, v adjacent: one product
    add(p + "self_attn.k_proj.weight", {kv, C}, S::kRows, l);
    add(p + "self_attn.v_proj.weight", {kv, C}, S::kRows, l);
    add(p + "self_attn.o_proj.weight", {C, q}, S::kCols, l);
    add(p + "post_attention_layernorm.weight", {C}, S::kWhole, l);
    add(p + "mlp.gate_proj.weight", {I, C}, S::kRows, l);  // gate, up adjacent: one product
    add(p + "mlp.up_proj.weight", {I, C}, S::kRows, l);
    add(p + "mlp.down_proj.weight", {C, I}, S::kCols, l);
  }
  add("model.norm.weight", {C}, S::kWhole, s.n_layer);
  if (!s.tied) add("lm_head.weight", {s.padded_vocab, C}, S::kRows, s.n_layer);
  return d;
}

int64_t llama_parameter_count(const LlamaShape& s) {
  int64_t total = 0;
  for (const TensorSpec& t : llama_description(s).tensors) total += element_count(t.shape);
  const int64_t padding = static_cast<int64_t>(s.padded_vocab - s.vocab) * s.n_embd;
  return total - padding * (s.tied ? 1 : 2);
}

double llama_training_flops_per_token(const LlamaShape& s, int seq_len) {
  return decoder_training_flops_per_token(static_cast<double>(llama_parameter_count(s)),
                                          s.n_layer, s.n_embd, seq_len);
}

LlamaSplit llama_split(const LlamaShape& shape, const ModelShard& shard) {
  const int T = shard.tensors;
  LlamaSplit w;
  w.heads = shape.n_head / T;
  w.kv_heads = shape.n_kv_head / T;
  w.mlp_width = shape.intermediate / T;
  w.vocab_rows = shape.padded_vocab / T;
  w.vocab_begin = shard.tensor_rank * w.vocab_rows;
  return w;
}

void init_llama_parameters(float* params, const LlamaShape& s, const ParameterLayout& layout,
                           float std, uint64_t seed) {
  initialize_tensors(params, nullptr, layout, seed,
                     [&](const TensorSpec& t, float* p, size_t n_whole, uint64_t stream) {
    if (t.shape.size() == 1) {  // the norms' weights
      for (size_t i = 0; i < n_whole; ++i) p[i] = 1.0f;
      return;
    }
    Rng rng(stream);
    size_t n = n_whole;
    if (t.shape[0] == s.padded_vocab) n = static_cast<size_t>(s.vocab) * s.n_embd;  // padding: 0
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<float>(rng.normal()) * std;
    std::memset(p + n, 0, (n_whole - n) * sizeof(float));
  });
}

LlamaFamily::LlamaFamily(const LlamaShape& shape, int seq_len, float init_std)
    : shape_(shape), seq_len_(seq_len), init_std_(init_std),
      description_(llama_description(shape)) {}

nlohmann::json LlamaFamily::shape_record() const {
  const RopeScaling& r = shape_.rope_scaling;
  return {{"family", "llama"},
          {"n_layer", shape_.n_layer},
          {"n_head", shape_.n_head},
          {"n_kv_head", shape_.n_kv_head},
          {"n_embd", shape_.n_embd},
          {"intermediate_size", shape_.intermediate},
          {"context", shape_.context},
          {"vocab", shape_.vocab},
          {"tie_embeddings", shape_.tied},
          {"rope_theta", shape_.rope_theta},
          {"rope_scaling", {r.factor, r.low_freq_factor, r.high_freq_factor, r.original_context}},
          {"rms_norm_eps", shape_.rms_norm_eps}};
}

std::string LlamaFamily::summary() const {
  return fmt::format("Llama ({} layers, {} heads ({} key/value), {} wide, MLP {}, context {}, "
                     "vocabulary {}{})",
                     shape_.n_layer, shape_.n_head, shape_.n_kv_head, shape_.n_embd,
                     shape_.intermediate, shape_.context, shape_.vocab,
                     shape_.tied ? ", tied head" : "");
}

void LlamaFamily::check_split(int tensors, int stages) const {
  const std::string problem =
      llama_split_problem(shape_.n_head, shape_.n_kv_head, shape_.intermediate,
                          shape_.padded_vocab, shape_.n_layer, tensors, stages);
  if (!problem.empty()) throw SpecError(problem);
}

std::unique_ptr<ModelFamily> LlamaConfig::make_family(const JobSpec& spec) const {
  LlamaShape shape;
  shape.n_layer = n_layer;
  shape.n_head = n_head;
  shape.n_kv_head = n_kv_head;
  shape.n_embd = n_embd;
  shape.intermediate = intermediate_size;
  shape.context = context;
  shape.vocab = vocab;
  shape.padded_vocab = spec.padded_vocab();
  shape.rope_theta = rope_theta;
  shape.rope_scaling = {rope_scaling_factor, rope_low_freq_factor, rope_high_freq_factor,
                        rope_original_context};
  shape.rms_norm_eps = rms_norm_eps;
  shape.tied = tie_embeddings;
  return std::make_unique<LlamaFamily>(shape, spec.seq_len(), init_std);
}

void LlamaFamily::initialize(float* params, float*, const ParameterLayout& layout,
                             uint64_t seed) const {
  init_llama_parameters(params, shape_, layout, init_std_, seed);
}

std::vector<BatchField> LlamaFamily::batch_fields(int micro_batch) const {
  return {{"tokens", DType::I32, {micro_batch, seq_len_}},
          {"targets", DType::I32, {micro_batch, seq_len_}}};
}

size_t LlamaFamily::activation_bytes(const ParameterLayout& layout, int micro_batch,
                                     int slots) const {
  const int heads = llama_split(shape_, layout.shard()).heads;
  return llama_activation_bytes(
      shape_, layout, micro_batch, seq_len_, slots,
      attention_storage_for(policy().backend, micro_batch, seq_len_, heads), policy().recompute);
}

std::string LlamaFamily::evaluation_summary(double loss, const std::vector<double>&) const {
  return decoder_evaluation_summary(loss);
}

std::unique_ptr<StageModel> LlamaFamily::make_stage(const ParameterLayout& layout,
                                                    const StageContext& context) const {
  return std::make_unique<Llama>(shape_, layout, context.micro_batch, seq_len_, context.slots,
                                 context.tensor_group, *context.backend, policy().recompute);
}

}  // namespace sg
