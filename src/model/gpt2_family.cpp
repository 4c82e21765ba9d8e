#include "model/gpt2_family.h"

#include "config/job_spec.h"
#include "model/gpt2_config.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "model/decoder_rules.h"
#include "model/gpt2.h"
#include "util/error.h"
#include "util/rng.h"

namespace sg {

ModelDescription gpt2_description(const GPT2Shape& s) {
  const int64_t C = s.n_embd;
  using S = TensorSplit;
  ModelDescription d;
  d.blocks = s.n_layer;
  d.last_cost = head_cost_in_blocks(s);
  auto add = [&](std::string name, std::vector<int64_t> shape, S split, int block) {
    const bool decay = shape.size() >= 2;  // 2-D weights only
    d.tensors.push_back({std::move(name), std::move(shape), split, decay, true, block, false});
  };
  add("wte", {s.padded_vocab, C}, S::kRows, -1);
  d.tensors.back().tied_to_last = true;  // the LM head
  add("wpe", {s.context, C}, S::kWhole, -1);
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    add(p + "ln_1.weight", {C}, S::kWhole, l);
    add(p + "ln_1.bias", {C}, S::kWhole, l);
    add(p + "attn.c_attn.weight", {3 * C, C}, S::kQkvRows, l);
    add(p + "attn.c_attn.bias", {3 * C}, S::kQkvRows, l);
    add(p + "attn.c_proj.weight", {C, C}, S::kCols, l);
    add(p + "attn.c_proj.bias", {C}, S::kWhole, l);
    add(p + "ln_2.weight", {C}, S::kWhole, l);
    add(p + "ln_2.bias", {C}, S::kWhole, l);
    add(p + "mlp.c_fc.weight", {4 * C, C}, S::kRows, l);
    add(p + "mlp.c_fc.bias", {4 * C}, S::kRows, l);
    add(p + "mlp.c_proj.weight", {C, 4 * C}, S::kCols, l);
    add(p + "mlp.c_proj.bias", {C}, S::kWhole, l);
  }
  add("ln_f.weight", {C}, S::kWhole, s.n_layer);
  add("ln_f.bias", {C}, S::kWhole, s.n_layer);
  return d;
}

double head_cost_in_blocks(const GPT2Shape& s) {
  const double C = s.n_embd;
  return C * s.padded_vocab / (12.0 * C * C + static_cast<double>(s.context) * C);
}

std::pair<int, int> stage_layers(const GPT2Shape& shape, int stage, int stages) {
  const std::vector<int> firsts = balance_stages(shape.n_layer, head_cost_in_blocks(shape), stages);
  const auto s = static_cast<size_t>(stage);
  return {firsts[s], firsts[s + 1] - firsts[s]};
}

int64_t gpt2_parameter_count(const GPT2Shape& s) {
  int64_t total = 0;
  for (const TensorSpec& t : gpt2_description(s).tensors) total += element_count(t.shape);
  return total - static_cast<int64_t>(s.padded_vocab - s.vocab) * s.n_embd;
}

double training_flops_per_token(const GPT2Shape& s, int seq_len) {
  return decoder_training_flops_per_token(static_cast<double>(gpt2_parameter_count(s)), s.n_layer,
                                          s.n_embd, seq_len);
}

GPT2Split gpt2_split(const GPT2Shape& shape, const ModelShard& shard) {
  const int T = shard.tensors;
  GPT2Split w;
  w.local_heads = shape.n_head / T;
  w.attn_width = shape.n_embd / T;
  w.mlp_width = 4 * shape.n_embd / T;
  w.vocab_rows = shape.padded_vocab / T;
  w.vocab_begin = shard.tensor_rank * w.vocab_rows;
  return w;
}

void init_gpt2_parameters(float* params, const GPT2Shape& s, const ParameterLayout& layout,
                          float std, uint64_t seed) {
  const float residual_std = std / std::sqrt(2.0f * static_cast<float>(s.n_layer));
  initialize_tensors(params, nullptr, layout, seed,
                     [&](const TensorSpec& t, float* p, size_t n_whole, uint64_t stream) {
    const bool is_bias = t.name.ends_with(".bias");
    const bool is_ln_weight = t.name.find("ln_") != std::string::npos && t.name.ends_with(".weight");
    if (is_bias) {
      std::memset(p, 0, n_whole * sizeof(float));
    } else if (is_ln_weight) {
      for (size_t i = 0; i < n_whole; ++i) p[i] = 1.0f;
    } else {
      Rng rng(stream);
      const bool residual = t.name.ends_with("c_proj.weight");
      const float sd = residual ? residual_std : std;
      size_t n = n_whole;
      if (t.name == "wte") n = static_cast<size_t>(s.vocab) * s.n_embd;  // padding rows stay 0
      for (size_t i = 0; i < n; ++i) p[i] = static_cast<float>(rng.normal()) * sd;
      std::memset(p + n, 0, (n_whole - n) * sizeof(float));
    }
  });
}

GPT2Family::GPT2Family(const GPT2Shape& shape, int seq_len, float init_std)
    : shape_(shape), seq_len_(seq_len), init_std_(init_std), description_(gpt2_description(shape)) {}

nlohmann::json GPT2Family::shape_record() const {
  return {{"family", "gpt2"},         {"n_layer", shape_.n_layer}, {"n_head", shape_.n_head},
          {"n_embd", shape_.n_embd}, {"context", shape_.context}, {"vocab", shape_.vocab}};
}

std::string GPT2Family::summary() const {
  return fmt::format("GPT-2 ({} layers, {} heads, {} wide, context {}, vocabulary {})",
                     shape_.n_layer, shape_.n_head, shape_.n_embd, shape_.context, shape_.vocab);
}

void GPT2Family::check_split(int tensors, int stages) const {
  const std::string problem =
      gpt2_split_problem(shape_.n_head, shape_.padded_vocab, shape_.n_layer, tensors, stages);
  if (!problem.empty()) throw SpecError(problem);
}

std::unique_ptr<ModelFamily> GPT2Config::make_family(const JobSpec& spec) const {
  const GPT2Shape shape{n_layer, n_head, n_embd, context, vocab, spec.padded_vocab()};
  return std::make_unique<GPT2Family>(shape, spec.seq_len(), init_std);
}

void GPT2Family::initialize(float* params, float*, const ParameterLayout& layout,
                            uint64_t seed) const {
  init_gpt2_parameters(params, shape_, layout, init_std_, seed);
}

std::vector<BatchField> GPT2Family::batch_fields(int micro_batch) const {
  return {{"tokens", DType::I32, {micro_batch, seq_len_}},
          {"targets", DType::I32, {micro_batch, seq_len_}}};
}

std::string GPT2Family::evaluation_summary(double loss, const std::vector<double>&) const {
  return decoder_evaluation_summary(loss);
}

std::unique_ptr<StageModel> GPT2Family::make_stage(const ParameterLayout& layout,
                                                   const StageContext& context) const {
  return std::make_unique<GPT2>(shape_, layout, context.micro_batch, seq_len_, context.slots,
                                context.tensor_group, *context.backend, policy().recompute);
}

}  // namespace sg
