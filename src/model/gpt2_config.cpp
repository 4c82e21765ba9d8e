#include "model/gpt2_config.h"

#include <algorithm>
#include <fmt/format.h>

#include "config/job_spec.h"
#include "config/spec_checks.h"

namespace sg {
namespace {

// The documented upper bounds of GPT-2's sizes (docs/faults.md).
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxEmbedding = 65536;
constexpr int64_t kMaxContext = 1 << 20;
constexpr int64_t kMaxVocab = 1 << 24;

const JobSpecKey kKeys[] = {
    SG_MODEL_KEY(GPT2Config, n_layer),  SG_MODEL_KEY(GPT2Config, n_head),
    SG_MODEL_KEY(GPT2Config, n_embd),   SG_MODEL_KEY(GPT2Config, context),
    SG_MODEL_KEY(GPT2Config, vocab),    SG_MODEL_KEY(GPT2Config, init_std),
};

}  // namespace

std::span<const JobSpecKey> gpt2_keys() { return kKeys; }

ModelData GPT2Config::data() const {
  ModelData d;
  d.input = ModelInput::Tokens;
  d.vocab = vocab;
  d.context = context;
  return d;
}

void GPT2Config::validate(const JobSpec&, const SpecChecks& check) const {
  check.at_least("model.n_layer", n_layer, 1);
  check.at_least("model.n_head", n_head, 1);
  check.at_least("model.n_embd", n_embd, 1);
  check.at_least("model.context", context, 1);
  check.at_least("model.vocab", vocab, 2);
  check.at_most("model.n_layer", n_layer, kMaxLayers, "a documented limit, far above any GPT");
  check.at_most("model.n_embd", n_embd, kMaxEmbedding, "4 x n_embd is a kernel dimension");
  check.at_most("model.n_head", n_head, n_embd, "a head needs at least one channel");
  check.at_most("model.context", context, kMaxContext, "a documented limit");
  check.at_most("model.vocab", vocab, kMaxVocab, "a documented limit");
  if (n_embd % n_head != 0)
    check.fail({"model.n_embd", "model.n_head"},
               fmt::format("model.n_embd {} is not divisible by model.n_head {}; use {}", n_embd,
                           n_head, nearest_multiple(n_embd, n_head)));
  check.float_at_least("model.init_std", init_std, 0, false);
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
  if (padded_vocab % tensors != 0)
    return fmt::format("the padded vocabulary {} is not divisible by parallel.tensor {}; use a "
                       "power of two",
                       padded_vocab, tensors);
  if (stages > std::max(1, n_layer))
    return fmt::format("parallel.pipeline {} exceeds model.n_layer {}; each stage needs a layer",
                       stages, n_layer);
  return "";
}

}  // namespace sg
