#include "model/weight_formats.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "checkpoint/json_fields.h"
#include "data/file_io.h"
#include "model/resnet_family.h"
#include "util/error.h"

namespace sg {
namespace fs = std::filesystem;
namespace {

constexpr const char* kHfPrefix = "transformer.";

// Our GPT-2 name -> Hugging Face's, without the "transformer." prefix.
std::string hf_name(const std::string& name) {
  if (name == "wte" || name == "wpe") return name + ".weight";
  return name;
}

// (rows, cols) -> (cols, rows); in is (rows, cols), out is (cols, rows).
void transpose(float* out, const float* in, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = in[r * cols + c];
  }
}

// Walks the whole model's tensors with their offsets in the unsharded flat buffers.
template <class Fn>
void for_each_whole_tensor(const ModelDescription& d, Fn&& fn) {
  size_t params_at = 0, buffers_at = 0;
  for (const TensorSpec& t : d.tensors) {
    size_t& at = t.trainable ? params_at : buffers_at;
    fn(t, at);
    at += static_cast<size_t>(element_count(t.shape));
  }
}

// A config value as an error message echoes it: at most kMaxEchoChars characters.
std::string json_text(const nlohmann::json& j) {
  return j.is_string() ? excerpt(j.get_ref<const std::string&>()) : json_excerpt(j);
}

}  // namespace

TensorRef ForeignTensor::ref() const {
  if (!i64.empty()) return {name, DType::I64, shape, i64.data()};
  return {name, DType::F32, shape, f32.data()};
}

bool is_hf_conv1d_weight(const std::string& name) {
  return name.ends_with("attn.c_attn.weight") || name.ends_with("attn.c_proj.weight") ||
         name.ends_with("mlp.c_fc.weight") || name.ends_with("mlp.c_proj.weight");
}

std::vector<ForeignTensor> gpt2_to_hf_tensors(const GPT2Shape& shape, const float* params) {
  std::vector<ForeignTensor> out;
  for_each_whole_tensor(gpt2_description(shape), [&](const TensorSpec& t, size_t offset) {
    ForeignTensor f;
    f.name = kHfPrefix + hf_name(t.name);
    f.shape = t.shape;
    const float* src = params + offset;
    if (t.name == "wte") f.shape[0] = shape.vocab;  // the padding rows are ours alone
    const size_t n = static_cast<size_t>(element_count(f.shape));
    f.f32.resize(n);
    if (is_hf_conv1d_weight(t.name)) {
      f.shape = {t.shape[1], t.shape[0]};
      transpose(f.f32.data(), src, t.shape[0], t.shape[1]);
    } else {
      std::memcpy(f.f32.data(), src, n * sizeof(float));
    }
    out.push_back(std::move(f));
  });
  return out;
}

nlohmann::json hf_gpt2_config(const GPT2Shape& s) {
  // GPT-2's own special token is the last of its 50257; a smaller vocabulary keeps the
  // convention (its last id).
  const int eos = s.vocab - 1;
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"vocab_size", s.vocab},
          {"n_positions", s.context},
          {"n_ctx", s.context},
          {"n_embd", s.n_embd},
          {"n_layer", s.n_layer},
          {"n_head", s.n_head},
          {"n_inner", nullptr},
          {"activation_function", "gelu_new"},
          {"layer_norm_epsilon", 1e-5},
          {"initializer_range", 0.02},
          {"resid_pdrop", 0.0},
          {"embd_pdrop", 0.0},
          {"attn_pdrop", 0.0},
          {"scale_attn_weights", true},
          {"scale_attn_by_inverse_layer_idx", false},
          {"reorder_and_upcast_attn", false},
          {"tie_word_embeddings", true},
          {"use_cache", true},
          {"bos_token_id", eos},
          {"eos_token_id", eos},
          {"torch_dtype", "float32"}};
}

void check_config_int(const nlohmann::json& config, const char* key, int64_t want,
                      const char* job_key, const std::string& where) {
  if (!config.contains(key) || !config[key].is_number_integer())
    throw SpecError(where + ": needs an integer " + key);
  const int64_t got = config[key].get<int64_t>();
  if (got != want)
    throw SpecError(fmt::format("{}: {} is {} but the job has {} {}; set {}: {} to load these "
                                "weights",
                                where, key, got, job_key, want, job_key, got));
}

void check_hf_gpt2_config(const nlohmann::json& config, const GPT2Shape& s,
                          const std::string& where) {
  if (!config.is_object())
    throw SpecError(where + ": not a JSON object; expected a GPT-2 config.json");
  const std::string type = config.contains("model_type") ? json_text(config["model_type"]) : "";
  if (type != "gpt2") {
    throw SpecError(where + ": model_type is " + (type.empty() ? "missing" : "'" + type + "'") +
                    "; model.init_from reads GPT-2 (model_type gpt2) only");
  }
  const auto check_int = [&](const char* key, int want, const char* job_key) {
    check_config_int(config, key, want, job_key, where);
  };
  check_int("n_layer", s.n_layer, "model.n_layer");
  check_int("n_head", s.n_head, "model.n_head");
  check_int("n_embd", s.n_embd, "model.n_embd");
  check_int("n_positions", s.context, "model.context");
  check_int("vocab_size", s.vocab, "model.vocab");
  const auto refuse = [&](const std::string& key, const std::string& why) {
    throw SpecError(where + ": " + key + " " + json_text(config[key]) + " " + why);
  };
  if (config.contains("activation_function") &&
      json_text(config["activation_function"]) != "gelu_new")
    refuse("activation_function", "is not gelu_new (the tanh GELU our GPT-2 computes)");
  if (config.contains("n_inner") && !config["n_inner"].is_null() &&
      config["n_inner"] != nlohmann::json(4 * s.n_embd))
    refuse("n_inner", "is not 4 * n_embd, the MLP width our GPT-2 has");
  if (config.contains("layer_norm_epsilon") && config["layer_norm_epsilon"].is_number() &&
      std::fabs(config["layer_norm_epsilon"].get<double>() - 1e-5) > 1e-12)
    refuse("layer_norm_epsilon", "is not 1e-5, the epsilon our layer norms use");
  if (config.contains("tie_word_embeddings") && config["tie_word_embeddings"] == false)
    refuse("tie_word_embeddings", "is false: our LM head is tied to wte");
  if (config.contains("scale_attn_weights") && config["scale_attn_weights"] == false)
    refuse("scale_attn_weights", "is false: our attention scales by 1/sqrt(head size)");
  if (config.contains("scale_attn_by_inverse_layer_idx") &&
      config["scale_attn_by_inverse_layer_idx"] == true)
    refuse("scale_attn_by_inverse_layer_idx", "is true: our attention does not scale by layer");
}

void hf_to_gpt2(const SafetensorsFile& file, const GPT2Shape& shape, float* params) {
  const std::vector<std::string> names = file.names();
  const bool prefixed = file.contains(std::string(kHfPrefix) + "wte.weight");
  const std::string prefix = prefixed ? kHfPrefix : "";
  std::set<std::string> used;
  for_each_whole_tensor(gpt2_description(shape), [&](const TensorSpec& t, size_t offset) {
    const std::string name = prefix + hf_name(t.name);
    if (!file.contains(name)) {
      throw RunError(file.path() + ": no tensor '" + name +
                     "'; not a GPT-2 of the job's shape "
                     "(check model.n_layer)");
    }
    used.insert(name);
    float* dst = params + offset;
    if (t.name == "wte") {
      const size_t real = static_cast<size_t>(shape.vocab) * shape.n_embd;
      file.read_f32(dst, name, {shape.vocab, shape.n_embd});
      std::memset(dst + real, 0, (element_count(t.shape) - real) * sizeof(float));
    } else if (is_hf_conv1d_weight(t.name)) {
      std::vector<float> hf(static_cast<size_t>(element_count(t.shape)));
      file.read_f32(hf.data(), name, {t.shape[1], t.shape[0]});
      transpose(dst, hf.data(), t.shape[1], t.shape[0]);
    } else {
      file.read_f32(dst, name, t.shape);
    }
  });
  for (const std::string& name : names) {
    if (used.count(name) != 0) continue;
    std::string bare = name.starts_with(kHfPrefix) ? name.substr(std::strlen(kHfPrefix)) : name;
    if (bare.ends_with(".attn.bias") || bare.ends_with(".attn.masked_bias")) continue;  // masks
    if (bare == "lm_head.weight") {
      // Tied: accepted only as a copy of wte.
      const size_t n = static_cast<size_t>(shape.vocab) * shape.n_embd;
      std::vector<float> head(n);
      file.read_f32(head.data(), name, {shape.vocab, shape.n_embd});
      if (std::memcmp(head.data(), params, n * sizeof(float)) != 0) {
        throw RunError(file.path() +
                       ": lm_head.weight differs from wte.weight; our GPT-2 ties "
                       "its LM head to wte, so untied weights cannot be loaded");
      }
      continue;
    }
    throw RunError(file.path() + ": unexpected tensor '" + name +
                   "'; not a GPT-2 of the job's "
                   "shape (check model.n_layer)");
  }
}

std::vector<ForeignTensor> resnet_to_torchvision(const ModelDescription& d, const float* params,
                                                 const float* buffers, int64_t batches_tracked) {
  std::vector<ForeignTensor> out;
  for_each_whole_tensor(d, [&](const TensorSpec& t, size_t offset) {
    ForeignTensor f;
    f.name = t.name;
    f.shape = t.shape;
    const float* src = (t.trainable ? params : buffers) + offset;
    f.f32.assign(src, src + element_count(t.shape));
    out.push_back(std::move(f));
    if (t.name.ends_with(".running_var")) {
      ForeignTensor tracked;
      tracked.name =
          t.name.substr(0, t.name.size() - std::strlen("running_var")) + "num_batches_tracked";
      tracked.i64 = {batches_tracked};  // shape [] (a scalar), as torch stores it
      out.push_back(std::move(tracked));
    }
  });
  return out;
}

void torchvision_to_resnet(const SafetensorsFile& file, const ModelDescription& d, float* params,
                           float* buffers) {
  std::set<std::string> used;
  for_each_whole_tensor(d, [&](const TensorSpec& t, size_t offset) {
    if (!file.contains(t.name)) {
      throw RunError(file.path() + ": no tensor '" + t.name +
                     "'; the state dict is not a "
                     "torchvision ResNet of the job's model.depth");
    }
    used.insert(t.name);
    const TensorRef& ref = file.get(t.name);
    if (ref.shape != t.shape) {
      const std::string key =
          t.name.starts_with("fc.")
              ? (ref.shape.empty() || ref.shape[0] == t.shape[0] ? "model.width or model.depth"
                                                                 : "model.classes")
              : "model.width or model.depth";
      throw RunError(file.path() + ": tensor '" + t.name + "' is " + shape_text(ref.shape) +
                     " but the job's ResNet needs " + shape_text(t.shape) + "; check " + key);
    }
    file.read_f32((t.trainable ? params : buffers) + offset, t.name, t.shape);
  });
  for (const std::string& name : file.names()) {
    if (used.count(name) != 0 || name.ends_with(".num_batches_tracked")) continue;
    throw RunError(file.path() + ": unexpected tensor '" + name +
                   "'; the state dict is not a "
                   "torchvision ResNet of the job's model.depth");
  }
}

// GPT-2's tokenizer files under the names transformers' GPT2Tokenizer(Fast) reads.
void copy_gpt2_tokenizer(const std::string& tokenizer_dir, const std::string& dir, int context) {
  const std::pair<const char*, const char*> files[] = {{"encoder.json", "vocab.json"},
                                                       {"vocab.bpe", "merges.txt"}};
  for (const auto& [ours, theirs] : files) {
    const fs::path from = fs::path(tokenizer_dir) / ours;
    if (!fs::is_regular_file(from))
      throw RunError(from.string() +
                     ": missing; --tokenizer needs GPT-2's encoder.json and "
                     "vocab.bpe");
    std::error_code ec;
    fs::copy_file(from, fs::path(dir) / theirs, fs::copy_options::overwrite_existing, ec);
    if (ec) throw RunError(from.string() + ": cannot copy to " + dir + ": " + ec.message());
  }
  const nlohmann::json config = {
      {"tokenizer_class", "GPT2Tokenizer"}, {"model_max_length", context},
      {"bos_token", "<|endoftext|>"},       {"eos_token", "<|endoftext|>"},
      {"unk_token", "<|endoftext|>"},       {"add_prefix_space", false}};
  write_text_file((fs::path(dir) / "tokenizer_config.json").string(), config.dump(2) + "\n");
}

void write_foreign_tensors(const std::string& path, const std::vector<ForeignTensor>& tensors) {
  std::vector<TensorRef> refs;
  for (const ForeignTensor& t : tensors) refs.push_back(t.ref());
  // transformers refuses a safetensors file whose metadata lacks format "pt".
  write_safetensors(path, refs, {{"format", "pt"}});
}

void make_export_directory(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw RunError(dir + ": cannot create the export directory: " + ec.message());
}

nlohmann::json read_config_json(const std::string& config_path) {
  std::ifstream in(config_path, std::ios::binary);
  if (!in) throw RunError(config_path + ": cannot read");
  std::stringstream text;
  text << in.rdbuf();
  // Nesting bounded before parsing, as for every JSON file read (checkpoint/json_fields.h).
  return parse_bounded_json(text.str(), config_path, "",
                            "give the config.json that save_pretrained wrote with the weights");
}

}  // namespace sg
