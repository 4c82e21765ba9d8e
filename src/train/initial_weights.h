#pragma once
// model.init_from: a run that has no checkpoint to resume starts from weights made elsewhere,
// with fresh optimizer state at step 0. PATH is one of
//   - a Hugging Face GPT-2 directory (config.json + model.safetensors, as save_pretrained
//     writes it or as released, e.g. openai-community/gpt2), its config checked against the job;
//   - a safetensors file: a torchvision ResNet state dict (model.arch resnet) or a Hugging Face
//     GPT-2 model.safetensors without its config (model.arch gpt2);
//   - one of our checkpoints: a step_* directory, or a run directory (its newest checkpoint);
//     its weights only (not its optimizer state, step or data position).
// The whole tensors are read, then each process takes its shard, so any mesh loads any of them.
#include <string>

#include "model/model_family.h"
#include "model/parameter_layout.h"

namespace sg {

// What PATH holds, as load_initial_weights reads it.
enum class WeightSource { kCheckpoint, kHuggingFace, kSafetensorsFile };
// SpecError when PATH is none of the above (naming what it lacks: pytorch_model.bin is not
// read, say).
WeightSource classify_weight_source(const std::string& path);

// Reads PATH's weights into this shard's parameters and buffers (layout: this process's shard of
// family's model). Returns one line for the log: what was read. Errors name PATH and, for a
// shape that differs from the job's, the model.* key to change.
std::string load_initial_weights(const std::string& path, const ModelFamily& family,
                                 const ParameterLayout& layout, float* params, float* buffers);

}  // namespace sg
