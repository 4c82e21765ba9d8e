// One optimizer step (training_run.h): the local virtual replicas one after another, the
// gradient reduction, the optimizer, and the exchanges that keep copies equal.
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "checkpoint/checkpoint.h"
#include "optim/lr_schedule.h"
#include "train/gradient_reduction.h"
#include "train/loss_scale.h"
#include "train/training_run.h"
#include "util/error.h"

namespace sg {
namespace {

// Test hook (tests/e2e): SINGULARITY_TEST_FAIL="RANK:STEP" makes that rank throw during that
// step, before the gradient reduction, as a real fault would.
bool injected_failure(int rank, int64_t step) {
  const char* v = std::getenv("SINGULARITY_TEST_FAIL");
  if (v == nullptr) return false;
  int fail_rank = -1;
  long long fail_step = -1;
  return std::sscanf(v, "%d:%lld", &fail_rank, &fail_step) == 2 && fail_rank == rank &&
         fail_step == step;
}

// Test hook (tests/e2e): SINGULARITY_TEST_NONFINITE="S1,S2,..." makes the gradients of those
// steps NaN on every process, as a diverging step's would be.
bool injected_nonfinite(int64_t step) {
  const char* v = std::getenv("SINGULARITY_TEST_NONFINITE");
  if (v == nullptr) return false;
  std::string list = v;
  size_t start = 0;
  while (start < list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    if (std::atoll(list.substr(start, comma - start).c_str()) == step) return true;
    start = comma + 1;
  }
  return false;
}

// Running statistics follow data-parallel replica 0 (DDP's broadcast_buffers): it alone updates
// them, then every replica of the stage takes its values.
void share_buffers(ProcessModel& model) {
  const size_t n = model.layout->buffer_total();
  Communicator& group = model.mesh.data_device();
  if (n == 0 || group.size() == 1) return;
  group.broadcast(model.buffer_data(), n * sizeof(float), /*root=*/0);
}

// Forward and backward of this process's replicas, one after another on the same weights, each
// on the samples the virtual mesh assigns it whatever the physical layout (with synchronised
// batch statistics, together as one batch); their gradients and losses go to `reduction`.
void run_replicas(ProcessModel& model, const ReplicaPlan& plan, Dataset& data,
                  GradientReduction& reduction, uint64_t step_start, float dloss) {
  const int micro = plan.micro;
  const int groups = plan.fused ? 1 : plan.local;
  const int together = plan.fused ? plan.local : 1;
  std::vector<uint64_t> firsts;
  for (int r = plan.first; r < plan.first + plan.local; ++r) {
    for (int a = 0; a < plan.accum; ++a) firsts.push_back(plan.first_sample(step_start, r, a));
  }
  if (model.runner->consumes_batches()) data.train->prefetch(firsts, micro);
  for (int group = 0; group < groups; ++group) {
    const int r = plan.first + group;  // the group's first replica
    const auto fill = [&](int a, MicroBatch& batch) {
      for (int k = 0; k < together; ++k)
        data.train->fill_rows(batch, k * micro, micro, plan.first_sample(step_start, r + k, a));
    };
    double loss = model.runner->train(model.param_data(), model.buffer_data(),
                                      reduction.replica_grads(r), dloss, fill,
                                      /*update_buffers=*/r == 0, reduction.on_ready(r + together - 1));
    if (!model.mesh.reports_loss()) loss = 0;
    // A fused batch's micro-batch means average `together` replicas' means.
    reduction.replica_done(r, loss * together);
  }
}

// The optimizer's update from the summed gradients, unless the loss is not finite (every
// process holds the same loss sum, the world's, so all skip together; a non-finite global norm
// likewise makes the optimizer skip). Sets result.grad_norm; returns whether it applied.
bool apply_update(ProcessModel& model, const GradientReduction& reduction, StepResult& result,
                  int step_number, float loss_scale) {
  bool applied = false;
  if (!std::isfinite(result.loss)) {
    result.grad_norm = std::numeric_limits<float>::quiet_NaN();
    return false;
  }
  DataParallelOptimizer& optimizer = *model.optimizer;
  result.grad_norm =
      reduction.reduced()
          ? optimizer.step_reduced(model.param_data(), model.grad_data(), result.lr, step_number,
                                   loss_scale, &applied)
          : optimizer.step(model.param_data(), model.grad_data(), result.lr, step_number,
                           loss_scale, &applied);
  return applied;
}

// Counts a skipped update; past train.max_skipped_steps in a row the run stops, naming the last
// good checkpoint. Overflows while the fp16 scale can still halve are expected; at the smallest
// scale they count.
void count_skips(TrainerState& state, const StepResult& result, bool applied, float loss_scale,
                 const TrainSpec& train, const std::string& checkpoints_dir, int64_t step) {
  if (applied) {
    state.skipped_in_row = 0;
    return;
  }
  ++state.skipped_steps;
  if (!result.overflow || loss_scale <= kMinLossScale) ++state.skipped_in_row;
  if (state.skipped_in_row < train.max_skipped_steps) return;
  const auto checkpoints = list_checkpoints(checkpoints_dir);
  throw RunError(fmt::format(
      "{} steps in a row up to step {} had a loss or gradients that are not finite (loss {}, "
      "norm {}); training diverged. Resume from the last good checkpoint{} with a lower "
      "optim.lr or a longer optim.warmup_steps (train.max_skipped_steps sets this limit)",
      state.skipped_in_row, step + 1, result.loss, result.grad_norm,
      checkpoints.empty() ? std::string(" (none was written; start over)")
                          : " " + checkpoints.back().second));
}

}  // namespace

StepResult train_step(TrainingRun& run) {
  const RunEnvironment& env = run.env;
  const JobSpec& spec = env.spec;
  ProcessModel& model = run.model;
  GradientReduction& reduction = *run.reduction;
  TrainerState& state = run.progress.state;
  const int64_t step = state.step;  // 0-based index of this step
  StepResult result;
  result.lr = learning_rate_at(spec.optim, static_cast<int>(step),
                               static_cast<int>(run.progress.total_steps));
  reduction.begin_step();
  // fp16: the loss gradient carries the loss scale (loss_scale.h); the optimizer divides it out.
  const bool scaled = spec.train.precision == Precision::FP16;
  const float loss_scale = scaled ? state.loss_scale : 1.0f;
  run_replicas(model, run.plan, run.data, reduction, state.train_samples, run.plan.dloss * loss_scale);
  if (injected_failure(env.world.rank(), step + 1)) {
    throw RunError(fmt::format("injected failure at step {} (SINGULARITY_TEST_FAIL)", step + 1));
  }
  // Replicas on other processes: their gradients already carry the 1/(global batch) factor, so
  // the sum is the gradient of the mean loss; losses likewise.
  const double loss_sum = reduction.finish();
  result.loss = loss_sum / (static_cast<double>(run.plan.replicas) * run.plan.accum);
  add_tied_grads(*model.layout, model.grad_data(), model.mesh.pipeline_device(), model.tied_scratch,
                 env.backend);
  if (injected_nonfinite(step + 1)) {
    env.backend.fill({model.grad_data(), 0, DType::F32, env.backend.device(),
                      {static_cast<int64_t>(model.grad_floats())}},
                     std::numeric_limits<double>::quiet_NaN());
  }
  const bool applied = apply_update(model, reduction, result, static_cast<int>(step + 1), loss_scale);
  result.skipped = !applied;
  if (scaled) {
    // An fp16 overflow with a finite loss is the loss scale's business: it halves.
    result.overflow = !applied && std::isfinite(result.loss);
    result.loss_scale = loss_scale;
    update_loss_scale(state, applied);
  }
  count_skips(state, result, applied, loss_scale, spec.train, env.checkpoints_dir, step);
  if (applied) copy_tied_params(*model.layout, model.param_data(), model.mesh.pipeline_device());
  share_buffers(model);
  state.step = step + 1;
  state.train_samples += static_cast<uint64_t>(spec.train.global_batch);
  return result;
}

}  // namespace sg
