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

// This process's block of virtual replicas and the loss scale.
void place_replicas(TrainingRun& run) {
  const JobSpec& spec = run.spec;
  run.replicas = spec.parallel.data;
  run.local_replicas = run.replicas / run.mesh.data_processes;
  run.first_replica = run.mesh.data * run.local_replicas;
  run.per_replica = spec.global_batch_per_replica();
  run.accum = spec.grad_accum_steps();
  run.dloss = 1.0f / (static_cast<float>(spec.train.global_batch) * run.family->units_per_sample());
  if (spec.train.deterministic &&
      (!is_power_of_two(run.local_replicas) || !is_power_of_two(run.mesh.data_processes))) {
    throw SpecError(fmt::format(
        "{}: train.deterministic sums replicas in a fixed binary tree, so the data-parallel "
        "processes ({}) and the replicas per process ({}) must be powers of two",
        spec.source, run.mesh.data_processes, run.local_replicas));
  }
}

void resume(TrainingRun& run) {
  const LoadedCheckpoint loaded = load_checkpoint(*run.resume_path);
  const ParameterLayout& layout = *run.layout;
  // Checkpoints hold whole tensors: each process takes its shard, whatever mesh wrote them.
  const Optimizer& optimizer = run.optimizer->optimizer();
  std::vector<std::vector<float>> state(optimizer.state_names().size(),
                                        std::vector<float>(layout.total()));
  HostMirror params(run.backend, run.param_data(), run.params.bytes() / sizeof(float), true);
  HostMirror buffers(run.backend, run.buffer_data(), run.buffers.bytes() / sizeof(float), true);
  LoadTargets targets{params.data(), buffers.data(), optimizer.name(), optimizer.state_names(), {}};
  for (auto& s : state) targets.state.push_back(s.data());
  run.state = load_training_checkpoint(loaded, *run.family, layout, targets);
  params.upload();
  buffers.upload();
  std::vector<const float*> whole;
  for (const auto& s : state) whole.push_back(s.data());
  run.optimizer->load_state(whole);
  if (run.state.seed != run.spec.seed) {
    throw RunError(*run.resume_path + ": checkpoint was written with seed " +
                   std::to_string(run.state.seed) + " but the job has seed " +
                   std::to_string(run.spec.seed) + "; resume with the same seed or set "
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

}  // namespace

TrainingRun::TrainingRun(const JobSpec& s, Communicator& w, const TrainOptions& o, Backend& b)
    : spec(s), world(w), options(o), backend(b) {}
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
  run->device_note = placement.note;
  run->family = std::move(family);
  run->threads = resolve_threads(spec);
  omp_set_num_threads(run->threads);
  openblas_set_num_threads(run->threads);

  run->run_dir = spec.log.dir;
  run->checkpoints_dir = run->run_dir + "/checkpoints";
  if (run->root()) {
    std::filesystem::create_directories(run->checkpoints_dir);
    write_job_yaml(run->run_dir + "/job.yaml", spec);
  } else {
    run->options.quiet = true;
  }
  run->data = open_dataset(spec, run->family->batch_fields(spec.train.micro_batch));

  // This process's place in the virtual mesh: its shard of the model (tensor rank, pipeline
  // stage) and its block of data-parallel replicas.
  run->mesh = make_process_mesh(spec, world);
  attach_device_groups(run->mesh, backend, placement.transport);
  const ProcessMesh& mesh = run->mesh;
  run->family->check_split(mesh.tensors, mesh.stages);
  run->tensor_group =
      std::make_unique<TensorGroup>(mesh.tensor_device(), spec.train.deterministic, backend);
  run->layout = std::make_unique<ParameterLayout>(run->family->description(), mesh.shard());
  const ParameterLayout& layout = *run->layout;
  run->optimizer = std::make_unique<DataParallelOptimizer>(
      layout, spec.optim, spec.parallel.zero, mesh.data_device(),
      layout.sharded() ? mesh.model_group.get() : nullptr, backend, mesh.data_group.get());
  const size_t padded = run->optimizer->padded_size();
  run->params = Buffer(backend, padded * sizeof(float));
  run->grads = Buffer(backend, padded * sizeof(float));
  run->buffers = Buffer(backend, std::max<size_t>(1, layout.buffer_total()) * sizeof(float));
  backend.zero(run->param_data(), padded);
  backend.zero(run->grad_data(), padded);
  {
    HostMirror params(backend, run->param_data(), padded, false);
    HostMirror buffers(backend, run->buffer_data(), run->buffers.bytes() / sizeof(float), false);
    run->family->initialize(params.data(), buffers.data(), layout, spec.seed);
    params.upload();
    buffers.upload();
  }

  run->state.seed = spec.seed;
  run->resume_path = choose_resume_checkpoint(spec, run->checkpoints_dir, world);
  if (run->resume_path) {
    resume(*run);
  } else if (!spec.model.init_from.empty()) {
    // model.init_from: the weights only; the optimizer state stays fresh and the run at step 0.
    HostMirror params(backend, run->param_data(), padded, true);
    HostMirror buffers(backend, run->buffer_data(), run->buffers.bytes() / sizeof(float), true);
    const std::string what = load_initial_weights(spec.model.init_from, *run->family, layout,
                                                  params.data(), buffers.data());
    params.upload();
    buffers.upload();
    if (run->root() && !options.quiet) fmt::print("initialised from {}\n", what);
  }
  // fp16 starts (or, from an fp32 checkpoint, restarts) loss scaling at the job's scale; a
  // resumed fp16 run goes on with its checkpoint's.
  if (spec.train.precision == Precision::FP16 && run->state.loss_scale <= 0) {
    run->state.loss_scale = spec.train.loss_scale > 0 ? static_cast<float>(spec.train.loss_scale)
                                                      : kDefaultLossScale;
    run->state.loss_scale_clean_steps = 0;
  } else if (spec.train.precision != Precision::FP16) {
    run->state.loss_scale = 0;
  }

  run->total_steps = spec.train.steps;
  run->last_step = options.stop_after > 0 ? std::min<int64_t>(options.stop_after, run->total_steps)
                                          : run->total_steps;
  if (run->root()) {
    run->log.emplace(run->run_dir, run->state.step, run->total_steps, run->family->sample_unit(),
                     spec.log.tensorboard);
  }
  place_replicas(*run);
  run->fused_replicas = run->family->synchronized_statistics() && run->local_replicas > 1;
  const int micro = spec.train.micro_batch;
  const int stage_batch = micro * (run->fused_replicas ? run->local_replicas : 1);
  StageContext context;
  context.backend = &backend;
  context.micro_batch = stage_batch;
  context.slots = pipeline_slots(spec.parallel.schedule, mesh.stage, mesh.stages, run->accum);
  context.tensor_group = run->tensor_group.get();
  context.replica_group = mesh.data_group.get();
  run->stage = run->family->make_stage(layout, context);
  run->runner = std::make_unique<PipelineRunner>(*run->stage, run->family->batch_fields(stage_batch),
                                                 mesh.pipeline_device(), spec.parallel.schedule,
                                                 run->accum, backend);
  if (run->fused_replicas) {
    context.micro_batch = micro;
    context.slots = 1;
    run->eval_stage = run->family->make_stage(layout, context);
    run->eval_runner = std::make_unique<PipelineRunner>(
        *run->eval_stage, run->family->batch_fields(micro), mesh.pipeline_device(),
        spec.parallel.schedule, 1, backend);
  }
  run->reduction = std::make_unique<GradientReduction>(*run);

  run->flops_per_step = run->family->training_flops_per_sample() *
                        static_cast<double>(spec.train.global_batch) / world.size();
  run->peak_flops = peak_flops_per_process(spec, backend, run->threads);
  return run;
}

}  // namespace sg
