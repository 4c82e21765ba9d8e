#pragma once
// Learning rate at a step: linear warmup from lr/warmup to lr, then decay to min_lr at the
// last step (cosine, linear), or by decay_gamma every decay_every steps counted from step 0
// (step; min_lr unused), or none. Steps are 0-based, as in the training loop.
#include "config/job_spec.h"

namespace sg {

double learning_rate_at(const OptimSpec& optim, int step, int total_steps);

}  // namespace sg
