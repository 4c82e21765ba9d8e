#pragma once
// Llama's section of the job spec (model_config.h): its keys, their defaults and checks. The
// keys follow GPT-2's where the meaning is the same (n_layer, n_head, n_embd, context, vocab) and
// transformers' LlamaConfig elsewhere (intermediate_size, rope_theta, rms_norm_eps).
#include <span>
#include <string>
#include <string_view>

#include "config/job_spec_keys.h"
#include "config/model_config.h"

namespace sg {

struct LlamaConfig final : ModelConfig {
  static constexpr std::string_view kArch = "llama";

  int n_layer = 12;
  int n_head = 12;
  int n_kv_head = 4;             // grouped-query attention: key/value heads, divides n_head
  int n_embd = 768;
  int intermediate_size = 2048;  // the SwiGLU MLP's width (8/3 x n_embd, rounded)
  int context = 1024;
  int vocab = 50257;             // padded internally to JobSpec::padded_vocab()
  float rope_theta = 10000.0f;
  // Llama 3's frequency scaling (rope_scaling rope_type "llama3"); factor 1: none.
  float rope_scaling_factor = 1.0f;
  float rope_low_freq_factor = 1.0f;
  float rope_high_freq_factor = 4.0f;
  int rope_original_context = 8192;
  float rms_norm_eps = 1e-5f;
  bool tie_embeddings = true;  // the LM head is the token embedding
  float init_std = 0.02f;      // transformers' initializer_range

  std::unique_ptr<ModelConfig> clone() const override { return std::make_unique<LlamaConfig>(*this); }
  std::string_view arch() const override { return kArch; }
  ModelData data() const override;
  void validate(const JobSpec& spec, const SpecChecks& check) const override;
  void validate_split(const JobSpec& spec, const SpecChecks& check) const override;
  std::unique_ptr<ModelFamily> make_family(const JobSpec& spec) const override;
};

std::span<const JobSpecKey> llama_keys();

// Why Llama does not split `tensors`-way by tensor and `stages`-way by pipeline, or "" when it
// does (LlamaConfig::validate_split and LlamaFamily::check_split).
std::string llama_split_problem(int n_head, int n_kv_head, int intermediate, int padded_vocab,
                                int n_layer, int tensors, int stages);

}  // namespace sg
