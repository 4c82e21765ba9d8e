#include "train/train_checkpoint.h"

#include <cmath>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "checkpoint/json_fields.h"
#include "config/load_job_spec.h"
#include "train/loss_scale.h"
#include "util/error.h"

namespace sg {
namespace {

// The manifest's state object, read field by field; errors name the manifest and state.<key>.
JsonFields state_fields(const LoadedCheckpoint& ck) {
  return JsonFields(ck.state, ck.path + "/manifest.json", kCorruptCheckpointAdvice, "state.");
}

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
  const JsonFields state = state_fields(ck);
  if (!state.has("model")) return;
  const nlohmann::json got = current_shape_record(state.object("model").json());
  const nlohmann::json want = family.shape_record();
  for (const auto& [key, value] : want.items()) {
    if (got.contains(key) && got[key] == value) continue;
    const std::string name = key == "family" ? "model.arch" : "model." + key;
    throw RunError(ck.path + "/manifest.json: checkpoint was written for " + name + " " +
                   (got.contains(key) ? json_excerpt(got[key]) : std::string("?")) +
                   " (field state.model." + key + ") but the job has " + json_excerpt(value) +
                   "; use the job that wrote it, or a new log.dir to start over");
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

// The trainer's state as the manifest records it, every value checked.
TrainerState read_trainer_state(const LoadedCheckpoint& ck) {
  const JsonFields s = state_fields(ck);
  TrainerState state;
  state.step = s.integer("step", 0, kMaxCheckpointStep);
  if (state.step != ck.step)
    throw s.error("step", "is " + std::to_string(state.step) + " but the manifest's step is " +
                              std::to_string(ck.step) + " (the manifest is corrupt)");
  state.train_samples = s.unsigned_integer("train_sequences");
  state.seed = s.unsigned_integer("seed");
  const double scale = s.number_or("loss_scale", 0.0, 0.0, std::numeric_limits<float>::max());
  int exponent = 0;
  if (scale != 0 && (scale < kMinLossScale || std::frexp(scale, &exponent) != 0.5))
    throw s.wrong("loss_scale", "0 (not scaling) or a power of two from 1 to 2^127");
  state.loss_scale = static_cast<float>(scale);
  // Counts of steps, so none exceeds the steps done.
  state.loss_scale_clean_steps = s.integer_or("loss_scale_clean_steps", 0, 0, state.step);
  state.skipped_steps = s.integer_or("skipped_steps", 0, 0, state.step);
  state.skipped_in_row =
      static_cast<int>(s.integer_or("skipped_in_row", 0, 0, state.skipped_steps));
  return state;
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
  const TrainerState state = read_trainer_state(ck);  // checked before any tensor is copied
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
    const std::string written = state_fields(ck).string_or("optimizer", "adamw");
    if (written != targets.optimizer) {
      throw RunError(path + "/manifest.json: checkpoint holds " + excerpt(written) +
                     " optimizer state (field state.optimizer) but the job has optim.name " +
                     targets.optimizer + "; use the optimizer that wrote it, or a new log.dir "
                     "to start over");
    }
    const SafetensorsFile& opt = file("optimizer.safetensors");
    for (size_t i = 0; i < targets.state_names.size(); ++i) {
      copy_tensors(targets.state[i], layout.tensors(), layout.shard(), opt,
                   targets.state_names[i] + ".", path + "/optimizer.safetensors");
    }
  }
  return state;
}

}  // namespace sg
