#include "train/train_checkpoint.h"

#include <cstring>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "config/load_job_spec.h"
#include "util/error.h"

namespace sg {
namespace {

std::vector<TensorRef> tensors_of(const ParameterLayout& layout, const float* base,
                                  const std::string& prefix) {
  std::vector<TensorRef> out;
  for (const ParamTensor& t : layout.tensors()) {
    out.push_back({prefix + t.name, DType::F32, t.shape, base + t.offset});
  }
  return out;
}

// Copies each tensor of `layout` from the checkpoint's whole tensor of the same name; a shard
// (tensor/pipeline parallelism) takes only its slices, straight from the mapped file.
void copy_tensors(float* base, const ParameterLayout& layout, const SafetensorsFile& file,
                  const std::string& prefix, const std::string& where) {
  for (const ParamTensor& t : layout.tensors()) {
    const TensorRef& ref = file.get(prefix + t.name);
    if (ref.dtype != DType::F32 || ref.shape != t.global_shape) {
      std::string want, got;
      for (auto d : t.global_shape) want += (want.empty() ? "" : "x") + std::to_string(d);
      for (auto d : ref.shape) got += (got.empty() ? "" : "x") + std::to_string(d);
      throw RunError(where + ": tensor '" + prefix + t.name + "' has shape " + got +
                     " but the job's model needs F32 " + want +
                     "; the checkpoint was written for a different model (check the model.* "
                     "keys of the job)");
    }
    slice_tensor(t, layout.shard(), static_cast<const float*>(ref.data), base);
  }
}

}  // namespace

std::string save_training_checkpoint(const std::string& checkpoints_dir, const JobSpec& spec,
                                     const ParameterLayout& layout, const float* params,
                                     const float* m, const float* v, const TrainerState& state) {
  std::map<std::string, std::vector<TensorRef>> files;
  files["model.safetensors"] = tensors_of(layout, params, "");
  auto moments = tensors_of(layout, m, "m.");
  auto second = tensors_of(layout, v, "v.");
  moments.insert(moments.end(), second.begin(), second.end());
  files["optimizer.safetensors"] = std::move(moments);
  nlohmann::json j;
  j["step"] = state.step;
  j["train_sequences"] = state.train_sequences;
  j["seed"] = state.seed;
  j["sampler"] = "feistel-windows-v1";
  const GPT2Shape& shape = layout.shape();
  j["model"] = {{"n_layer", shape.n_layer}, {"n_head", shape.n_head}, {"n_embd", shape.n_embd},
                {"context", shape.context}, {"vocab", shape.vocab}};
  return save_checkpoint(checkpoints_dir, state.step, files, j, job_spec_to_yaml(spec),
                         spec.checkpoint.keep);
}

TrainerState load_training_checkpoint(const std::string& path, const ParameterLayout& layout,
                                      float* params, float* m, float* v) {
  return load_training_checkpoint(load_checkpoint(path), layout, params, m, v);
}

TrainerState load_training_checkpoint(const LoadedCheckpoint& ck, const ParameterLayout& layout,
                                      float* params, float* m, float* v) {
  const std::string& path = ck.path;
  // The model the checkpoint was written for must be the job's: equal tensor shapes are not
  // enough (n_head, or a vocabulary padding to the same size, leave the shapes alone).
  if (ck.state.contains("model")) {
    const GPT2Shape& want = layout.shape();
    const nlohmann::json& got = ck.state["model"];
    for (auto [key, value] : {std::pair{"n_layer", want.n_layer}, {"n_head", want.n_head},
                              {"n_embd", want.n_embd}, {"context", want.context},
                              {"vocab", want.vocab}}) {
      if (!got.contains(key) || got[key] != value) {
        throw RunError(path + ": checkpoint was written for model." + key + " " +
                       (got.contains(key) ? got[key].dump() : std::string("?")) +
                       " but the job has " + std::to_string(value) +
                       "; use the job that wrote it, or a new log.dir to start over");
      }
    }
  }
  auto file = [&](const std::string& name) -> const SafetensorsFile& {
    auto it = ck.files.find(name);
    if (it == ck.files.end()) {
      throw RunError(path + ": missing " + name + "; the checkpoint is incomplete");
    }
    return it->second;
  };
  const SafetensorsFile& model = file("model.safetensors");
  const size_t whole_tensors = ParameterLayout(layout.shape()).tensors().size();
  if (model.names().size() != whole_tensors) {
    throw RunError(path + "/model.safetensors: holds " + std::to_string(model.names().size()) +
                   " tensors but the job's model has " + std::to_string(whole_tensors) +
                   "; the checkpoint was written for a different model (check model.n_layer)");
  }
  copy_tensors(params, layout, model, "", path + "/model.safetensors");
  const SafetensorsFile& opt = file("optimizer.safetensors");
  copy_tensors(m, layout, opt, "m.", path + "/optimizer.safetensors");
  copy_tensors(v, layout, opt, "v.", path + "/optimizer.safetensors");
  TrainerState state;
  try {
    state.step = ck.state.at("step").get<int64_t>();
    state.train_sequences = ck.state.at("train_sequences").get<uint64_t>();
    state.seed = ck.state.at("seed").get<uint64_t>();
  } catch (const nlohmann::json::exception& e) {
    throw RunError(path + "/manifest.json: trainer state is incomplete (" + e.what() +
                   "); resume from another checkpoint");
  }
  return state;
}

}  // namespace sg
