#pragma once
// Everything one process trains with, built once by set_up_training (training_setup.cpp) and
// used by the step (train_step.cpp), the evaluation and the checkpoints (trainer.cpp). Nothing
// here names a model: the family, the stage model and the data sources are interfaces.
#include <memory>
#include <optional>
#include <string>

#include "backend/backend.h"
#include "comm/communicator.h"
#include "config/job_spec.h"
#include "data/batch_source.h"
#include "model/model_family.h"
#include "parallel/data_parallel_optimizer.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/process_mesh.h"
#include "parallel/tensor_group.h"
#include "train/metrics_log.h"
#include "train/train_checkpoint.h"
#include "train/trainer.h"

namespace sg {

class GradientReduction;

struct TrainingRun {
  TrainingRun(const JobSpec& spec, Communicator& world, const TrainOptions& options,
              Backend& backend);
  ~TrainingRun();

  const JobSpec& spec;
  Communicator& world;
  TrainOptions options;
  Backend& backend;
  int threads = 1;
  std::string device_note;  // how this process uses its device, for the log ("" on the CPU)
  std::string run_dir, checkpoints_dir;

  std::unique_ptr<ModelFamily> family;
  ProcessMesh mesh;  // this process's place in the virtual mesh and its groups
  std::unique_ptr<TensorGroup> tensor_group;
  std::unique_ptr<ParameterLayout> layout;  // this process's shard of the model
  std::unique_ptr<DataParallelOptimizer> optimizer;
  Buffer params, grads, buffers;  // flat; params and grads padded for ZeRO
  std::unique_ptr<StageModel> stage;
  std::unique_ptr<PipelineRunner> runner;
  // Synchronised batch statistics: the local replicas run together as one batch of
  // local_replicas x micro_batch samples; evaluation then has its own stage of micro_batch.
  bool fused_replicas = false;
  std::unique_ptr<StageModel> eval_stage;
  std::unique_ptr<PipelineRunner> eval_runner;
  PipelineRunner& evaluation_runner() const { return eval_runner ? *eval_runner : *runner; }
  Dataset data;
  std::unique_ptr<GradientReduction> reduction;
  Buffer tied_scratch;

  TrainerState state;
  std::optional<std::string> resume_path;
  int64_t total_steps = 0, last_step = 0;
  std::optional<MetricsLog> log;  // rank 0

  // The virtual data-parallel replicas this process runs, one after another.
  int replicas = 1, local_replicas = 1, first_replica = 0;
  int per_replica = 1;  // samples per replica per step
  int accum = 1;        // micro-batches per replica per step
  float dloss = 1;      // 1 / (units in the global batch): the gradient of the mean loss
  double flops_per_step = 0, peak_flops = 1;  // this process's share, for MFU
  double last_save_seconds = 0;  // how long the last checkpoint took (for train.time_limit)

  float* param_data() const { return params.as<float>(); }
  float* grad_data() const { return grads.as<float>(); }
  float* buffer_data() const { return buffers.as<float>(); }
  bool root() const { return world.rank() == 0; }
};

// Validates the job against the world, builds the mesh, model, optimizer and data, initialises
// the weights and, where a checkpoint is chosen, resumes from it.
std::unique_ptr<TrainingRun> set_up_training(const JobSpec& spec, Communicator& world,
                                             const TrainOptions& options);

// One optimizer step of every local replica: forward and backward, the gradient reduction, the
// optimizer and the tied and buffer exchanges. Advances run.state.
struct StepResult {
  double loss = 0;  // mean over the global batch
  float grad_norm = 0;
  double lr = 0;
  float loss_scale = 0;  // fp16: the scale this step used (0 otherwise)
  bool skipped = false;   // the update was skipped: loss or gradients not finite
  bool overflow = false;  // fp16: because the scaled gradients overflowed
};
StepResult train_step(TrainingRun& run);

}  // namespace sg
