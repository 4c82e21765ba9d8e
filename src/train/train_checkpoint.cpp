#include "train/train_checkpoint.h"

#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "config/load_job_spec.h"
#include "util/error.h"

namespace sg {
namespace {

void add_tensors(std::vector<TensorRef>& out, const std::vector<ParamTensor>& list,
                 const float* base, const std::string& prefix) {
  for (const ParamTensor& t : list) {
    out.push_back({prefix + t.name, DType::F32, t.shape, base + t.offset});
  }
}

// Copies each tensor of `list` from the checkpoint's whole tensor of the same name; a shard
// (tensor/pipeline parallelism) takes only its slices, straight from the mapped file.
void copy_tensors(float* base, const std::vector<ParamTensor>& list, const ModelShard& shard,
                  const SafetensorsFile& file, const std::string& prefix,
                  const std::string& where) {
  for (const ParamTensor& t : list) {
    const TensorRef& ref = file.get(prefix + t.name);
    if (ref.dtype != DType::F32 || ref.shape != t.global_shape) {
      throw RunError(where + ": tensor '" + prefix + t.name + "' is " + dtype_name(ref.dtype) +
                     " " + shape_text(ref.shape) + " but the job's model needs F32 " +
                     shape_text(t.global_shape) +
                     "; the checkpoint was written for a different model (check the model.* "
                     "keys of the job)");
    }
    slice_tensor(t, shard, static_cast<const float*>(ref.data), base);
  }
}

// The checkpoint's model record must be the job's: equal tensor shapes are not enough
// (n_head, or a vocabulary padding to the same size, leave the shapes alone).
void check_model_record(const LoadedCheckpoint& ck, const ModelFamily& family) {
  if (!ck.state.contains("model")) return;
  const nlohmann::json got = current_shape_record(ck.state["model"]);
  const nlohmann::json want = family.shape_record();
  for (const auto& [key, value] : want.items()) {
    if (got.contains(key) && got[key] == value) continue;
    const std::string name = key == "family" ? "model.arch" : "model." + key;
    throw RunError(ck.path + ": checkpoint was written for " + name + " " +
                   (got.contains(key) ? got[key].dump() : std::string("?")) + " but the job has " +
                   value.dump() + "; use the job that wrote it, or a new log.dir to start over");
  }
}

// A checkpoint is never written with a value that is not finite: the run stops instead, naming
// the last good checkpoint (the earlier ones are kept).
void refuse_non_finite(const std::string& checkpoints_dir, int64_t step,
                       const ParameterLayout& layout, const WholeTensors& whole) {
  const auto check = [&](const float* data, size_t n, const std::string& what) {
    if (data == nullptr) return;
    for (size_t i = 0; i < n; ++i) {
      if (std::isfinite(data[i])) continue;
      const auto checkpoints = list_checkpoints(checkpoints_dir);
      throw RunError(
          "not saving the checkpoint of step " + std::to_string(step) + ": " + what + " holds " +
          std::to_string(data[i]) + " at element " + std::to_string(i) +
          "; the earlier checkpoints are kept, the last good one is " +
          (checkpoints.empty() ? std::string("none (start over)") : checkpoints.back().second) +
          "; resume from it with a lower optim.lr");
    }
  };
  check(whole.params, layout.total(), "the parameters");
  check(whole.buffers, layout.buffer_total(), "the buffers (running statistics)");
  for (size_t i = 0; i < whole.state.size(); ++i) {
    check(whole.state[i], layout.total(), "the optimizer state " + whole.state_names[i]);
  }
}

}  // namespace

std::string save_training_checkpoint(const std::string& checkpoints_dir, const JobSpec& spec,
                                     const ModelFamily& family, const WholeTensors& whole,
                                     const TrainerState& state) {
  const ParameterLayout layout(family.description());
  refuse_non_finite(checkpoints_dir, state.step, layout, whole);
  std::map<std::string, std::vector<TensorRef>> files;
  auto& model = files["model.safetensors"];
  add_tensors(model, layout.tensors(), whole.params, "");
  if (!layout.buffers().empty()) add_tensors(model, layout.buffers(), whole.buffers, "");
  auto& optimizer = files["optimizer.safetensors"];
  for (size_t i = 0; i < whole.state_names.size(); ++i) {
    add_tensors(optimizer, layout.tensors(), whole.state[i], whole.state_names[i] + ".");
  }
  nlohmann::json j;
  j["step"] = state.step;
  j["train_sequences"] = state.train_samples;
  j["seed"] = state.seed;
  if (state.loss_scale > 0) {
    j["loss_scale"] = state.loss_scale;
    j["loss_scale_clean_steps"] = state.loss_scale_clean_steps;
  }
  if (state.skipped_steps > 0) {
    j["skipped_steps"] = state.skipped_steps;
    j["skipped_in_row"] = state.skipped_in_row;
  }
  j["sampler"] = "feistel-windows-v1";
  j["optimizer"] = whole.optimizer;
  j["model"] = family.shape_record();
  return save_checkpoint(checkpoints_dir, state.step, files, j, job_spec_to_yaml(spec),
                         spec.checkpoint.keep);
}

TrainerState load_training_checkpoint(const LoadedCheckpoint& ck, const ModelFamily& family,
                                      const ParameterLayout& layout, const LoadTargets& targets) {
  const std::string& path = ck.path;
  check_model_record(ck, family);
  auto file = [&](const std::string& name) -> const SafetensorsFile& {
    auto it = ck.files.find(name);
    if (it == ck.files.end()) {
      throw RunError(path + ": missing " + name + "; the checkpoint is incomplete");
    }
    return it->second;
  };
  const SafetensorsFile& model = file("model.safetensors");
  const size_t whole_tensors = family.description().tensors.size();
  if (model.names().size() != whole_tensors) {
    throw RunError(path + "/model.safetensors: holds " + std::to_string(model.names().size()) +
                   " tensors but the job's model has " + std::to_string(whole_tensors) +
                   "; the checkpoint was written for a different model (check model.n_layer "
                   "or model.depth)");
  }
  copy_tensors(targets.params, layout.tensors(), layout.shard(), model, "",
               path + "/model.safetensors");
  copy_tensors(targets.buffers, layout.buffers(), layout.shard(), model, "",
               path + "/model.safetensors");
  if (!targets.state_names.empty()) {
    const std::string written = ck.state.value("optimizer", std::string("adamw"));
    if (written != targets.optimizer) {
      throw RunError(path + ": checkpoint holds " + written + " optimizer state but the job has "
                     "optim.name " + targets.optimizer + "; use the optimizer that wrote it, or "
                     "a new log.dir to start over");
    }
    const SafetensorsFile& opt = file("optimizer.safetensors");
    for (size_t i = 0; i < targets.state_names.size(); ++i) {
      copy_tensors(targets.state[i], layout.tensors(), layout.shard(), opt,
                   targets.state_names[i] + ".", path + "/optimizer.safetensors");
    }
  }
  TrainerState state;
  try {
    state.step = ck.state.at("step").get<int64_t>();
    state.train_samples = ck.state.at("train_sequences").get<uint64_t>();
    state.seed = ck.state.at("seed").get<uint64_t>();
    state.loss_scale = ck.state.value("loss_scale", 0.0f);
    state.loss_scale_clean_steps = ck.state.value("loss_scale_clean_steps", int64_t{0});
    state.skipped_steps = ck.state.value("skipped_steps", int64_t{0});
    state.skipped_in_row = ck.state.value("skipped_in_row", 0);
  } catch (const nlohmann::json::exception& e) {
    throw RunError(path + "/manifest.json: trainer state is incomplete (" + e.what() +
                   "); resume from another checkpoint");
  }
  return state;
}

}  // namespace sg
