// The registry of model families (torchtitan's train-spec registry): one row per family, the
// only place that lists them. A family brings its own section of the job spec (model_config.h:
// keys, defaults, checks) and its model (model_family.h, through ModelConfig::make_family);
// everything else works through those. This file needs only the families' config headers, so
// the job spec's readers (and the fuzz build) do not pull in the models.
#include "config/job_spec_keys.h"
#include "model/gpt2_config.h"
#include "model/llama_config.h"
#include "model/resnet_config.h"

namespace sg {
namespace {

template <typename Config>
std::unique_ptr<ModelConfig> make_config() {
  return std::make_unique<Config>();
}

constexpr ModelFamilyEntry kFamilies[] = {
    {GPT2Config::kArch, "GPT-2",
     "decoder: layer norm, learned positions, GELU MLP, tied head (Hugging Face's GPT-2)", "hf",
     gpt2_keys, make_config<GPT2Config>},
    {LlamaConfig::kArch, "Llama",
     "decoder: RMSNorm, rotary positions, SwiGLU MLP, grouped-query attention (transformers' "
     "LlamaForCausalLM)",
     "hf", llama_keys, make_config<LlamaConfig>},
    {ResNetConfig::kArch, "ResNet", "image classifier: ResNet v1.5 (torchvision's layouts)",
     "torchvision", resnet_keys, make_config<ResNetConfig>},
};

}  // namespace

std::span<const ModelFamilyEntry> model_family_entries() { return kFamilies; }

}  // namespace sg
