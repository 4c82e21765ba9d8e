// ResNet's weights as a torchvision state dict (`export --format torchvision`,
// model.init_from): the family's side of model_family.h's weight methods.
#include <filesystem>
#include <fmt/format.h>

#include "model/resnet_family.h"
#include "model/weight_formats.h"
#include "util/error.h"

namespace sg {
namespace fs = std::filesystem;

// `path` is the state dict's file when it ends in .safetensors, else a directory that gets
// model.safetensors.
std::string ResNetFamily::export_weights(const std::string& path, const float* params,
                                         const float* buffers, const ExportOptions& options) const {
  if (!options.tokenizer_dir.empty())
    throw SpecError("--tokenizer goes with --format hf (GPT-2) only");
  std::string file = path;
  if (fs::path(file).extension() != ".safetensors") {
    make_export_directory(file);
    file = (fs::path(file) / "model.safetensors").string();
  } else if (fs::path(file).has_parent_path()) {
    make_export_directory(fs::path(file).parent_path().string());
  }
  write_foreign_tensors(file, resnet_to_torchvision(description(), params, buffers, options.step));
  return fmt::format("{} (torchvision ResNet-{} state dict)", file, shape_.depth);
}

std::string ResNetFamily::import_weights(const std::string& path, bool directory, float* params,
                                         float* buffers) const {
  if (directory)
    throw SpecError("model.init_from " + path +
                    " is a Hugging Face directory, which is read for model.arch gpt2 only, but "
                    "the job has model.arch " + name());
  torchvision_to_resnet(SafetensorsFile(path), description(), params, buffers);
  return "torchvision state dict " + path;
}

}  // namespace sg
