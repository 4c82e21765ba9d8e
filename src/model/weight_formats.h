#pragma once
// Weights in other tools' layouts (README "Weights in and out"): Hugging Face's GPT-2
// (transformers.GPT2LMHeadModel) and torchvision's ResNet state dict. Pure conversions between
// those tensors and the whole (unsharded) flat buffers of our layout. Each family's
// export_weights / import_weights (gpt2_weights.cpp, resnet_weights.cpp) reads and writes the
// files with them.
//
// GPT-2, ours -> Hugging Face:
//   wte (Vp, C)                 -> transformer.wte.weight (V, C): the padding rows dropped
//   wpe (context, C)            -> transformer.wpe.weight
//   h.L.attn.c_attn.weight (3C, C), h.L.attn.c_proj.weight (C, C), h.L.mlp.c_fc.weight (4C, C),
//   h.L.mlp.c_proj.weight (C, 4C): nn.Linear's (out, in) -> Conv1D's (in, out), transposed
//   everything else             -> transformer.<name>, as it is
// The LM head is tied to wte, so no lm_head.weight is written (save_pretrained writes none).
// Reading accepts names with or without the "transformer." prefix (released checkpoints such as
// openai-community/gpt2 have none), ignores the attention-mask buffers (h.L.attn.bias,
// h.L.attn.masked_bias) and accepts an lm_head.weight only when it equals wte.
//
// ResNet: torchvision's names and layouts are ours (convolutions (K, C, R, S)); torchvision also
// keeps bnX.num_batches_tracked (int64, shape []), which we do not track: exports write the
// checkpoint's optimizer step there, imports ignore it (it only matters to a BatchNorm2d with
// momentum=None, which torchvision's ResNets do not use).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "model/gpt2_family.h"
#include "model/parameter_layout.h"

namespace sg {

// A tensor of a foreign layout that owns its data: F32 in f32, or I64 in i64.
struct ForeignTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> f32;
  std::vector<int64_t> i64;
  TensorRef ref() const;
};

// Whether our GPT-2 tensor `name` is one of Hugging Face's Conv1D weights (stored transposed).
bool is_hf_conv1d_weight(const std::string& name);

// Hugging Face's tensors for the whole GPT-2 parameter buffer `params` (layout: the unsharded
// ParameterLayout of gpt2_description(shape)).
std::vector<ForeignTensor> gpt2_to_hf_tensors(const GPT2Shape& shape, const float* params);
// config.json for transformers.GPT2Config / GPT2LMHeadModel: the unpadded vocabulary, our
// activation (gelu_new, the tanh approximation), layer-norm epsilon 1e-5, a tied head, no
// dropout (we train without it).
nlohmann::json hf_gpt2_config(const GPT2Shape& shape);
// SpecError naming the config.json key and the job key when `config` (from `where`) is not a
// GPT-2 of the job's shape or uses what our model does not compute (another activation, an
// untied head, another epsilon, n_inner != 4 * n_embd, ...).
void check_hf_gpt2_config(const nlohmann::json& config, const GPT2Shape& shape,
                          const std::string& where);
// Fills the whole parameter buffer `params` from Hugging Face GPT-2 tensors; wte's padding rows
// become zero, as our initialisation leaves them. RunError naming the file and tensor for a
// missing, unexpected or misshapen tensor.
void hf_to_gpt2(const SafetensorsFile& file, const GPT2Shape& shape, float* params);

// torchvision's state dict for the whole ResNet buffers (the unsharded layout of
// `description`), with num_batches_tracked = `batches_tracked` for each batch norm.
std::vector<ForeignTensor> resnet_to_torchvision(const ModelDescription& description,
                                                 const float* params, const float* buffers,
                                                 int64_t batches_tracked);
// Fills the whole parameter and buffer buffers from a torchvision state dict. Errors name the
// tensor and the job key to change (model.depth, model.width, model.classes).
void torchvision_to_resnet(const SafetensorsFile& file, const ModelDescription& description,
                           float* params, float* buffers);

// Writing an export (the families' export_weights, with data/file_io.h's write_text_file): a
// safetensors file with the "pt" metadata transformers wants, a directory (RunError saying why
// not).
void write_foreign_tensors(const std::string& path, const std::vector<ForeignTensor>& tensors);
void make_export_directory(const std::string& dir);
// GPT-2's tokenizer files (encoder.json, vocab.bpe from tokenizer_dir) under the names
// transformers' GPT2Tokenizer(Fast) reads, with a tokenizer_config.json: what `export --tokenizer`
// ships beside a text model that reads GPT-2's tokens.
void copy_gpt2_tokenizer(const std::string& tokenizer_dir, const std::string& dir, int context);
// SpecError unless config.json's integer `key` equals the job's `want` (of `job_key`), saying
// what to set to load the weights.
void check_config_int(const nlohmann::json& config, const char* key, int64_t want,
                      const char* job_key, const std::string& where);
// A Hugging Face config.json, nesting bounded; RunError/SpecError naming the file.
nlohmann::json read_config_json(const std::string& config_path);

}  // namespace sg
