#pragma once
// What a training checkpoint holds, for any model family and optimizer:
//   model.safetensors      parameters and buffers (running statistics) by their global names
//                          and whole shapes;
//   optimizer.safetensors  each optimizer state tensor as "<state>.<name>" (AdamW "m."/"v.",
//                          SGD "momentum.");
//   manifest state         step, data position, seed, the optimizer's name and the model
//                          family's shape record (family and shape keys).
// Checkpoints hold whole tensors, so any mesh loads any checkpoint (resharding).
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "config/job_spec.h"
#include "model/model_family.h"
#include "model/parameter_layout.h"

namespace sg {

struct TrainerState {
  int64_t step = 0;             // optimizer steps done
  uint64_t train_samples = 0;   // samples the training source has handed out (data position)
  uint64_t seed = 0;            // sampler seed; the sampler has no other state
  // fp16's dynamic loss scale (0: not scaling) and the clean steps since it last changed.
  float loss_scale = 0;
  int64_t loss_scale_clean_steps = 0;
  // Steps whose update was skipped because the loss or gradients were not finite (fp16
  // overflows included), in all and in a row up to now.
  int64_t skipped_steps = 0;
  int skipped_in_row = 0;
};

// Whole tensors of the unsharded layout, as rank 0 assembled them.
struct WholeTensors {
  const float* params = nullptr;
  const float* buffers = nullptr;            // may be null when the model has none
  std::string optimizer;                     // optim.name
  std::vector<std::string> state_names;      // the optimizer's state, in order
  std::vector<const float*> state;           // one whole tensor set each
};

// Refuses (RunError naming the last good checkpoint, nothing written) tensors holding a value
// that is not finite.
std::string save_training_checkpoint(const std::string& checkpoints_dir, const JobSpec& spec,
                                     const ModelFamily& family, const WholeTensors& tensors,
                                     const TrainerState& state);

// Where a load puts this shard's tensors. state: one layout.total() buffer per state name
// (may be empty: weights only, for eval and sample).
struct LoadTargets {
  float* params = nullptr;
  float* buffers = nullptr;
  std::string optimizer;
  std::vector<std::string> state_names;
  std::vector<float*> state;
};

// Loads the checkpoint into this shard's buffers. Throws RunError naming the checkpoint when it
// is corrupt or was written for a different model (family or shape) or optimizer. The trainer's
// state (state.step, train_sequences, seed, loss_scale, loss_scale_clean_steps, skipped_steps,
// skipped_in_row, optimizer, model) is checked first, each value's type and range (step from 0
// to kMaxCheckpointStep and equal to the manifest's; the counts at most the steps done; the loss
// scale 0 or a power of two), a RunError naming the manifest and the field otherwise
// (docs/design-notes.md, "Checkpoint files").
TrainerState load_training_checkpoint(const LoadedCheckpoint& checkpoint,
                                      const ModelFamily& family, const ParameterLayout& layout,
                                      const LoadTargets& targets);

}  // namespace sg
