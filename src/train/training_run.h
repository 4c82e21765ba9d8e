#pragma once
// Everything one process trains with, built once by set_up_training (training_setup.cpp) and
// used by the step (train_step.cpp), the evaluation and the checkpoints (trainer.cpp), in parts:
// the environment, the model shard, the replica plan, the data and the progress. Nothing here
// names a model: the family, the stage model and the data sources are interfaces.
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

// Where the run happens: the job, the processes, the device and the run directory. Every
// stage reads it; none changes it after set-up.
struct RunEnvironment {
  RunEnvironment(const JobSpec& spec, Communicator& world, const TrainOptions& options,
                 Backend& backend)
      : spec(spec), world(world), options(options), backend(backend) {}

  const JobSpec& spec;
  Communicator& world;
  TrainOptions options;
  Backend& backend;
  int threads = 1;
  std::string device_note;  // how this process uses its device, for the log ("" on the CPU)
  std::string run_dir, checkpoints_dir;

  bool root() const { return world.rank() == 0; }
};

// The shard of the model this process holds and runs: its place in the mesh, its tensors, the
// optimizer over them and the pipeline runners of its stage. Nothing here names a model.
struct ProcessModel {
  std::unique_ptr<ModelFamily> family;
  ProcessMesh mesh;  // this process's place in the virtual mesh and its groups
  std::unique_ptr<TensorGroup> tensor_group;
  std::unique_ptr<ParameterLayout> layout;  // this process's shard of the model
  std::unique_ptr<DataParallelOptimizer> optimizer;
  Buffer params, grads, buffers;  // flat; params and grads padded for ZeRO
  std::unique_ptr<StageModel> stage;
  std::unique_ptr<PipelineRunner> runner;
  // With synchronised batch statistics the local replicas train as one batch; evaluation then
  // has its own stage of one micro-batch.
  std::unique_ptr<StageModel> eval_stage;
  std::unique_ptr<PipelineRunner> eval_runner;
  Buffer tied_scratch;

  PipelineRunner& evaluation_runner() const { return eval_runner ? *eval_runner : *runner; }
  float* param_data() const { return params.as<float>(); }
  float* grad_data() const { return grads.as<float>(); }
  float* buffer_data() const { return buffers.as<float>(); }
  size_t grad_floats() const { return grads.bytes() / sizeof(float); }
  size_t buffer_floats() const { return buffers.bytes() / sizeof(float); }
};

// The virtual data-parallel replicas this process runs, one after another (or together, as one
// batch, where the family synchronises batch statistics), and which samples each step reads.
struct ReplicaPlan {
  int replicas = 1, local = 1, first = 0;  // in the job; on this process; its first
  int per_replica = 1;  // samples per replica per step
  int accum = 1;        // micro-batches per replica per step
  int micro = 1;        // samples per micro-batch
  float dloss = 1;      // 1 / (units in the global batch): the gradient of the mean loss
  bool fused = false;   // the local replicas run together as one batch

  // The first sample of replica r's micro-batch a, in a step starting at `step_start`.
  uint64_t first_sample(uint64_t step_start, int r, int a) const {
    return step_start + static_cast<uint64_t>(r) * static_cast<uint64_t>(per_replica) +
           static_cast<uint64_t>(a) * static_cast<uint64_t>(micro);
  }
};

// Where the run stands: the state a checkpoint keeps, and where this run stops.
struct RunProgress {
  TrainerState state;
  std::optional<std::string> resume_path;
  int64_t total_steps = 0, last_step = 0;
  double last_save_seconds = 0;  // how long the last checkpoint took (for train.time_limit)
};

// Everything one process trains with, in the parts each stage of the trainer takes.
struct TrainingRun {
  TrainingRun(const JobSpec& spec, Communicator& world, const TrainOptions& options,
              Backend& backend);
  ~TrainingRun();

  RunEnvironment env;
  ProcessModel model;
  ReplicaPlan plan;
  Dataset data;
  std::unique_ptr<GradientReduction> reduction;
  RunProgress progress;
  std::optional<MetricsLog> log;                // rank 0
  double flops_per_step = 0, peak_flops = 1;    // this process's share, for MFU
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
