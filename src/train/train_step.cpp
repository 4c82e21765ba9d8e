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
void share_buffers(TrainingRun& run) {
  const size_t n = run.layout->buffer_total();
  Communicator& group = run.mesh.data_device();
  if (n == 0 || group.size() == 1) return;
  group.broadcast(run.buffer_data(), n * sizeof(float), /*root=*/0);
}

}  // namespace

StepResult train_step(TrainingRun& run) {
  GradientReduction* reduction = run.reduction.get();
  const JobSpec& spec = run.spec;
  const int64_t step = run.state.step;  // 0-based index of this step
  StepResult result;
  result.lr = learning_rate_at(spec.optim, static_cast<int>(step), static_cast<int>(run.total_steps));
  reduction->begin_step();
  // fp16: the loss gradient carries the loss scale (loss_scale.h); the optimizer divides it out.
  const bool scaled = spec.train.precision == Precision::FP16;
  const float loss_scale = scaled ? run.state.loss_scale : 1.0f;
  const float dloss = run.dloss * loss_scale;
  // Virtual data-parallel replicas run one after another on the same weights; each sees the
  // samples the virtual mesh assigns it, whatever the physical layout. With synchronised batch
  // statistics they run together, as one batch.
  const int micro = spec.train.micro_batch;
  const auto first_sample = [&](int r, int a) {
    return run.state.train_samples + static_cast<uint64_t>(r) * static_cast<uint64_t>(run.per_replica) +
           static_cast<uint64_t>(a) * static_cast<uint64_t>(micro);
  };
  const int groups = run.fused_replicas ? 1 : run.local_replicas;
  const int together = run.fused_replicas ? run.local_replicas : 1;
  std::vector<uint64_t> firsts;
  for (int r = run.first_replica; r < run.first_replica + run.local_replicas; ++r) {
    for (int a = 0; a < run.accum; ++a) firsts.push_back(first_sample(r, a));
  }
  if (run.runner->consumes_batches()) run.data.train->prefetch(firsts, micro);
  for (int group = 0; group < groups; ++group) {
    const int r = run.first_replica + group;  // the group's first replica
    const auto fill = [&](int a, MicroBatch& batch) {
      for (int k = 0; k < together; ++k) run.data.train->fill_rows(batch, k * micro, micro, first_sample(r + k, a));
    };
    double loss = run.runner->train(run.param_data(), run.buffer_data(), reduction->replica_grads(r),
                                    dloss, fill, /*update_buffers=*/r == 0,
                                    reduction->on_ready(r + together - 1));
    if (!run.mesh.reports_loss()) loss = 0;
    // A fused batch's micro-batch means average `together` replicas' means.
    reduction->replica_done(r, loss * together);
  }
  if (injected_failure(run.world.rank(), step + 1)) {
    throw RunError(fmt::format("injected failure at step {} (SINGULARITY_TEST_FAIL)", step + 1));
  }
  // Replicas on other processes: their gradients already carry the 1/(global batch) factor, so
  // the sum is the gradient of the mean loss; losses likewise.
  const double loss_sum = reduction->finish();
  result.loss = loss_sum / (static_cast<double>(run.replicas) * run.accum);
  add_tied_grads(*run.layout, run.grad_data(), run.mesh.pipeline_device(), run.tied_scratch,
                 run.backend);
  const int step_number = static_cast<int>(step + 1);
  if (injected_nonfinite(step + 1)) {
    run.backend.fill({run.grad_data(), 0, DType::F32, run.backend.device(),
                      {static_cast<int64_t>(run.grads.bytes() / sizeof(float))}},
                     std::numeric_limits<double>::quiet_NaN());
  }
  // Every process holds the same loss sum (the world's), so all skip together when it is not
  // finite; a non-finite global norm likewise (the optimizer skips the update).
  bool applied = false;
  if (std::isfinite(result.loss)) {
    result.grad_norm =
        reduction->reduced()
            ? run.optimizer->step_reduced(run.param_data(), run.grad_data(), result.lr,
                                          step_number, loss_scale, &applied)
            : run.optimizer->step(run.param_data(), run.grad_data(), result.lr, step_number,
                                  loss_scale, &applied);
  } else {
    result.grad_norm = std::numeric_limits<float>::quiet_NaN();
  }
  result.skipped = !applied;
  if (scaled) {
    // An fp16 overflow with a finite loss is the loss scale's business: it halves.
    result.overflow = !applied && std::isfinite(result.loss);
    result.loss_scale = loss_scale;
    update_loss_scale(run.state, applied);
  }
  if (applied) {
    run.state.skipped_in_row = 0;
  } else {
    ++run.state.skipped_steps;
    // Overflows while the scale can still halve are expected; at the smallest scale they count.
    if (!result.overflow || loss_scale <= kMinLossScale) ++run.state.skipped_in_row;
  }
  if (run.state.skipped_in_row >= spec.train.max_skipped_steps) {
    const auto checkpoints = list_checkpoints(run.checkpoints_dir);
    throw RunError(fmt::format(
        "{} steps in a row up to step {} had a loss or gradients that are not finite (loss {}, "
        "norm {}); training diverged. Resume from the last good checkpoint{} with a lower "
        "optim.lr or a longer optim.warmup_steps (train.max_skipped_steps sets this limit)",
        run.state.skipped_in_row, step + 1, result.loss, result.grad_norm,
        checkpoints.empty() ? std::string(" (none was written; start over)")
                            : " " + checkpoints.back().second));
  }
  if (applied) copy_tied_params(*run.layout, run.param_data(), run.mesh.pipeline_device());
  share_buffers(run);
  run.state.step = step + 1;
  run.state.train_samples += static_cast<uint64_t>(spec.train.global_batch);
  return result;
}

}  // namespace sg
