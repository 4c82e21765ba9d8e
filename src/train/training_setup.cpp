// Building a TrainingRun (training_run.h): the checks of the job against the world, the mesh,
// the model shard, the buffers, the optimizer, the data and the resume.
#include <cblas.h>
#include <omp.h>

#include <chrono>
#include <filesystem>
#include <limits>
#include <thread>

#include <fmt/format.h>

#include "backend/cpu_peak.h"
#include "backend/device.h"
#include "backend/gpu_peak.h"
#include "backend/host_mirror.h"
#include "checkpoint/checkpoint.h"
#include "config/load_job_spec.h"
#include "data/file_io.h"
#include "launch/process_world.h"
#include "parallel/deterministic_reduce.h"
#include "train/device_placement.h"
#include "train/gradient_reduction.h"
#include "train/initial_weights.h"
#include "train/loss_scale.h"
#include "train/training_run.h"
#include "util/error.h"

namespace sg {
namespace {

// Rank 0 alone decides which checkpoint to resume from and tells the others, so every rank
// resumes the same step even where their views of the file system could differ. With
// checkpoint.resume: never, an earlier run's checkpoints are moved aside (not deleted), so a
// later `auto` cannot resume the old run by mistake.
std::optional<std::string> choose_resume_checkpoint(const JobSpec& spec,
                                                    const std::string& checkpoints_dir,
                                                    Communicator& world) {
  std::string chosen;
  if (world.rank() == 0) {
    if (spec.checkpoint.resume == "never" && !list_checkpoints(checkpoints_dir).empty()) {
      const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
      char stamp[32];
      std::strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%S", std::gmtime(&now));
      std::string aside = checkpoints_dir + ".replaced-" + stamp;
      for (int n = 2; std::filesystem::exists(aside); ++n) {
        aside = checkpoints_dir + ".replaced-" + stamp + "-" + std::to_string(n);
      }
      std::filesystem::rename(checkpoints_dir, aside);
      std::filesystem::create_directories(checkpoints_dir);
      fmt::print(stderr,
                 "warning: checkpoint.resume is never: moved the earlier run's checkpoints to "
                 "{}\n",
                 aside);
    }
    std::vector<std::string> warnings;
    const auto found = find_resume_checkpoint(checkpoints_dir, spec.checkpoint.resume, &warnings);
    for (const auto& w : warnings) fmt::print(stderr, "warning: {}\n", w);
    if (found) chosen = *found;
  }
  uint64_t length = chosen.size();
  world.broadcast(&length, sizeof(length), 0);
  chosen.resize(length);
  world.broadcast(chosen.data(), length, 0);
  if (chosen.empty()) return std::nullopt;
  return chosen;
}

void write_job_yaml(const std::string& path, const JobSpec& spec) {
  const std::string text = job_spec_to_yaml(spec);
  AtomicFileWriter out(path);
  out.write(text.data(), text.size());
  out.commit();
}

void check_world(const JobSpec& spec, Communicator& world) {
  if (world.size() != spec.devices.processes) {
    throw SpecError(fmt::format("{}: the job asks for devices.processes {} but runs on {} "
                                "process(es); launch it with mpirun -np {} or set "
                                "devices.processes: {}",
                                spec.source, spec.devices.processes, world.size(),
                                spec.devices.processes, world.size()));
  }
}

// This process's block of virtual replicas and how a step's samples divide among them.
ReplicaPlan place_replicas(const JobSpec& spec, const ProcessModel& model) {
  ReplicaPlan plan;
  plan.replicas = spec.parallel.data;
  plan.local = plan.replicas / model.mesh.data_processes;
  plan.first = model.mesh.data * plan.local;
  plan.per_replica = spec.global_batch_per_replica();
  plan.accum = spec.grad_accum_steps();
  plan.micro = spec.train.micro_batch;
  plan.dloss = 1.0f / (static_cast<float>(spec.train.global_batch) * model.family->units_per_sample());
  plan.fused = model.family->synchronized_statistics() && plan.local > 1;
  if (spec.train.deterministic &&
      (!is_power_of_two(plan.local) || !is_power_of_two(model.mesh.data_processes))) {
    throw SpecError(fmt::format(
        "{}: train.deterministic sums replicas in a fixed binary tree, so the data-parallel "
        "processes ({}) and the replicas per process ({}) must be powers of two",
        spec.source, model.mesh.data_processes, plan.local));
  }
  return plan;
}

void resume(const RunEnvironment& env, ProcessModel& model, RunProgress& progress) {
  const LoadedCheckpoint loaded = load_checkpoint(*progress.resume_path);
  const ParameterLayout& layout = *model.layout;
  // Checkpoints hold whole tensors: each process takes its shard, whatever mesh wrote them.
  const Optimizer& optimizer = model.optimizer->optimizer();
  std::vector<std::vector<float>> state(optimizer.state_names().size(),
                                        std::vector<float>(layout.total()));
  HostMirror params(env.backend, model.param_data(), model.params.bytes() / sizeof(float), true);
  HostMirror buffers(env.backend, model.buffer_data(), model.buffer_floats(), true);
  LoadTargets targets{params.data(), buffers.data(), optimizer.name(), optimizer.state_names(), {}};
  for (auto& s : state) targets.state.push_back(s.data());
  progress.state = load_training_checkpoint(loaded, *model.family, layout, targets);
  params.upload();
  buffers.upload();
  std::vector<const float*> whole;
  for (const auto& s : state) whole.push_back(s.data());
  model.optimizer->load_state(whole);
  if (progress.state.seed != env.spec.seed) {
    throw RunError(*progress.resume_path + ": checkpoint was written with seed " +
                   std::to_string(progress.state.seed) + " but the job has seed " +
                   std::to_string(env.spec.seed) + "; resume with the same seed or set "
                   "checkpoint.resume: never");
  }
}

// The peak MFU divides by: devices.peak_tflops, else the GPU's data-sheet figure, else the
// measured SGEMM rate (bf16: bf16 product rate) of this process's threads on the CPU.
double peak_flops_per_process(const JobSpec& spec, Backend& backend, int threads) {
  if (spec.devices.peak_tflops > 0) return spec.devices.peak_tflops * 1e12;
  if (backend.device().is_cpu() || spec.devices.backend != BackendKind::Cuda) {
    return spec.train.precision == Precision::BF16 ? measure_bf16_peak_flops(threads)
                                                   : measure_sgemm_peak_flops(threads);
  }
  const auto gpus = cuda_devices();
  const auto index = static_cast<size_t>(backend.device().index);
  const double peak = index < gpus.size() ? gpu_peak_flops(gpus[index], spec.train.precision) : 0;
  if (peak > 0) return peak;
  fmt::print(stderr, "warning: no peak FLOP/s known for this GPU: set devices.peak_tflops for a "
                     "meaningful MFU\n");
  return std::numeric_limits<double>::infinity();  // MFU 0, not a made-up figure
}

// The threads, the run directory and the resolved job.yaml (rank 0 writes them).
void prepare_environment(RunEnvironment& env, const DevicePlacement& placement) {
  env.device_note = placement.note;
  env.threads = resolve_threads(env.spec);
  omp_set_num_threads(env.threads);
  openblas_set_num_threads(env.threads);
  env.run_dir = env.spec.log.dir;
  env.checkpoints_dir = env.run_dir + "/checkpoints";
  if (env.root()) {
    std::filesystem::create_directories(env.checkpoints_dir);
    write_job_yaml(env.run_dir + "/job.yaml", env.spec);
  } else {
    env.options.quiet = true;
  }
}

// This process's place in the virtual mesh, its shard of the model (tensor rank, pipeline
// stage), the optimizer over it and its tensors, initialised by the family.
void build_process_model(const RunEnvironment& env, ProcessModel& model, DeviceTransport transport) {
  const JobSpec& spec = env.spec;
  Backend& backend = env.backend;
  model.mesh = make_process_mesh(spec, env.world);
  attach_device_groups(model.mesh, backend, transport);
  const ProcessMesh& mesh = model.mesh;
  model.family->check_split(mesh.tensors, mesh.stages);
  model.tensor_group =
      std::make_unique<TensorGroup>(mesh.tensor_device(), spec.train.deterministic, backend);
  model.layout = std::make_unique<ParameterLayout>(model.family->description(), mesh.shard());
  const ParameterLayout& layout = *model.layout;
  model.optimizer = std::make_unique<DataParallelOptimizer>(
      layout, spec.optim, spec.parallel.zero, mesh.data_device(),
      layout.sharded() ? mesh.model_group.get() : nullptr, backend, mesh.data_group.get(),
      &mesh.tensor_device());
  const size_t padded = model.optimizer->padded_size();
  model.params = Buffer(backend, padded * sizeof(float));
  model.grads = Buffer(backend, padded * sizeof(float));
  model.buffers = Buffer(backend, std::max<size_t>(1, layout.buffer_total()) * sizeof(float));
  backend.zero(model.param_data(), padded);
  backend.zero(model.grad_data(), padded);
  HostMirror params(backend, model.param_data(), padded, false);
  HostMirror buffers(backend, model.buffer_data(), model.buffer_floats(), false);
  model.family->initialize(params.data(), buffers.data(), layout, spec.seed);
  params.upload();
  buffers.upload();
}

// Where the run starts: a checkpoint to resume, else model.init_from's weights (the optimizer
// state fresh and the run at step 0), else the initialisation; and the loss scale.
void start_progress(const RunEnvironment& env, ProcessModel& model, RunProgress& progress) {
  const JobSpec& spec = env.spec;
  progress.state.seed = spec.seed;
  progress.resume_path = choose_resume_checkpoint(spec, env.checkpoints_dir, env.world);
  if (progress.resume_path) {
    resume(env, model, progress);
  } else if (!spec.model.init_from.empty()) {
    HostMirror params(env.backend, model.param_data(), model.params.bytes() / sizeof(float), true);
    HostMirror buffers(env.backend, model.buffer_data(), model.buffer_floats(), true);
    const std::string what = load_initial_weights(spec.model.init_from, *model.family,
                                                  *model.layout, params.data(), buffers.data());
    params.upload();
    buffers.upload();
    if (env.root() && !env.options.quiet) fmt::print("initialised from {}\n", what);
  }
  // fp16 starts (or, from an fp32 checkpoint, restarts) loss scaling at the job's scale; a
  // resumed fp16 run goes on with its checkpoint's.
  TrainerState& state = progress.state;
  if (spec.train.precision == Precision::FP16 && state.loss_scale <= 0) {
    state.loss_scale = spec.train.loss_scale > 0 ? static_cast<float>(spec.train.loss_scale)
                                                 : kDefaultLossScale;
    state.loss_scale_clean_steps = 0;
  } else if (spec.train.precision != Precision::FP16) {
    state.loss_scale = 0;
  }
  progress.total_steps = spec.train.steps;
  progress.last_step = env.options.stop_after > 0
                           ? std::min<int64_t>(env.options.stop_after, progress.total_steps)
                           : progress.total_steps;
}

// The stage this process runs and the pipeline runner around it: one batch of the fused local
// replicas where the family synchronises batch statistics (and then a one-micro-batch stage for
// evaluation), else one replica's micro-batch.
void build_stages(const RunEnvironment& env, ProcessModel& model, const ReplicaPlan& plan) {
  const JobSpec& spec = env.spec;
  const ProcessMesh& mesh = model.mesh;
  const int stage_batch = plan.micro * (plan.fused ? plan.local : 1);
  StageContext context;
  context.backend = &env.backend;
  context.micro_batch = stage_batch;
  context.slots = pipeline_slots(spec.parallel.schedule, mesh.stage, mesh.stages, plan.accum);
  context.tensor_group = model.tensor_group.get();
  context.replica_group = mesh.data_group.get();
  model.stage = model.family->make_stage(*model.layout, context);
  model.runner = std::make_unique<PipelineRunner>(
      *model.stage, model.family->batch_fields(stage_batch), mesh.pipeline_device(),
      spec.parallel.schedule, plan.accum, env.backend);
  if (!plan.fused) return;
  context.micro_batch = plan.micro;
  context.slots = 1;
  model.eval_stage = model.family->make_stage(*model.layout, context);
  model.eval_runner = std::make_unique<PipelineRunner>(
      *model.eval_stage, model.family->batch_fields(plan.micro), mesh.pipeline_device(),
      spec.parallel.schedule, 1, env.backend);
}

}  // namespace

TrainingRun::TrainingRun(const JobSpec& s, Communicator& w, const TrainOptions& o, Backend& b)
    : env(s, w, o, b) {}
TrainingRun::~TrainingRun() = default;

int resolve_threads(const JobSpec& spec) {
  if (spec.devices.threads > 0) return spec.devices.threads;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Processes sharing this node: MPI's shared-memory split says so; without MPI all of the
  // job's processes would land here.
  const int on_node = node_share(spec.devices.processes).local_size;
  return std::max(1, cores / std::max(1, on_node));
}

std::unique_ptr<TrainingRun> set_up_training(const JobSpec& spec, Communicator& world,
                                             const TrainOptions& options) {
  auto family = make_model_family(spec);  // refuses an unknown model.arch first
  check_world(spec, world);
  const DevicePlacement placement = place_on_device(spec, world);
  Backend& backend =
      options.backend != nullptr ? *options.backend : backend_for(spec.devices.backend, placement.device);
  backend.set_precision(spec.train.precision);
  auto run = std::make_unique<TrainingRun>(spec, world, options, backend);
  RunEnvironment& env = run->env;
  prepare_environment(env, placement);
  run->model.family = std::move(family);
  run->data = open_dataset(spec, run->model.family->batch_fields(spec.train.micro_batch));
  build_process_model(env, run->model, placement.transport);
  start_progress(env, run->model, run->progress);
  if (env.root()) {
    run->log.emplace(env.run_dir, run->progress.state.step, run->progress.total_steps,
                     run->model.family->sample_unit(), spec.log.tensorboard);
  }
  run->plan = place_replicas(spec, run->model);
  build_stages(env, run->model, run->plan);
  run->reduction = std::make_unique<GradientReduction>(env, run->model, run->plan);
  run->flops_per_step = run->model.family->training_flops_per_sample() *
                        static_cast<double>(spec.train.global_batch) / world.size();
  run->peak_flops = peak_flops_per_process(spec, backend, env.threads);
  return run;
}

}  // namespace sg
