// Llama's weights in transformers' layout (`export --format hf`, model.init_from) and its text
// decoder (`sample`): the family's side of model_family.h's weight and generation methods.
// Our tensors carry transformers' names and (out, in) layout, so the conversion only drops (or
// restores) the vocabulary's padding rows and, tied, leaves lm_head.weight out as
// save_pretrained does.
#include <cmath>
#include <cstring>
#include <string>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/file_io.h"
#include "model/llama_decoder.h"
#include "model/llama_family.h"
#include "model/weight_formats.h"
#include "util/error.h"

namespace sg {
namespace fs = std::filesystem;
namespace {

nlohmann::json hf_llama_config(const LlamaShape& s) {
  const int eos = s.vocab - 1;  // GPT-2's tokenizer: <|endoftext|> is its last id
  const RopeScaling& r = s.rope_scaling;
  nlohmann::json scaling = nullptr;
  if (r.factor != 1)
    scaling = {{"rope_type", "llama3"},
               {"factor", r.factor},
               {"low_freq_factor", r.low_freq_factor},
               {"high_freq_factor", r.high_freq_factor},
               {"original_max_position_embeddings", r.original_context}};
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"vocab_size", s.vocab},
          {"hidden_size", s.n_embd},
          {"intermediate_size", s.intermediate},
          {"num_hidden_layers", s.n_layer},
          {"num_attention_heads", s.n_head},
          {"num_key_value_heads", s.n_kv_head},
          {"max_position_embeddings", s.context},
          // The float's shortest decimal (1e-05), not its binary value widened to double.
          {"rms_norm_eps", std::stod(fmt::format("{}", s.rms_norm_eps))},
          {"rope_theta", s.rope_theta},
          {"rope_scaling", scaling},
          {"tie_word_embeddings", s.tied},
          {"hidden_act", "silu"},
          {"attention_bias", false},
          {"attention_dropout", 0.0},
          {"initializer_range", 0.02},
          {"pretraining_tp", 1},
          {"use_cache", true},
          {"bos_token_id", eos},
          {"eos_token_id", eos},
          {"torch_dtype", "float32"}};
}

// SpecError naming the config.json key and the job key when `config` is not a Llama of the job's
// shape or computes what our model does not.
void check_hf_llama_config(const nlohmann::json& config, const LlamaShape& s,
                           const std::string& where) {
  if (!config.is_object())
    throw SpecError(where + ": not a JSON object; expected a Llama config.json");
  const nlohmann::json type = config.value("model_type", nlohmann::json());
  if (type != "llama")
    throw SpecError(where + ": model_type is " + (type.is_null() ? "missing" : type.dump()) +
                    "; model.arch llama reads Llama (model_type llama) only");
  check_config_int(config, "num_hidden_layers", s.n_layer, "model.n_layer", where);
  check_config_int(config, "num_attention_heads", s.n_head, "model.n_head", where);
  if (config.contains("num_key_value_heads") && !config["num_key_value_heads"].is_null())
    check_config_int(config, "num_key_value_heads", s.n_kv_head, "model.n_kv_head", where);
  else if (s.n_kv_head != s.n_head)
    throw SpecError(fmt::format("{}: no num_key_value_heads (so {} key/value heads, one per "
                                "query head) but the job has model.n_kv_head {}; set "
                                "model.n_kv_head: {}",
                                where, s.n_head, s.n_kv_head, s.n_head));
  check_config_int(config, "hidden_size", s.n_embd, "model.n_embd", where);
  check_config_int(config, "intermediate_size", s.intermediate, "model.intermediate_size", where);
  check_config_int(config, "max_position_embeddings", s.context, "model.context", where);
  check_config_int(config, "vocab_size", s.vocab, "model.vocab", where);
  const auto number = [&](const char* key, double want, double fallback, const char* job_key) {
    const double got = config.contains(key) && config[key].is_number() ? config[key].get<double>()
                                                                       : fallback;
    if (std::fabs(got - want) > 1e-6 * std::fabs(want))
      throw SpecError(fmt::format("{}: {} is {} but the job has {} {}; set {}: {} to load these "
                                  "weights",
                                  where, key, got, job_key, want, job_key, got));
  };
  number("rope_theta", s.rope_theta, 10000.0, "model.rope_theta");
  number("rms_norm_eps", s.rms_norm_eps, 1e-6, "model.rms_norm_eps");
  const bool tied = config.value("tie_word_embeddings", false);  // LlamaConfig's default
  if (tied != s.tied)
    throw SpecError(fmt::format("{}: tie_word_embeddings is {} but the job has "
                                "model.tie_embeddings {}; set model.tie_embeddings: {}",
                                where, tied, s.tied, tied));
  if (config.value("hidden_act", std::string("silu")) != "silu")
    throw SpecError(where + ": hidden_act is not silu, the SwiGLU our Llama computes");
  if (config.value("attention_bias", false) || config.value("mlp_bias", false))
    throw SpecError(where + ": attention_bias or mlp_bias is true; our Llama has no biases");
  const nlohmann::json scaling = config.value("rope_scaling", nlohmann::json());
  const RopeScaling& r = s.rope_scaling;
  if (scaling.is_null()) {
    if (r.factor != 1)
      throw SpecError(where + ": no rope_scaling but the job has model.rope_scaling_factor " +
                      fmt::format("{}", r.factor) + "; set model.rope_scaling_factor: 1");
    return;
  }
  if (!scaling.is_object() || scaling.value("rope_type", scaling.value("type", "")) != "llama3")
    throw SpecError(where + ": rope_scaling " + scaling.dump() +
                    " is not Llama 3's (rope_type llama3), the only scaling our Llama computes");
  number("factor", r.factor, 1, "model.rope_scaling_factor");
  const auto sub = [&](const char* key, double want, const char* job_key) {
    const double got = scaling.value(key, want);
    if (std::fabs(got - want) > 1e-6 * std::fabs(want))
      throw SpecError(fmt::format("{}: rope_scaling {} is {} but the job has {} {}; set {}: {}",
                                  where, key, got, job_key, want, job_key, got));
  };
  sub("factor", r.factor, "model.rope_scaling_factor");
  sub("low_freq_factor", r.low_freq_factor, "model.rope_low_freq_factor");
  sub("high_freq_factor", r.high_freq_factor, "model.rope_high_freq_factor");
  sub("original_max_position_embeddings", r.original_context, "model.rope_original_context");
}

bool vocabulary_rows(const TensorSpec& t, const LlamaShape& s) {
  return t.shape.size() == 2 && t.shape[0] == s.padded_vocab;
}

}  // namespace

std::string LlamaFamily::export_weights(const std::string& dir, const float* params,
                                        const float*, const ExportOptions& options) const {
  make_export_directory(dir);
  write_text_file((fs::path(dir) / "config.json").string(),
                  hf_llama_config(shape_).dump(2) + "\n");
  std::vector<ForeignTensor> tensors;
  size_t at = 0;
  for (const TensorSpec& t : description_.tensors) {
    ForeignTensor f;
    f.name = t.name;
    f.shape = t.shape;
    if (vocabulary_rows(t, shape_)) f.shape[0] = shape_.vocab;  // the padding rows are ours
    f.f32.assign(params + at, params + at + element_count(f.shape));
    at += static_cast<size_t>(element_count(t.shape));
    tensors.push_back(std::move(f));
  }
  write_foreign_tensors((fs::path(dir) / "model.safetensors").string(), tensors);
  std::string extra;
  if (!options.tokenizer_dir.empty()) {
    copy_gpt2_tokenizer(options.tokenizer_dir, dir, shape_.context);
    extra = ", vocab.json, merges.txt, tokenizer_config.json";
  }
  return fmt::format("{} (Hugging Face Llama: config.json, model.safetensors{})", dir, extra);
}

std::string LlamaFamily::import_weights(const std::string& path, bool directory, float* params,
                                        float*) const {
  std::string file_path = path;
  if (directory) {
    const std::string config_path = path + "/config.json";
    check_hf_llama_config(read_config_json(config_path), shape_, config_path);
    file_path = path + "/model.safetensors";
  }
  const SafetensorsFile file(file_path);
  std::set<std::string> used;
  size_t at = 0;
  for (const TensorSpec& t : description_.tensors) {
    if (!file.contains(t.name))
      throw RunError(file.path() + ": no tensor '" + t.name +
                     "'; not a Llama of the job's shape (check model.n_layer and "
                     "model.tie_embeddings)");
    used.insert(t.name);
    std::vector<int64_t> dims = t.shape;
    if (vocabulary_rows(t, shape_)) dims[0] = shape_.vocab;
    const size_t n = static_cast<size_t>(element_count(dims));
    file.read_f32(params + at, t.name, dims);
    std::memset(params + at + n, 0, (static_cast<size_t>(element_count(t.shape)) - n) * sizeof(float));
    at += static_cast<size_t>(element_count(t.shape));
  }
  for (const std::string& name : file.names()) {
    if (used.count(name) != 0 || name.ends_with("rotary_emb.inv_freq")) continue;
    if (name == "lm_head.weight" && shape_.tied) {  // tied: accepted as a copy of the embedding
      const size_t n = static_cast<size_t>(shape_.vocab) * shape_.n_embd;
      std::vector<float> head(n);
      file.read_f32(head.data(), name, {shape_.vocab, shape_.n_embd});
      if (std::memcmp(head.data(), params, n * sizeof(float)) != 0)
        throw RunError(file.path() + ": lm_head.weight differs from model.embed_tokens.weight; "
                                     "set model.tie_embeddings: false to load an untied head");
      continue;
    }
    throw RunError(file.path() + ": unexpected tensor '" + name +
                   "'; not a Llama of the job's shape (check model.n_layer and "
                   "model.tie_embeddings)");
  }
  return (directory ? "Hugging Face Llama " : "Hugging Face Llama weights ") + path;
}

std::unique_ptr<TextDecoder> LlamaFamily::make_decoder(const ParameterLayout& layout,
                                                       const float* params) const {
  return std::make_unique<LlamaDecoder>(shape_, layout, params);
}

}  // namespace sg
