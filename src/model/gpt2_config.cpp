#include "model/gpt2_config.h"

#include <algorithm>
#include <fmt/format.h>

#include "config/job_spec.h"
#include "config/spec_checks.h"
#include "model/decoder_rules.h"

namespace sg {
namespace {

const JobSpecKey kKeys[] = {
    SG_MODEL_KEY(GPT2Config, n_layer),  SG_MODEL_KEY(GPT2Config, n_head),
    SG_MODEL_KEY(GPT2Config, n_embd),   SG_MODEL_KEY(GPT2Config, context),
    SG_MODEL_KEY(GPT2Config, vocab),    SG_MODEL_KEY(GPT2Config, init_std),
};

}  // namespace

std::span<const JobSpecKey> gpt2_keys() { return kKeys; }

ModelData GPT2Config::data() const { return decoder_model_data(vocab, context); }

void GPT2Config::validate(const JobSpec&, const SpecChecks& check) const {
  check_decoder_sizes(check, n_layer, n_head, n_embd, context, vocab, init_std);
}

void GPT2Config::validate_split(const JobSpec& spec, const SpecChecks& check) const {
  const std::string problem = gpt2_split_problem(n_head, spec.padded_vocab(), n_layer,
                                                 spec.parallel.tensor, spec.parallel.pipeline);
  if (!problem.empty()) check.fail({"parallel.tensor", "parallel.pipeline"}, problem);
}

std::string gpt2_split_problem(int n_head, int padded_vocab, int n_layer, int tensors, int stages) {
  if (n_head % tensors != 0)
    return fmt::format("model.n_head {} is not divisible by parallel.tensor {}; tensor "
                       "parallelism splits the attention heads",
                       n_head, tensors);
  return decoder_vocab_stage_problem(padded_vocab, n_layer, tensors, stages);
}

}  // namespace sg
