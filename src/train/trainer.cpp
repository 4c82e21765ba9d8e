// The training loop of one process (trainer.h): set up, evaluate, step, log, checkpoint.
#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "backend/host_mirror.h"
#include "config/duration.h"
#include "launch/process_world.h"
#include "launch/stop_signal.h"
#include "train/evaluate.h"
#include "train/training_run.h"
#include "util/error.h"

namespace sg {
namespace {

constexpr int kStopTimeLimit = -1;

// Whether to stop at this step boundary, the same answer on every process: a stop signal on any
// of them (its number), or rank 0's clock past train.time_limit less the longest step so far
// and a margin for the checkpoint (kStopTimeLimit). One small all-reduce per step.
int agree_on_stop(const RunEnvironment& env, const RunProgress& progress,
                  const std::optional<double>& time_limit, double longest_step) {
  int stop[2] = {stop_signal_received(), 0};
  if (time_limit && env.root()) {
    const double elapsed = process_seconds();
    // The next step must end, and a checkpoint be written, before the limit.
    if (elapsed + 2 * longest_step + progress.last_save_seconds >= *time_limit) stop[1] = 1;
  }
  if (env.world.size() > 1) env.world.all_reduce_max(stop, 2);
  if (stop[0] != 0) return stop[0];
  return stop[1] != 0 ? kStopTimeLimit : 0;
}

bool due(int64_t step, int every, int64_t last_step) {
  return step == last_step || (every > 0 && step % every == 0);
}

void log_start(TrainingRun& run) {
  const RunEnvironment& env = run.env;
  if (env.options.quiet) return;
  const JobSpec& spec = env.spec;
  const RunProgress& progress = run.progress;
  run.log->log_message(fmt::format(
      "{}: {}, {} parameters, {} on {} process(es) x {} thread(s) (mesh data {} x tensor {} x "
      "pipeline {}), {} steps of {} samples{}",
      spec.name, run.model.family->summary(), run.model.family->parameter_count(),
      run.data.description, env.world.size(), env.threads, spec.parallel.data,
      spec.parallel.tensor, spec.parallel.pipeline, progress.total_steps, spec.train.global_batch,
      progress.resume_path
          ? fmt::format(", resumed from {} at step {}", *progress.resume_path, progress.state.step)
          : std::string()));
  if (!env.device_note.empty()) run.log->log_message("device: " + env.device_note);
}

// Validation runs on the shards of replica block 0 (world rank 0 among them); the others go on.
void maybe_evaluate(TrainingRun& run, TrainResult& result, bool initial) {
  const JobSpec& spec = run.env.spec;
  const ProcessModel& model = run.model;
  if (model.mesh.data != 0 || spec.eval.steps <= 0) return;
  const Evaluation e = evaluate_validation(model.evaluation_runner(), *model.family, *run.data.val,
                                           spec.train.micro_batch, spec.eval.steps,
                                           model.param_data(), model.buffer_data(),
                                           *model.mesh.model_group, model.mesh.reports_loss());
  if (initial) {
    result.first_val_loss = e.loss;
  } else {
    result.last_val_loss = e.loss;
  }
  result.val_metrics = e.named(*model.family);
  if (run.env.root()) {
    run.log->log_eval(run.progress.state.step, e.loss, run.data.best_val_loss.value_or(-1),
                      result.val_metrics);
  }
}

// Whole tensors, assembled for rank 0 only, and only while saving. Collective under ZeRO (the
// optimizer state's shards) and over the model group (the shards of replica block 0).
void save_checkpoint_now(const RunEnvironment& env, const ProcessModel& model,
                         RunProgress& progress, MetricsLog* log) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::vector<float>> state = model.optimizer->gather_state();
  if (model.mesh.data != 0) return;
  const ParameterLayout& layout = *model.layout;
  WholeTensors whole;
  whole.optimizer = model.optimizer->optimizer().name();
  whole.state_names = model.optimizer->optimizer().state_names();
  std::vector<float> params, buffers;
  std::vector<std::vector<float>> whole_state(state.size());
  HostMirror local_params(env.backend, model.param_data(), layout.total(), true);
  HostMirror local_buffers(env.backend, model.buffer_data(), layout.buffer_total(), true);
  whole.params = local_params.data();
  whole.buffers = local_buffers.data();
  for (const auto& s : state) whole.state.push_back(s.data());
  if (layout.sharded()) {
    Communicator& group = *model.mesh.model_group;
    gather_whole_model(layout, local_params.data(), params, group);
    gather_whole_buffers(layout, local_buffers.data(), buffers, group);
    for (size_t i = 0; i < state.size(); ++i) {
      gather_whole_model(layout, state[i].data(), whole_state[i], group);
      whole.state[i] = whole_state[i].data();
    }
    whole.params = params.data();
    whole.buffers = buffers.data();
  }
  if (env.root()) {
    const std::string path = save_training_checkpoint(env.checkpoints_dir, env.spec, *model.family,
                                                      whole, progress.state);
    if (!env.options.quiet) log->log_message("saved checkpoint " + path);
  }
  progress.last_save_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// One step's line of metrics (rank 0).
void log_step(TrainingRun& run, const StepResult& step, double seconds) {
  const RunEnvironment& env = run.env;
  const JobSpec& spec = env.spec;
  const TrainerState& state = run.progress.state;
  StepMetrics m;
  m.step = state.step;
  m.loss = static_cast<float>(step.loss);
  m.lr = static_cast<float>(step.lr);
  m.grad_norm = step.grad_norm;
  m.loss_scale = step.loss_scale;
  m.skipped = step.skipped;
  m.overflow = step.overflow;
  m.skipped_steps = state.skipped_steps;
  m.skipped_in_row = state.skipped_in_row;
  m.max_skipped_in_row = spec.train.max_skipped_steps;
  m.step_ms = seconds * 1e3;
  m.throughput = static_cast<double>(spec.train.global_batch) *
                 run.model.family->units_per_sample() / seconds;
  m.mfu = run.flops_per_step / seconds / run.peak_flops;
  // The device's peak where the step runs on a GPU, the process's resident peak on the host.
  m.peak_mem_bytes = env.backend.device().is_cpu() ? peak_resident_bytes()
                                                   : env.backend.device_memory_peak();
  const bool print = !env.options.quiet &&
                     (m.step % spec.log.every == 0 || m.step == run.progress.last_step ||
                      m.step == 1 || m.skipped);
  run.log->log_step(m, print);
}

void say_stopped(const RunEnvironment& env, const RunProgress& progress, MetricsLog& log,
                 const std::string& stopped_by) {
  const std::string& resume = env.spec.checkpoint.resume;
  log.log_message(fmt::format(
      "stopped at step {} of {} on {}: checkpoint saved; {} to continue", progress.state.step,
      progress.total_steps, stopped_by,
      resume == "never" ? "run again with --set checkpoint.resume=auto"
                        : "run the same command again (checkpoint.resume: " + resume + ")"));
}

}  // namespace

TrainResult run_training(const JobSpec& spec, const TrainOptions& options) {
  auto world = make_single_process_communicator();
  return run_training(spec, *world, options);
}

TrainResult run_training(const JobSpec& spec, Communicator& world, const TrainOptions& options) {
  std::unique_ptr<TrainingRun> owned = set_up_training(spec, world, options);
  TrainingRun& run = *owned;
  const RunEnvironment& env = run.env;
  RunProgress& progress = run.progress;
  TrainResult result;
  result.first_step = progress.state.step;
  result.best_possible_val_loss = run.data.best_val_loss;
  log_start(run);
  if (progress.state.step == 0) maybe_evaluate(run, result, /*initial=*/true);

  // train.time_limit counts from the start of this process.
  const std::optional<double> time_limit = parse_duration_seconds(spec.train.time_limit);
  double longest_step = 0;
  MetricsLog* log = run.log ? &*run.log : nullptr;  // rank 0's
  while (progress.state.step < progress.last_step) {
    const auto t0 = std::chrono::steady_clock::now();
    const StepResult step = train_step(run);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    result.final_loss = step.loss;
    if (env.root()) log_step(run, step, seconds);
    const int64_t done = progress.state.step;
    if (due(done, spec.eval.every, progress.last_step)) maybe_evaluate(run, result, false);
    const bool saved = due(done, spec.checkpoint.every, progress.last_step);
    if (saved) save_checkpoint_now(env, run.model, progress, log);
    longest_step = std::max(longest_step, seconds);
    const int stop = agree_on_stop(env, progress, time_limit, longest_step);
    if (stop != 0 && done < progress.last_step) {
      if (!saved) save_checkpoint_now(env, run.model, progress, log);
      result.stopped_by = stop == kStopTimeLimit ? "train.time_limit" : signal_name(stop);
      if (env.root() && !env.options.quiet) say_stopped(env, progress, *log, result.stopped_by);
      break;
    }
  }
  result.last_step = progress.state.step;
  return result;
}

}  // namespace sg
