#pragma once
// GPT-2's section of the job spec (model_config.h): its keys, their defaults and checks.
#include <span>
#include <string>
#include <string_view>

#include "config/job_spec_keys.h"
#include "config/model_config.h"

namespace sg {

struct GPT2Config final : ModelConfig {
  static constexpr std::string_view kArch = "gpt2";

  int n_layer = 12;
  int n_head = 12;
  int n_embd = 768;
  int context = 1024;
  int vocab = 50257;       // padded internally to JobSpec::padded_vocab()
  float init_std = 0.02f;  // GPT-2 initialisation

  std::unique_ptr<ModelConfig> clone() const override { return std::make_unique<GPT2Config>(*this); }
  std::string_view arch() const override { return kArch; }
  ModelData data() const override;
  void validate(const JobSpec& spec, const SpecChecks& check) const override;
  void validate_split(const JobSpec& spec, const SpecChecks& check) const override;
  std::unique_ptr<ModelFamily> make_family(const JobSpec& spec) const override;
};

std::span<const JobSpecKey> gpt2_keys();

// Why GPT-2 does not split `tensors`-way by tensor and `stages`-way by pipeline, or "" when it
// does (GPT2Config::validate_split and GPT2Family::check_split).
std::string gpt2_split_problem(int n_head, int padded_vocab, int n_layer, int tensors, int stages);

}  // namespace sg
