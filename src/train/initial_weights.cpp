#include "train/initial_weights.h"

#include <filesystem>

#include "checkpoint/checkpoint.h"
#include "model/model_family.h"
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
                    "safetensors state dict, a Hugging Face directory (GPT-2, Llama) or one of our "
                    "checkpoints (PyTorch .bin/.pt files are not read: save them with "
                    "safetensors.torch.save_file)");
  }
  if (!fs::is_directory(p, ec)) {
    throw SpecError("model.init_from " + path +
                    " does not exist; give a Hugging Face (GPT-2, Llama) "
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
  const std::string what =
      family.import_weights(path, source == WeightSource::kHuggingFace, whole_params.data(),
                            whole_buffers.data());
  slice_whole(layout, whole_params, whole_buffers, params, buffers);
  return what;
}

}  // namespace sg
