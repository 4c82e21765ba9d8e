// GPT-2's weights in Hugging Face's layout (`export --format hf`, model.init_from) and its text
// decoder (`sample`): the family's side of model_family.h's weight and generation methods.
#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/gpt2_decoder.h"
#include "model/gpt2_family.h"
#include "data/file_io.h"
#include "model/weight_formats.h"
#include "util/error.h"

namespace sg {
namespace fs = std::filesystem;

std::string GPT2Family::export_weights(const std::string& dir, const float* params, const float*,
                                       const ExportOptions& options) const {
  make_export_directory(dir);
  write_text_file((fs::path(dir) / "config.json").string(), hf_gpt2_config(shape_).dump(2) + "\n");
  write_foreign_tensors((fs::path(dir) / "model.safetensors").string(),
                        gpt2_to_hf_tensors(shape_, params));
  std::string extra;
  if (!options.tokenizer_dir.empty()) {
    copy_gpt2_tokenizer(options.tokenizer_dir, dir, shape_.context);
    extra = ", vocab.json, merges.txt, tokenizer_config.json";
  }
  return fmt::format("{} (Hugging Face GPT-2: config.json, model.safetensors{})", dir, extra);
}

std::string GPT2Family::import_weights(const std::string& path, bool directory, float* params,
                                       float*) const {
  if (directory) {
    const std::string config_path = path + "/config.json";
    check_hf_gpt2_config(read_config_json(config_path), shape_, config_path);
    hf_to_gpt2(SafetensorsFile(path + "/model.safetensors"), shape_, params);
    return "Hugging Face GPT-2 " + path;
  }
  hf_to_gpt2(SafetensorsFile(path), shape_, params);
  return "Hugging Face GPT-2 weights " + path;
}

std::unique_ptr<TextDecoder> GPT2Family::make_decoder(const ParameterLayout& layout,
                                                      const float* params) const {
  return std::make_unique<GPT2Decoder>(shape_, layout, params);
}

}  // namespace sg
