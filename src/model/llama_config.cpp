#include "model/llama_config.h"

#include <algorithm>
#include <fmt/format.h>

#include "config/job_spec.h"
#include "config/spec_checks.h"
#include "model/decoder_rules.h"

namespace sg {
namespace {

const JobSpecKey kKeys[] = {
    SG_MODEL_KEY(LlamaConfig, n_layer),
    SG_MODEL_KEY(LlamaConfig, n_head),
    SG_MODEL_KEY(LlamaConfig, n_kv_head),
    SG_MODEL_KEY(LlamaConfig, n_embd),
    SG_MODEL_KEY(LlamaConfig, intermediate_size),
    SG_MODEL_KEY(LlamaConfig, context),
    SG_MODEL_KEY(LlamaConfig, vocab),
    SG_MODEL_KEY(LlamaConfig, rope_theta),
    SG_MODEL_KEY(LlamaConfig, rope_scaling_factor),
    SG_MODEL_KEY(LlamaConfig, rope_low_freq_factor),
    SG_MODEL_KEY(LlamaConfig, rope_high_freq_factor),
    SG_MODEL_KEY(LlamaConfig, rope_original_context),
    SG_MODEL_KEY(LlamaConfig, rms_norm_eps),
    SG_MODEL_KEY(LlamaConfig, tie_embeddings),
    SG_MODEL_KEY(LlamaConfig, init_std),
};

}  // namespace

std::span<const JobSpecKey> llama_keys() { return kKeys; }

ModelData LlamaConfig::data() const { return decoder_model_data(vocab, context); }

void LlamaConfig::validate(const JobSpec& spec, const SpecChecks& check) const {
  check_decoder_sizes(check, n_layer, n_head, n_embd, context, vocab, init_std);
  check.at_least("model.n_kv_head", n_kv_head, 1);
  check.at_least("model.intermediate_size", intermediate_size, 1);
  check.at_most("model.intermediate_size", intermediate_size, 1 << 18, "a documented limit");
  check.at_most("model.n_kv_head", n_kv_head, n_head,
                "each key/value head serves a group of query heads");
  if ((n_embd / n_head) % 2 != 0)
    check.fail({"model.n_embd", "model.n_head"},
               fmt::format("the head size model.n_embd / model.n_head = {} is odd; rotary "
                           "embeddings turn pairs of channels, so make it even",
                           n_embd / n_head));
  if (n_head % n_kv_head != 0)
    check.fail({"model.n_head", "model.n_kv_head"},
               fmt::format("model.n_head {} is not divisible by model.n_kv_head {}; each key/value "
                           "head serves an equal group of query heads",
                           n_head, n_kv_head));
  check.float_at_least("model.rope_theta", rope_theta, 1, true);
  check.float_at_least("model.rope_scaling_factor", rope_scaling_factor, 1, true);
  check.float_at_least("model.rope_low_freq_factor", rope_low_freq_factor, 0, false);
  if (!(rope_high_freq_factor > rope_low_freq_factor))
    check.fail({"model.rope_high_freq_factor", "model.rope_low_freq_factor"},
               fmt::format("model.rope_high_freq_factor {} must exceed model.rope_low_freq_factor "
                           "{} (Llama 3 uses 4 and 1)",
                           rope_high_freq_factor, rope_low_freq_factor));
  check.at_least("model.rope_original_context", rope_original_context, 1);
  check.float_at_least("model.rms_norm_eps", rms_norm_eps, 0, false);
  // Llama's kernels (rmsnorm, swiglu, rope) take fp32 activations today.
  if (spec.train.precision != Precision::FP32)
    check.fail({"train.precision", "model.arch"},
               fmt::format("train.precision {} is not available for model.arch llama yet (its "
                           "RMSNorm, SwiGLU and rotary kernels take fp32); use fp32",
                           spec.train.precision));
}

void LlamaConfig::validate_split(const JobSpec& spec, const SpecChecks& check) const {
  const std::string problem =
      llama_split_problem(n_head, n_kv_head, intermediate_size, spec.padded_vocab(), n_layer,
                          spec.parallel.tensor, spec.parallel.pipeline);
  if (!problem.empty()) check.fail({"parallel.tensor", "parallel.pipeline"}, problem);
}

std::string llama_split_problem(int n_head, int n_kv_head, int intermediate, int padded_vocab,
                                int n_layer, int tensors, int stages) {
  if (n_kv_head % tensors != 0 || n_head % tensors != 0)
    return fmt::format("model.n_kv_head {} (and model.n_head {}) must be divisible by "
                       "parallel.tensor {}; tensor parallelism gives each rank whole key/value "
                       "heads with their groups of query heads",
                       n_kv_head, n_head, tensors);
  if (intermediate % tensors != 0)
    return fmt::format("model.intermediate_size {} is not divisible by parallel.tensor {}; "
                       "tensor parallelism splits the MLP's hidden units",
                       intermediate, tensors);
  return decoder_vocab_stage_problem(padded_vocab, n_layer, tensors, stages);
}

}  // namespace sg
