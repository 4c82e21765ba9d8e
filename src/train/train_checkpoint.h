#pragma once
// What a training checkpoint holds and how the trainer's state maps onto the checkpoint module:
// model.safetensors (parameters by their global names and full shapes), optimizer.safetensors
// (AdamW moments "m.<name>", "v.<name>"), and a state object with the step and the data position.
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "config/job_spec.h"
#include "model/parameter_layout.h"

namespace sg {

struct TrainerState {
  int64_t step = 0;               // optimizer steps done
  uint64_t train_sequences = 0;   // sequences the sampler has handed out (data position)
  uint64_t seed = 0;              // sampler seed; the sampler has no other state
};

std::string save_training_checkpoint(const std::string& checkpoints_dir, const JobSpec& spec,
                                     const ParameterLayout& layout, const float* params,
                                     const float* m, const float* v, const TrainerState& state);

// Loads the checkpoint at `path` into params/m/v (each layout.total() floats). A shard's layout
// takes its slices of the whole tensors, so any mesh loads any checkpoint. Throws RunError
// naming the checkpoint when it is corrupt or was written for a different model shape.
TrainerState load_training_checkpoint(const LoadedCheckpoint& checkpoint,
                                      const ParameterLayout& layout, float* params, float* m,
                                      float* v);
TrainerState load_training_checkpoint(const std::string& path, const ParameterLayout& layout,
                                      float* params, float* m, float* v);

}  // namespace sg
