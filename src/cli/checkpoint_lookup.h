#pragma once
// Finding the checkpoint a command reads (`sample`, `eval`) and the job it belongs to.
#include <memory>
#include <string>
#include <vector>

#include "config/job_spec.h"
#include "model/model_family.h"
#include "model/parameter_layout.h"
#include "train/train_checkpoint.h"

namespace sg {

// A step_* directory as given, or the newest intact checkpoint of a run directory (or of its
// checkpoints/). RunError naming what was skipped when there is none.
std::string resolve_checkpoint(const std::string& path);

// A checkpoint's weights, ready for one process to run the model on all cores.
struct CheckpointModel {
  std::string path;  // the step_* directory
  JobSpec spec;
  std::unique_ptr<ModelFamily> family;
  std::unique_ptr<ParameterLayout> layout;  // the whole model
  std::vector<float> params, buffers;
  TrainerState state;
};

// resolve_checkpoint, its job (JOB when given, else the one recorded in the manifest; overrides
// apply) and its weights; sets the thread count to all cores.
CheckpointModel load_checkpoint_model(const std::string& job_path,
                                      const std::vector<std::string>& sets,
                                      const std::string& checkpoint);

}  // namespace sg
