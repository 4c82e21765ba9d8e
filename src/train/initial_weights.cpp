#include "train/initial_weights.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "checkpoint/checkpoint.h"
#include "model/gpt2_family.h"
#include "model/resnet_family.h"
#include "model/weight_formats.h"
#include "train/train_checkpoint.h"
#include "util/error.h"

namespace sg {
namespace fs = std::filesystem;
namespace {

// A step_* directory as given, else the newest intact checkpoint of a run directory (or of its
// checkpoints/), as `eval --checkpoint` resolves it; empty when there is none.
std::string find_checkpoint(const std::string& path) {
  if (fs::exists(fs::path(path) / "manifest.json")) return path;
  for (const std::string& dir : {path, path + "/checkpoints"}) {
    if (!fs::is_directory(dir)) continue;
    if (auto found = find_resume_checkpoint(dir, "auto", nullptr)) return *found;
  }
  return "";
}

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RunError(path + ": cannot read");
  std::stringstream text;
  text << in.rdbuf();
  try {
    return nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw RunError(path + ": not valid JSON (error at byte " + std::to_string(e.byte) + ")");
  }
}

// Slices whole tensors (the unsharded layout's buffers) into this shard.
void slice_whole(const ParameterLayout& layout, const std::vector<float>& whole_params,
                 const std::vector<float>& whole_buffers, float* params, float* buffers) {
  slice_from_global(layout, whole_params.data(), params);
  for (const ParamTensor& t : layout.buffers()) {
    slice_tensor(t, layout.shard(), whole_buffers.data() + t.global_offset, buffers);
  }
}

}  // namespace

WeightSource classify_weight_source(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_regular_file(p, ec)) {
    if (p.extension() == ".safetensors") return WeightSource::kSafetensorsFile;
    throw SpecError("model.init_from " + path +
                    " is a file but not a .safetensors file; give a "
                    "safetensors state dict, a Hugging Face GPT-2 directory or one of our "
                    "checkpoints (PyTorch .bin/.pt files are not read: save them with "
                    "safetensors.torch.save_file)");
  }
  if (!fs::is_directory(p, ec)) {
    throw SpecError("model.init_from " + path +
                    " does not exist; give a Hugging Face GPT-2 "
                    "directory, a .safetensors state dict, or a checkpoint or run directory");
  }
  if (fs::exists(p / "config.json", ec)) {
    if (fs::exists(p / "model.safetensors", ec)) return WeightSource::kHuggingFace;
    if (fs::exists(p / "model.safetensors.index.json", ec))
      throw SpecError("model.init_from " + path +
                      " holds a sharded model.safetensors.index.json; "
                      "only a single model.safetensors is read (save it with "
                      "save_pretrained(dir, max_shard_size=\"100GB\"))");
    throw SpecError(
        "model.init_from " + path + " has config.json but no model.safetensors" +
        (fs::exists(p / "pytorch_model.bin", ec)
             ? std::string(" (pytorch_model.bin is not read: convert it with "
                           "transformers' save_pretrained(dir, safe_serialization=True))")
             : std::string()));
  }
  if (!find_checkpoint(path).empty()) return WeightSource::kCheckpoint;
  throw SpecError("model.init_from " + path +
                  " is a directory with neither config.json (a "
                  "Hugging Face model) nor an intact checkpoint (step_* with manifest.json)");
}

std::string load_initial_weights(const std::string& path, const ModelFamily& family,
                                 const ParameterLayout& layout, float* params, float* buffers) {
  const WeightSource source = classify_weight_source(path);
  if (source == WeightSource::kCheckpoint) {
    const std::string step_dir = find_checkpoint(path);
    const LoadedCheckpoint loaded = load_checkpoint(step_dir);
    LoadTargets weights;  // no optimizer state: the run starts its own
    weights.params = params;
    weights.buffers = buffers;
    const TrainerState state = load_training_checkpoint(loaded, family, layout, weights);
    return "the weights of checkpoint " + step_dir + " (step " + std::to_string(state.step) + ")";
  }
  const ParameterLayout whole(family.description());
  std::vector<float> whole_params(whole.total(), 0.0f), whole_buffers(whole.buffer_total(), 0.0f);
  const auto* gpt2 = dynamic_cast<const GPT2Family*>(&family);
  const auto* resnet = dynamic_cast<const ResNetFamily*>(&family);
  std::string what;
  if (source == WeightSource::kHuggingFace) {
    if (gpt2 == nullptr)
      throw SpecError("model.init_from " + path +
                      " is a Hugging Face directory, which is read "
                      "for model.arch gpt2 only, but the job has model.arch " +
                      family.name());
    const std::string config_path = (fs::path(path) / "config.json").string();
    check_hf_gpt2_config(read_json_file(config_path), gpt2->shape(), config_path);
    hf_to_gpt2(SafetensorsFile((fs::path(path) / "model.safetensors").string()), gpt2->shape(),
               whole_params.data());
    what = "Hugging Face GPT-2 " + path;
  } else if (gpt2 != nullptr) {
    hf_to_gpt2(SafetensorsFile(path), gpt2->shape(), whole_params.data());
    what = "Hugging Face GPT-2 weights " + path;
  } else if (resnet != nullptr) {
    torchvision_to_resnet(SafetensorsFile(path), family.description(), whole_params.data(),
                          whole_buffers.data());
    what = "torchvision state dict " + path;
  } else {
    throw SpecError("model.init_from: model.arch " + family.name() +
                    " cannot start from a safetensors file; give one of our checkpoints");
  }
  slice_whole(layout, whole_params, whole_buffers, params, buffers);
  return what;
}

}  // namespace sg
